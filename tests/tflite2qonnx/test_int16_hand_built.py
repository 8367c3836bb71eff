"""int16 kernels on hand-built single-op models (tflite_writer, scales chosen to reach each
kernel variant: power-of-two or not, input grids differing from the output's), against the
interpreter's builtin reference kernels, run by onnxruntime as --verify runs them:

* QUANTIZE int16 -> int16 / int8 / int32 (requantization, over every int16 input, with
  an input zero point too), MEAN and
  CONCATENATION: 100% equal by default and under --bit-exact;
* ADD / SUB with pot_scale_int16 (power-of-two scales, one input shifted): 100% equal under
  --bit-exact, within a step by default;
* LEAKY_RELU without options: alpha 0, as TFLite parses it.
(LOGISTIC / TANH: test_int16_sigmoid.py; every other int16 operator: test_int16_ops.py.)
"""

from __future__ import annotations

import numpy as np
import pytest
from litert_compare import real_value, reference_interpreter, run_ours
from tflite_writer import build_model

from qonnx_ingest.quant_lowering import lower_quants
from tflite2qonnx.api import convert

ALL_INT16 = np.arange(-(1 << 15), 1 << 15, dtype=np.int16)
MODES = pytest.mark.parametrize("bit_exact", [False, True], ids=["default", "bit_exact"])


def _tensor(name, shape, scale, dtype="int16", zero_point=0) -> dict:
    return {"name": name, "shape": shape, "dtype": dtype, "quant": ([scale], [zero_point])}


def _single_op(op: str, inputs: list[dict], output: dict, options=None, extra=()) -> bytes:
    tensors = [*inputs, *extra, output]
    spec = {"op": op, "inputs": list(range(len(tensors) - 1)), "outputs": [len(tensors) - 1]}
    if options is not None:
        spec["options"] = options
    return build_model(tensors, [spec], list(range(len(inputs))), [len(tensors) - 1])


def _steps(data: bytes, feeds: list[np.ndarray], bit_exact: bool) -> np.ndarray:
    """|ours - interpreter| in output steps, on the given stored integers."""
    it = reference_interpreter(data)
    real = {}
    for detail, q in zip(it.get_input_details(), feeds, strict=True):
        it.set_tensor(detail["index"], q)
        real[detail["name"]] = real_value(q, detail["quantization"])
    it.invoke()
    (out,) = it.get_output_details()
    ref = it.get_tensor(out["index"]).astype(np.float64)
    ours = run_ours(lower_quants(convert(data, bit_exact=bit_exact)), real)[out["name"]]
    scale, zero_point = out["quantization"]
    return np.abs(np.round(ours.astype(np.float64) / scale) + zero_point - ref).ravel()


@MODES
@pytest.mark.parametrize(
    "s_in, s_out, dtype, zero_point",
    [
        (1 / 3000, 1 / 1234.5, "int16", 0),  # a right shift of one bit: rounds twice
        (0.000123, 0.00031, "int16", 0),
        (1 / 3000, 0.05, "int8", 3),
        (0.000123, 0.0371, "int8", -5),
        (1 / 1000, 1 / 3000, "int16", 0),  # a ratio over 1: a left shift
    ],
    ids=["to_int16", "to_int16_b", "to_int8", "to_int8_b", "to_int16_upscale"],
)
def test_int16_quantize_equals_builtin_on_every_input(
    s_in, s_out, dtype, zero_point, bit_exact: bool
) -> None:
    n = ALL_INT16.size
    data = _single_op(
        "QUANTIZE", [_tensor("x", (n,), s_in)], _tensor("y", (n,), s_out, dtype, zero_point)
    )
    steps = _steps(data, [ALL_INT16], bit_exact)
    assert steps.max() == 0, f"{100 * np.mean(steps == 0):.2f}% equal, {steps.max()} steps"


