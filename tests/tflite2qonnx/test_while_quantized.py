"""Full-integer tf.while_loop models (WHILE whose subgraphs hold int8 tensors) against the
interpreter: the Loop body's quantizers are standard ops computing what each Quant computes,
so onnxruntime and qonnx's executor (which hands the Loop node to onnxruntime) run it.

Also a float WHILE after a convolution the layout pass permutes.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from control_flow_models import in_fresh_process
from litert_compare import compare, real_value, reference_interpreter
from quantized_while_models import int8_carried_while_model

import tflite2qonnx
from qonnx_ingest.errors import ConversionError, ConversionWarning
from qonnx_ingest.execute import execute_qonnx
from qonnx_ingest.qcdq import to_qcdq
from qonnx_ingest.verification import run_converted
from tflite2qonnx.reference import verify

pytestmark = pytest.mark.keras


@pytest.fixture(scope="module")
def models() -> dict[str, bytes]:
    return in_fresh_process(
        {
            "counted": ("counted_while_model", {}),
            "dense tanh": ("dense_tanh_while_model", {}),
            "conv then while": ("conv_then_while_model", {}),
        },
        module="quantized_while_models",
    )


def _int8_inputs(data: bytes, count: int, seed: int) -> list[np.ndarray]:
    (inp,) = reference_interpreter(data).get_input_details()
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, inp["shape"]).astype(np.int8) for _ in range(count)]


def _interpreter_outputs(data: bytes, xs: list[np.ndarray]) -> list[dict[str, np.ndarray]]:
    """Raw outputs (int8 or int32) per input, each on a fresh interpreter."""
    outs = []
    for x in xs:
        it = reference_interpreter(data)
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        outs.append({o["name"]: it.get_tensor(o["index"]) for o in it.get_output_details()})
    return outs


def _ours(model: onnx.ModelProto, data: bytes, xs: list[np.ndarray]):
    """Our outputs (real values) per input, run as --verify runs them, and the feeds."""
    (inp,) = reference_interpreter(data).get_input_details()
    feeds = [{inp["name"]: real_value(x, inp["quantization"])} for x in xs]
    ours, runner = run_converted(model, feeds)
    assert runner.startswith("onnxruntime")
    return ours, feeds


def _steps(data: bytes, refs, ours) -> np.ndarray:
    """|ours - interpreter| in steps of each int8 output's grid, all elements."""
    details = {o["name"]: o for o in reference_interpreter(data).get_output_details()}
    steps = []
    for ref, mine in zip(refs, ours, strict=True):
        for name, value in ref.items():
            if value.dtype != np.int8:
                continue
            scale, zero_point = details[name]["quantization"]
            grid = np.round(np.asarray(mine[name]).reshape(value.shape) / scale + zero_point)
            steps.append(np.abs(grid - value.astype(np.float64)).ravel())
    return np.concatenate(steps)


def _loop(model: onnx.ModelProto) -> onnx.NodeProto:
    (loop,) = [n for n in model.graph.node if n.op_type == "Loop"]
    return loop


def test_int8_while_keeps_the_interpreters_trip_counts_and_bit_exact_values(models) -> None:
    """v <- 0.75 v + 0.5 until max(v) >= 1.2: QUANTIZE, MUL, ADD, REDUCE_MAX inside the
    loop. Every input's trip count equals the interpreter's; with --bit-exact (MUL and ADD
    in the kernels' fixed point) every element of v too, rounding once per op within one
    step (measured: all equal). The loop's grids are 3:4 apart, so requantizing v each step
    meets exact ties: TFLite rounds x / s before adding the zero point, and so must we."""
    data = models["counted"]
    xs = _int8_inputs(data, 64, seed=1)
    refs = _interpreter_outputs(data, xs)
    counts = [int(r["Identity_1"]) for r in refs]
    assert len(set(counts)) >= 3  # the loop stops after different numbers of steps
    for bit_exact in (True, False):
        ours, _ = _ours(tflite2qonnx.convert(data, bit_exact=bit_exact), data, xs)
        assert [int(o["Identity_1"]) for o in ours] == counts
        steps = _steps(data, refs, ours)
        assert steps.size == 64 * 3 and steps.max() <= (0 if bit_exact else 1)


def test_quantizers_inside_the_loop_are_standard_ops_and_outside_stay_quant(models) -> None:
    """Consumers read widths from the top-level Quant nodes (input, first condition test,
    the WHILE's result); the Loop body holds default-domain ops only."""
    model = tflite2qonnx.convert(models["counted"])
    top = [n.op_type for n in model.graph.node]
    assert top.count("Quant") >= 3 and "Loop" in top
    body = _loop(model).attribute[0].g
    assert all(n.domain in ("", "ai.onnx") for n in body.node)
    assert {"Div", "Clip", "Floor", "Sign"} <= {n.op_type for n in body.node}
    onnx.checker.check_model(model)


