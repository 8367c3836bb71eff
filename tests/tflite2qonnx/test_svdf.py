"""SVDF (float, and int8 with its int16 state) against the interpreter's reference kernel.

TF's converter never emits SVDF, so the models are written by ``svdf_models`` from seeded
weights. Each run starts from the reset (zero) state: the converted graph is one invocation
(see tflite2qonnx.ops.recurrent.svdf).
"""

from __future__ import annotations

import numpy as np
import pytest
from litert_compare import compare, random_input, real_value, reference_interpreter
from onnx import numpy_helper
from svdf_models import float_svdf, hybrid_svdf, int8_svdf

import tflite2qonnx
from qonnx_ingest.errors import ConversionError
from qonnx_ingest.verification import run_converted
from tflite2qonnx.model import ScaleRangeError


@pytest.mark.parametrize(
    "rank, activation, has_bias",
    [(1, "NONE", True), (2, "RELU", True), (2, "TANH", False), (3, "RELU6", False)],
)
def test_float_svdf_matches_interpreter(rank: int, activation: str, has_bias: bool) -> None:
    data = float_svdf(rank, activation, has_bias, seed=rank)
    model = tflite2qonnx.convert(data)
    pairs = compare(model, reference_interpreter(data), n_inputs=4, low=-2.0, high=2.0)
    worst = max(float(np.max(np.abs(p.ours - p.reference))) for p in pairs)
    assert len(pairs) == 4
    assert all(p.float_error_ok() for p in pairs), f"max error {worst}"


def _int8_steps(data: bytes, bit_exact: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """|ours - interpreter| in output steps, and the interpreter's integers, over 8 inputs;
    ours from onnxruntime (Quant nodes lowered), as --verify runs it."""
    model = tflite2qonnx.convert(data, bit_exact=bit_exact)
    it = reference_interpreter(data)
    (inp,), (out,) = it.get_input_details(), it.get_output_details()
    rng = np.random.default_rng(11)
    xs = [random_input(inp, rng) for _ in range(8)]
    outputs, runner = run_converted(
        model, [{inp["name"]: real_value(x, inp["quantization"])} for x in xs]
    )
    assert runner.startswith("onnxruntime")
    scale, zero_point = out["quantization"]
    steps, theirs = [], []
    for x, o in zip(xs, outputs, strict=True):
        it.reset_all_variables()
        it.set_tensor(inp["index"], x)
        it.invoke()
        ref = it.get_tensor(out["index"]).astype(np.float64)
        ours = np.round(o[out["name"]].astype(np.float64) / scale) + zero_point
        steps.append(np.abs(ours - ref).ravel())
        theirs.append(ref.ravel())
    return np.concatenate(steps), np.concatenate(theirs)


@pytest.mark.parametrize("rank, has_bias", [(1, True), (2, False), (3, True)])
def test_int8_svdf_equals_interpreter_integers(rank: int, has_bias: bool) -> None:
    """The kernel's integer arithmetic (int16 state, int32 time sums, two fixed-point
    rescales) emulated: every output integer equal, saturated ones included."""
    steps, theirs = _int8_steps(int8_svdf(rank, has_bias, seed=rank))
    assert steps.max() == 0, f"{np.mean(steps == 0):.4f} equal, max {steps.max()} steps"
    assert np.any(theirs == 127) or np.any(theirs == -128)  # the int8 clamp is exercised


def test_int8_svdf_keeps_negative_outputs_the_kernel_does_not_rectify() -> None:
    """TFLite requires RELU on the int8 kernel but only clamps to int8: outputs below the
    zero point (negative reals) come out as such, and ours agree."""
    steps, theirs = _int8_steps(int8_svdf(2, True, seed=5))
    assert steps.max() == 0
    assert np.any(theirs < -20)  # the output zero point is -20


def test_int8_svdf_under_bit_exact_is_the_same_kernel() -> None:
    steps, _ = _int8_steps(int8_svdf(1, True, seed=3), bit_exact=True)
    assert steps.max() == 0


def test_int8_svdf_state_is_an_int16_quant_on_the_state_grid() -> None:
    model = tflite2qonnx.convert(int8_svdf(1))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    states = [n for n in model.graph.node if n.op_type == "Quant" and "svdf_state" in n.output[0]]
    assert [float(inits[n.input[3]]) for n in states] == [16.0]
    assert [float(inits[n.input[2]]) for n in states] == [0.0]


@pytest.mark.parametrize(
    "rank, activation, asymmetric", [(1, "NONE", False), (2, "RELU", False), (2, "NONE", True)]
)
def test_hybrid_svdf_matches_interpreter(rank: int, activation: str, asymmetric: bool) -> None:
    """Float input with int8 weights is the hybrid kernel: the input rows are quantized on
    the fly (symmetric, or with row zero points), which the graph reproduces in float32."""
    data = hybrid_svdf(rank, activation, asymmetric, seed=rank)
    model = tflite2qonnx.convert(data)
    pairs = compare(model, reference_interpreter(data), n_inputs=4, low=-2.0, high=2.0)
    assert len(pairs) == 4
    for p in pairs:
        assert np.max(np.abs(p.ours - p.reference)) <= 1e-5 * max(1.0, np.max(np.abs(p.reference)))


def test_svdf_with_a_state_that_is_not_a_variable_is_refused() -> None:
    with pytest.raises(ConversionError, match="state tensor 'state' is not a variable"):
        tflite2qonnx.convert(int8_svdf(1, state_variable=False))


def test_int8_svdf_without_relu_is_refused_as_tflite_does() -> None:
    with pytest.raises(ConversionError, match="int8 SVDF needs the RELU activation"):
        tflite2qonnx.convert(int8_svdf(1, activation="NONE"))


def test_int8_svdf_passes_verify_each_sample_from_the_reset_state() -> None:
    """--verify resets the interpreter's variables before each sample: without that, the
    second sample would see the first one's state and the check would fail."""
    tflite2qonnx.convert(int8_svdf(2, seed=7), verify=True)


def test_int8_svdf_whose_scales_overflow_the_multiplier_names_the_operator_and_tensors() -> None:
    """Each scale is finite, but s_x * s_wf / s_state overflows float32 (the fuzzer's find on
    the corpus keyword model): a clear input error, not an OverflowError from deep inside."""
    data = int8_svdf(1, weights_feature_scale=1e38, state_scale=1e-3)
    with pytest.raises(ScaleRangeError) as info:
        tflite2qonnx.convert(data)
    message = str(info.value)
    assert message.startswith("operator 0 (SVDF): requantization multiplier inf")
    assert "tensor 1 'weights_feature' scale 1e+38" in message
    assert info.value.exit_code == 2