# TFLite Micro's keyword model (tflm__keyword_scrambled) ends in SOFTMAX int8 -> int16 (zero
# point -32768, scale ~2^-16) and QUANTIZE int16 -> int32 (scale ~2^-15): its output grid
KEYWORD_INT16 = (1.5259022e-05, -32768)
KEYWORD_INT32 = (3.051851e-05, 0)


@MODES
@pytest.mark.parametrize(
    "grid_in, dtype, grid_out",
    [
        (KEYWORD_INT16, "int32", KEYWORD_INT32),
        ((1 / 3000, 1000), "int32", (1 / 1234.5, -7)),
        ((1 / 3000, -32768), "int8", (1 / 128, -128)),
    ],
    ids=["keyword_to_int32", "to_int32", "to_int8"],
)
def test_int16_with_zero_point_quantize_equals_builtin_on_every_input(
    grid_in, dtype, grid_out, bit_exact: bool
) -> None:
    """An int16 input with a zero point requantizes as ``(q - zp_in) * M + zp_out``: one
    rounding of the real value was a step off on ties (every output of the keyword model:
    16383 for the kernel's 16384 at the softmax's 0.5)."""
    n = ALL_INT16.size
    x = _tensor("x", (n,), grid_in[0], zero_point=grid_in[1])
    data = _single_op("QUANTIZE", [x], _tensor("y", (n,), grid_out[0], dtype, grid_out[1]))
    steps = _steps(data, [ALL_INT16], bit_exact)
    assert steps.max() == 0, f"{100 * np.mean(steps == 0):.2f}% equal, {steps.max()} steps"


def test_int8_softmax_to_int16_is_within_a_step_by_default_and_exact_under_bit_exact() -> None:
    """The keyword model's SOFTMAX: int8 in, int16 out with zero point -32768. The kernel is
    gemmlowp's fixed-point softmax: one rounding by default is within a step; --bit-exact
    emulates it (ops/exact_softmax_int16_out.py)."""
    x = _tensor("x", (64, 2), 0.06996273, "int8", 2)
    y = _tensor("y", (64, 2), KEYWORD_INT16[0], "int16", KEYWORD_INT16[1])
    data = _single_op("SOFTMAX", [x], y, ("SoftmaxOptions", {"Beta": 1.0}))
    q = np.stack(np.meshgrid(np.arange(-128, 128, 32), np.arange(-128, 128, 32)), -1)
    steps = _steps(data, [q.reshape(64, 2).astype(np.int8)], False)
    assert steps.max() <= 1, f"{100 * np.mean(steps == 0):.2f}% equal, {steps.max()} steps"
    steps = _steps(data, [q.reshape(64, 2).astype(np.int8)], True)
    assert steps.max() == 0, f"{100 * np.mean(steps == 0):.2f}% equal, {steps.max()} steps"


@MODES
def test_int16_concatenation_copies_integers_across_scales(bit_exact: bool) -> None:
    """The int16 kernel copies each input's integers, whatever its scale: rescaling the real
    values instead was 0% equal (up to 24693 steps)."""
    data = _single_op(
        "CONCATENATION",
        [_tensor("a", (4, 10), 1 / 3000), _tensor("b", (4, 6), 0.000123)],
        _tensor("y", (4, 16), 1 / 2000),
        ("ConcatenationOptions", {"Axis": 1}),
    )
    rng = np.random.default_rng(3)
    feeds = [rng.integers(-32768, 32768, s).astype(np.int16) for s in ((4, 10), (4, 6))]
    steps = _steps(data, feeds, bit_exact)
    assert steps.max() == 0, f"{100 * np.mean(steps == 0):.2f}% equal, {steps.max()} steps"