def test_qonnx_executor_hands_the_loop_to_onnxruntime_with_the_same_results(models) -> None:
    """qonnx.core.onnx_exec.execute_onnx runs Quant nodes itself and the Loop node in an
    onnxruntime session of its own: the same values as one onnxruntime session and the
    interpreter."""
    data = models["counted"]
    model = tflite2qonnx.convert(data)
    xs = _int8_inputs(data, 6, seed=2)
    refs = _interpreter_outputs(data, xs)
    ours, feeds = _ours(model, data, xs)
    theirs = [execute_qonnx(model, f) for f in feeds]
    for mine, qonnx_out in zip(ours, theirs, strict=True):
        for name, value in mine.items():
            assert np.array_equal(np.asarray(qonnx_out[name]).reshape(value.shape), value)
    assert np.all(_steps(data, refs, theirs) == 0)


def test_int8_dense_tanh_loop_is_within_one_step(models) -> None:
    """FULLY_CONNECTED and TANH inside the loop, rounding once per op: within one step of
    the builtin kernels after five steps (measured: all 512 elements equal)."""
    data = models["dense tanh"]
    xs = _int8_inputs(data, 64, seed=3)
    refs = _interpreter_outputs(data, xs)
    ours, _ = _ours(tflite2qonnx.convert(data), data, xs)
    steps = _steps(data, refs, ours)
    assert steps.size == 64 * 8 and steps.max() <= 1 and np.mean(steps == 0) >= 0.95


def test_int8_while_passes_verify_in_qonnx_and_qcdq_form(models) -> None:
    """--verify on the QONNX model and on its QCDQ form (the top-level quantizers as
    QuantizeLinear / DequantizeLinear, the Loop body unchanged)."""
    data = models["counted"]
    model = tflite2qonnx.convert(data, verify=True)
    with pytest.warns(ConversionWarning, match="round ties differently"):  # TFLite: half up
        qcdq = to_qcdq(model)
    assert not [n for n in qcdq.graph.node if n.domain not in ("", "ai.onnx")]
    assert "QuantizeLinear" in [n.op_type for n in qcdq.graph.node]
    result = verify(data, qcdq, inputs=16)
    assert result.passed and result.runner.startswith("onnxruntime;")  # no lowering needed
    quantized = [a for a in result.outputs if a.equal_fraction is not None]
    assert quantized and all(a.max_steps <= 1 for a in quantized)


def test_while_after_a_permuted_convolution_reads_its_value_in_source_order(models) -> None:
    """A CONV_2D makes the layout pass permute; the WHILE after it is a terminate op (its
    input is read in source order): the results match the interpreter's, as they do with
    --channels-last (nothing permuted)."""
    data = models["conv then while"]
    for channels_last in (False, True):
        model = tflite2qonnx.convert(data, channels_last=channels_last)
        assert "Loop" in [n.op_type for n in model.graph.node]
        pairs = compare(model, reference_interpreter(data), n_inputs=4)
        assert pairs and all(p.float_error_ok(1e-4) for p in pairs)


def test_int8_loop_variable_crosses_into_the_loop_on_its_grid() -> None:
    """A hand-built WHILE carrying an int8 value (v <- v + v, saturating, four times): the
    Loop carries its real value; every element equals the interpreter's."""
    data = int8_carried_while_model()
    rng = np.random.default_rng(4)
    xs = [rng.integers(-128, 128, 3).astype(np.int8) for _ in range(32)]
    refs = _interpreter_outputs(data, xs)
    ours, _ = _ours(tflite2qonnx.convert(data), data, xs)
    assert all(int(o["count"]) == 4 for o in ours)
    steps = _steps(data, refs, ours)
    assert steps.size == 32 * 3 and np.all(steps == 0)
    saturated = np.concatenate([r["y"] for r in refs])
    assert {-128, 127} <= set(saturated.tolist())  # the clip inside the loop is exercised


def test_loop_variable_on_another_grid_in_the_body_is_refused_naming_both_tensors() -> None:
    """TFLite copies the loop variable's raw bytes into the body: a body tensor with another
    scale would read them on its own grid, which a Loop carrying real values cannot say."""
    with pytest.raises(ConversionError, match=r"loop variable 1: tensors 'bv' and 'x' differ"):
        tflite2qonnx.convert(int8_carried_while_model(body_scale=0.1))


def test_int8_dense_tanh_loop_equals_builtin_under_bit_exact(models) -> None:
    """The same loop with --bit-exact: every element equal after five steps (FULLY_CONNECTED
    rounding with the 16-bit multiplier was 2 of 16,000 a step off; test_bit_exact_fc_rounding
    pins that kernel)."""
    data = models["dense tanh"]
    xs = _int8_inputs(data, 2000, seed=4)
    refs = _interpreter_outputs(data, xs)
    ours, _ = _ours(tflite2qonnx.convert(data, bit_exact=True), data, xs)
    steps = _steps(data, refs, ours)
    assert steps.size == 2000 * 8 and steps.max() == 0, f"{int(np.sum(steps > 0))} off"
