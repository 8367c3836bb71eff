"""Multi-subgraph models from TF's converter against the interpreter: tf.cond (IF as ONNX If),
tf.while_loop (WHILE as ONNX Loop), a tf.Variable (CALL_ONCE and the variable ops).

Each input runs on a fresh interpreter: CALL_ONCE and resource variables keep state from one
invocation to the next, and the converted graph is the first invocation.
"""

from __future__ import annotations

import numpy as np
import pytest
from control_flow_models import (
    cond_4d_model,
    conditional_assignment_model,
    in_fresh_process,
    with_if_branch,
)
from litert_compare import real_value, reference_interpreter

import tflite2qonnx
from qonnx_ingest.errors import ConversionError
from qonnx_ingest.verification import run_converted

pytestmark = pytest.mark.keras


@pytest.fixture(scope="module")
def models() -> dict[str, bytes]:
    return in_fresh_process(
        {
            "cond": ("cond_model", {}),
            "cond on computed": ("cond_on_computed_model", {}),
            "int8 cond": ("cond_model", {"quantized": True}),
            "while": ("while_model", {}),
            "variable": ("variable_model", {}),
            "conv then cond": ("conv_then_cond_model", {}),
        }
    )


def _first_invocations(data: bytes, inputs: list[np.ndarray], xnnpack: bool = False, **options):
    """(interpreter outputs, ours) per input, as real values; ours from onnxruntime as
    --verify runs it (Quant nodes lowered to standard ops)."""
    model = tflite2qonnx.convert(data, **options)
    (inp,) = reference_interpreter(data).get_input_details()
    feeds = [{inp["name"]: real_value(x, inp["quantization"])} for x in inputs]
    ours, runner = run_converted(model, feeds)
    assert runner.startswith("onnxruntime")
    pairs = []
    for x, mine in zip(inputs, ours, strict=True):
        it = reference_interpreter(data, xnnpack=xnnpack)
        it.set_tensor(inp["index"], x)
        it.invoke()
        for out in it.get_output_details():
            ref = it.get_tensor(out["index"])
            mine_value = np.asarray(mine[out["name"]]).reshape(ref.shape)
            if ref.dtype == np.int8:  # compared as real values
                ref = real_value(ref, out["quantization"])
            pairs.append((ref, mine_value))
    return model, pairs


def _assert_close(pairs) -> None:
    for ref, mine in pairs:
        bound = 1e-4 * max(1.0, float(np.max(np.abs(ref))))
        assert np.max(np.abs(mine.astype(np.float64) - ref)) <= bound


def test_tf_cond_converts_to_onnx_if_and_takes_both_branches(models) -> None:
    rng = np.random.default_rng(1)
    xs = [rng.uniform(-1, 1, (2, 4)).astype(np.float32) + s for s in (0.5, -0.5, 0.5, -0.5)]
    assert {bool(x.sum() > 0) for x in xs} == {True, False}
    model, pairs = _first_invocations(models["cond"], xs)
    assert [n.op_type for n in model.graph.node].count("If") == 1
    _assert_close(pairs)


def test_if_branches_reading_a_tensor_computed_outside_keep_reading_it(models) -> None:
    rng = np.random.default_rng(2)
    xs = [rng.uniform(-1, 1, (2, 4)).astype(np.float32) + s for s in (0.5, -0.5)]
    assert {bool(x.sum() > 0) for x in xs} == {True, False}
    model, pairs = _first_invocations(models["cond on computed"], xs)
    assert [n.op_type for n in model.graph.node].count("If") == 1
    _assert_close(pairs)


def test_int8_tf_cond_inlines_both_branches_within_one_step(models) -> None:
    """TF quantizes inside the branches (QUANTIZE / DEQUANTIZE in each): Quant nodes cannot
    go into an ONNX If that qonnx's tools run, so both branches are computed and a Where
    picks one; each output within one step of the interpreter's. The XNNPACK path is the
    reference: the builtin reference kernel's int8 SUM over all axes (the IF's condition)
    is off by up to the whole range here (-1 where the sum is -42 steps), so it takes the
    other branch."""
    data = models["int8 cond"]
    it = reference_interpreter(data)
    (inp,), (out,) = it.get_input_details(), it.get_output_details()
    scale, zero_point = inp["quantization"]
    rng = np.random.default_rng(3)
    xs = [rng.integers(-128, 128, (2, 4)).astype(np.int8) for _ in range(8)]
    sums = [float(np.sum(scale * (x.astype(np.float64) - zero_point))) for x in xs]
    assert min(sums) < 0 < max(sums)  # both branches taken
    model, pairs = _first_invocations(data, xs, xnnpack=True)
    ops = [n.op_type for n in model.graph.node]
    assert "If" not in ops and "Where" in ops
    out_scale = out["quantization"][0]
    for ref, mine in pairs:
        assert np.max(np.abs(np.round((mine.astype(np.float64) - ref) / out_scale))) <= 1