@MODES
@pytest.mark.parametrize(
    "shape, axes, keep, s_in, s_out",
    [
        ((2, 6, 5, 8), [1, 2], True, 1 / 3000, 1 / 5000),
        ((4, 7, 30), [2], False, 0.000123, 0.000123),  # one grid: the same kernel for int16
        ((1, 40, 30, 2), [1, 2], True, 1 / 3000, 1 / 4000),  # sums past 2^24: in float64
    ],
    ids=["hw", "last_axis_one_grid", "1200_elements"],
)
def test_int16_mean_equals_builtin(shape, axes, keep, s_in, s_out, bit_exact: bool) -> None:
    out = [1 if i in axes else d for i, d in enumerate(shape)] if keep else None
    out = out or [d for i, d in enumerate(shape) if i not in axes]
    axis = {"name": "axes", "shape": (len(axes),), "dtype": "int32"}
    axis["data"] = np.array(axes, np.int32)
    data = _single_op(
        "MEAN",
        [_tensor("x", shape, s_in)],
        _tensor("y", tuple(out), s_out),
        ("ReducerOptions", {"KeepDims": keep}),
        extra=[axis],
    )
    rng = np.random.default_rng(4)
    feeds = [rng.integers(-32768, 32768, shape).astype(np.int16) for _ in range(2)]
    steps = np.concatenate([_steps(data, [x], bit_exact) for x in feeds])
    assert steps.max() == 0, f"{100 * np.mean(steps == 0):.2f}% equal, {steps.max()} steps"


def _add_sub(op: str, scales, activation: int = 0, pot: bool = True) -> bytes:
    table = "AddOptions" if op == "ADD" else "SubOptions"
    options = (table, {"PotScaleInt16": pot, "FusedActivationFunction": activation})
    s1, s2, s_out = scales
    return _single_op(
        op, [_tensor("a", (4, 50), s1), _tensor("b", (4, 50), s2)], _tensor("y", (4, 50), s_out),
        options,
    )  # fmt: skip


def _add_feeds() -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    a, b = (rng.integers(-32768, 32768, (4, 50)).astype(np.int16) for _ in range(2))
    a[0] = (b[0].astype(np.int32) * 3).clip(-32768, 32767)  # halves and saturation
    return [a, b]


@pytest.mark.parametrize("op", ["ADD", "SUB"])
@pytest.mark.parametrize(
    "scales, activation",
    [
        ((2.0**-10, 2.0**-12, 2.0**-10), 0),  # input 2 shifted right by 2
        ((2.0**-13, 2.0**-11, 2.0**-11), 0),  # input 1 shifted right by 2
        ((2.0**-11, 2.0**-12, 2.0**-11), 1),  # RELU
        ((1 / 3000, 1 / 2000, 1 / 1000), 0),  # pot_scale_int16 on other scales: general kernel
    ],
    ids=["shift_b", "shift_a", "relu", "general"],
)
def test_int16_add_sub_pot_scale_equals_builtin_under_bit_exact(op, scales, activation) -> None:
    data = _add_sub(op, scales, activation)
    steps = _steps(data, _add_feeds(), True)
    assert steps.max() == 0, f"{100 * np.mean(steps == 0):.2f}% equal, {steps.max()} steps"
    assert _steps(data, _add_feeds(), False).max() <= 1  # by default one rounding


@pytest.mark.parametrize(
    "dtype, bit_exact", [("int16", False), ("int8", False), ("int8", True)],
    ids=["int16-default", "int8-default", "int8-bit_exact"],
)  # fmt: skip
def test_leaky_relu_without_options_has_alpha_zero(dtype: str, bit_exact: bool) -> None:
    """TFLite parses a LEAKY_RELU without LeakyReluOptions with alpha 0 (assuming Keras's
    0.2 left half the outputs off, by up to 6554 int16 steps)."""
    q = ALL_INT16 if dtype == "int16" else np.arange(-128, 128, dtype=np.int8)
    x, y = (_tensor(name, q.shape, 1 / 300, dtype) for name in "xy")
    steps = _steps(_single_op("LEAKY_RELU", [x], y), [q], bit_exact)
    assert steps.max() == 0, f"{100 * np.mean(steps == 0):.2f}% equal, {steps.max()} steps"