def test_tf_while_loop_converts_to_onnx_loop_with_the_interpreters_trip_counts(models) -> None:
    """Different inputs stop after different numbers of steps, one at the 20-step cap."""
    xs = [np.array(v, np.float32) for v in ([3, 4, 5], [0.1, 0.2, 0.3], [-1, -2, -3], [0, 0, 0])]
    model, pairs = _first_invocations(models["while"], xs)
    assert [n.op_type for n in model.graph.node].count("Loop") == 1
    counts = [int(ref) for ref, _ in pairs if ref.dtype == np.int32]
    assert len(set(counts)) >= 3 and 20 in counts
    for ref, mine in pairs:
        if ref.dtype == np.int32:
            assert int(mine) == int(ref)
    _assert_close(pairs)


def test_variable_initialized_by_call_once_and_assigned_matches_first_invocation(models) -> None:
    """v is read, reassigned and read again: the second read sees the assignment."""
    rng = np.random.default_rng(2)
    xs = [rng.uniform(-2, 2, 4).astype(np.float32) for _ in range(4)]
    model, pairs = _first_invocations(models["variable"], xs)
    _assert_close(pairs)
    # against the hand-derived value: v0 = (1..4)/4; v = 0.5 v0 + x; y = x v + v
    v0 = np.arange(1, 5, dtype=np.float32) / 4
    for x, (_, mine) in zip(xs, pairs, strict=True):
        v = 0.5 * v0 + x
        assert np.allclose(mine, x * v + v, atol=1e-5)


def test_variable_assigned_in_both_if_branches_holds_the_taken_branchs_value() -> None:
    """The branches get the variable's handle and assign it: both inline, and the variable
    afterwards is Where(cond, then's value, else's value)."""
    xs = [np.array(v, np.float32) for v in ([1, 2, 3, 4], [-1, -2, 0, 1])]
    model, pairs = _first_invocations(conditional_assignment_model(), xs)
    assert "If" not in [n.op_type for n in model.graph.node]
    for x, (ref, mine) in zip(xs, pairs, strict=True):
        expected = x if x.sum() > 0 else -x
        assert np.array_equal(ref, expected) and np.array_equal(mine, expected)


def test_tf_cond_on_an_image_converts_to_onnx_if() -> None:
    """A rank-4 argument crosses into an ONNX If (the layout pass reads what an If reads in
    source order); each input takes its own branch, as the interpreter does."""
    data = cond_4d_model()
    rng = np.random.default_rng(4)
    xs = [rng.uniform(-1, 1, (1, 4, 4, 2)).astype(np.float32) + s for s in (0.5, -0.5)]
    model, pairs = _first_invocations(data, xs)
    assert "If" in [n.op_type for n in model.graph.node]
    _assert_close(pairs)


def test_tf_cond_reading_a_permuted_convolution_output_reads_it_in_source_order(models):
    """The CONV_2D's result is stored channels-first; the If's branches read it by name, and
    the layout pass hands them its source-order version: both branches match."""
    rng = np.random.default_rng(6)
    xs = [rng.uniform(-1, 1, (1, 4, 4, 2)).astype(np.float32) + s for s in (0.5, -0.5)]
    model, pairs = _first_invocations(models["conv then cond"], xs, keep_io_layout=True)
    ops = [n.op_type for n in model.graph.node]
    assert "If" in ops and "Conv" in ops and "Transpose" in ops
    _assert_close(pairs)


def test_variable_model_passes_verify_on_a_fresh_interpreter_per_sample(models) -> None:
    """CALL_ONCE runs on an interpreter's first invocation only and reset_all_variables
    leaves resource variables: --verify runs each sample on a fresh interpreter."""
    tflite2qonnx.convert(models["variable"], verify=True)
    tflite2qonnx.convert(models["while"], verify=True)


@pytest.mark.parametrize("index", [0, 7])
def test_if_naming_the_main_or_a_missing_subgraph_is_refused(models, index: int) -> None:
    """The main subgraph (a call into it would recurse) and past-the-end indices."""
    with pytest.raises(ConversionError, match=f"then_subgraph_index {index} names no callable"):
        tflite2qonnx.convert(with_if_branch(models["cond"], index))
