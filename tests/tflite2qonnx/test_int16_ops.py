"""The int16 (16x8) operator survey, pinned: hand-built single-op models
(``int16_op_models``), output on the input's grid ("same") and on another ("diff"), against
the interpreter's builtin reference kernels, run by onnxruntime as --verify runs them.

* the copying / comparing kernels (data movement, MAX_POOL_2D, MAXIMUM, ...) and the int16
  kernels on stored integers (NEG, FLOOR_DIV, comparisons), RESIZE_BILINEAR's integer
  kernel and 16x8 TRANSPOSE_CONV: 100% equal by default and under --bit-exact;
* RELU, RELU6, LEAKY_RELU, ABS over every int16 input: 100% equal under --bit-exact, within
  a step by default;
* REDUCE_PROD: 100% equal by default and under --bit-exact (its wrapping int32 products
  too), BATCH_MATMUL under --bit-exact;
* BATCH_MATMUL, SUM, SQRT: within a step by default (SUM against the default resolver: the
  reference one's int16 SUM is wrong); SUM 100% equal to it under --bit-exact, on one grid
  or two; SQRT (truncating) 100% equal either way;
* EXP, LOG, GELU (the kernels' interpolated tables): 100% equal by default and under
  --bit-exact (rounding once was up to 163, 17290 and 2 steps off; every input and more
  scales: test_int16_lut.py);
* RSQRT, PRELU, DIV: converted, 100% equal (rounding once was up to 9755, 3422 and 32768
  steps off; more inputs and scales: ``test_int16_rsqrt_prelu_div.py``).
"""

from __future__ import annotations

import numpy as np
import pytest
from int16_op_models import CASES, S_IN, S_IN2, Case, const, differences
from tflite_writer import build_model

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.api import convert

MODES = pytest.mark.parametrize("bit_exact", [False, True], ids=["default", "bit_exact"])
GRIDS = pytest.mark.parametrize("same", [True, False], ids=["same_grid", "other_grid"])
ALL_INT16 = np.arange(-(1 << 15), 1 << 15, dtype=np.int16)

# the interpreter accepts these int16 models with differing grids too
COPIES = [
    "MAX_POOL_2D", "MAXIMUM", "MINIMUM", "RESIZE_NEAREST_NEIGHBOR", "RESHAPE", "TRANSPOSE",
    "SQUEEZE", "GATHER", "GATHER_ND", "PAD", "TILE", "SLICE", "STRIDED_SLICE", "REVERSE_V2",
    "SPLIT", "SPLIT_V", "SELECT_V2", "TOPK_V2",
]  # fmt: skip
# only on one grid (the kernels check the scales match)
COPIES_ONE_GRID = [
    "REDUCE_MAX", "REDUCE_MIN", "EXPAND_DIMS", "PADV2", "MIRROR_PAD", "SPACE_TO_BATCH_ND",
    "BATCH_TO_SPACE_ND", "UNPACK", "PACK", "DEQUANTIZE",
]  # fmt: skip
STORED_INTEGERS = ["NEG", "FLOOR_DIV", "EQUAL", "NOT_EQUAL", "LESS", "GREATER_EQUAL"]
INTEGER_KERNELS = ["RESIZE_BILINEAR", "TRANSPOSE_CONV", "REDUCE_PROD", "EXP", "LOG", "GELU"]
TABLES = ["RELU", "RELU6", "LEAKY_RELU", "ABS"]
# refused until emulated: rounding once was 9755, 3422 and 32768 steps off
EMULATED = ["RSQRT", "PRELU", "DIV"]


def _max_steps(name: str, same: bool, bit_exact: bool, xnnpack: bool = False) -> float:
    case = CASES[name]
    return float(differences(case.model(same), case.feeds(), bit_exact, xnnpack).max())


@MODES
@GRIDS
@pytest.mark.parametrize("name", COPIES + STORED_INTEGERS + INTEGER_KERNELS)
def test_int16_kernel_equals_builtin(name: str, same: bool, bit_exact: bool) -> None:
    """NEG was 19282 steps off on differing grids, FLOOR_DIV 32764, LESS 16% of the
    booleans, RESIZE_BILINEAR 68 steps, LOG 17290: the kernels work on the stored integers."""
    assert _max_steps(name, same, bit_exact) == 0


@MODES
@pytest.mark.parametrize("name", COPIES_ONE_GRID)
def test_int16_one_grid_copy_equals_builtin(name: str, bit_exact: bool) -> None:
    assert _max_steps(name, True, bit_exact) == 0


@GRIDS
@pytest.mark.parametrize("name", TABLES)
def test_int16_rescaling_unary_equals_builtin_on_every_input(name: str, same: bool) -> None:
    base = CASES[name]
    output = (ALL_INT16.shape, *base.outputs[0][1:])
    case = Case(name, [(ALL_INT16.shape, base.inputs[0][1])], [output], options=base.options)
    case.version = base.version
    data = case.model(same)
    assert differences(data, [ALL_INT16], True).max() == 0
    assert differences(data, [ALL_INT16], False).max() <= 1  # one rounding by default


@pytest.mark.parametrize("name", ["BATCH_MATMUL"])
def test_int16_rounded_once_within_a_step_by_default(name: str) -> None:
    assert _max_steps(name, True, False) <= 1 and _max_steps(name, False, False) <= 1


def test_int16_sum_on_one_grid_equals_default_resolver_under_bit_exact() -> None:
    """Was refused: the one-grid kernel saturates the sum (it does not wrap)."""
    case = CASES["SUM"]
    steps = [differences(case.model(True), case.feeds(s), True, True) for s in range(4)]
    assert np.concatenate(steps).max() == 0


@MODES
@GRIDS
def test_int16_sqrt_truncates_on_every_input(same: bool, bit_exact: bool) -> None:
    """int16 SQRT truncates ``sqrtf(x) / s_out`` (rounding was a step off on half of them)."""
    case = Case("SQRT", [((32768,), S_IN)], [((32768,), 1 / 1234.5, "int16")])
    q = np.arange(32768, dtype=np.int16)
    assert differences(case.model(same), [q], bit_exact).max() == 0


def test_int16_sum_against_default_resolver() -> None:
    """The reference resolver's int16 SUM writes -1s (as its int8 SUM writes wrong values);
    the default resolver's equals the single rounding on one grid, is within a step of it
    between two grids, and equal to --bit-exact's float32 rescale there."""
    assert _max_steps("SUM", True, False, xnnpack=True) == 0
    assert _max_steps("SUM", False, False, xnnpack=True) <= 1
    case = CASES["SUM"]
    steps = [differences(case.model(False), case.feeds(s), True, True) for s in range(4)]
    assert np.concatenate(steps).max() == 0


@MODES
@GRIDS
@pytest.mark.parametrize("name", EMULATED)
def test_int16_formerly_refused_kernel_equals_builtin(name: str, same: bool, bit_exact) -> None:
    """The survey's RSQRT, PRELU (int16 alpha: the kernel reads its bytes as int8) and DIV
    models, which were refused."""
    assert _max_steps(name, same, bit_exact) == 0


@MODES
@pytest.mark.parametrize(
    "zp_in, zp_out, s_out", [(0, 0, 0.05), (5, -3, 0.05), (5, 5, 0.02)],
    ids=["other_scale", "zero_points", "one_grid_zero_point"],
)  # fmt: skip
def test_int8_neg_negates_stored_integers(zp_in, zp_out, s_out, bit_exact: bool) -> None:
    """TFLite's int8 NEG is ``-q`` too, zero points ignored: negating the real value was up to
    179 steps off between grids, and off on one grid with a zero point."""
    tensors = [
        {"name": "x", "shape": (256,), "dtype": "int8", "quant": ([0.02], [zp_in])},
        {"name": "y", "shape": (256,), "dtype": "int8", "quant": ([s_out], [zp_out])},
    ]
    data = build_model(tensors, [{"op": "NEG", "inputs": [0], "outputs": [1]}], [0], [1])
    q = np.arange(-128, 128, dtype=np.int8)
    assert differences(data, [q], bit_exact).max() == 0


@pytest.mark.parametrize("adj_y", [False, True], ids=["plain", "adj_y"])
def test_int16_batch_matmul_equals_builtin_under_bit_exact(adj_y: bool) -> None:
    """reference_ops::BatchMatMul<int16_t, int64_t>: the 64-bit requantization (87.5% equal
    rounding once); depth 200, products summed past 2^37."""
    rhs = (2, 7, 200) if adj_y else (2, 200, 7)
    case = Case("BATCH_MATMUL", [((2, 5, 200), S_IN), (rhs, S_IN2)], [((2, 5, 7), 0.05, "int16")],
                options=("BatchMatMulOptions", {"AdjY": adj_y}), version=4)  # fmt: skip
    data = case.model(False)
    steps = np.concatenate([differences(data, case.feeds(seed), True) for seed in range(4)])
    assert steps.max() == 0, f"{100 * np.mean(steps == 0):.2f}% equal, {steps.max()} steps"
    assert differences(data, case.feeds(), False).max() <= 1


def test_int16_batch_matmul_too_deep_refused_under_bit_exact() -> None:
    operands = [((1, 2, 300), S_IN), ((1, 300, 3), S_IN2)]
    case = Case("BATCH_MATMUL", operands, [((1, 2, 3), 0.05, "int16")], version=4)
    case.options = ("BatchMatMulOptions", {})
    with pytest.raises(ConversionError, match="BATCH_MATMUL of depth 300 is too deep"):
        convert(case.model(False), bit_exact=True)


def _prod(n: int, s_in: float, s_out: float) -> Case:
    return Case(
        "REDUCE_PROD", [((4, n, 5), s_in)], [((4, 5), s_out, "int16")],
        consts=[const("axes", [1])], options=("ReducerOptions", {"KeepDims": False}),
    )  # fmt: skip


@MODES
def test_int16_reduce_prod_equals_builtin(bit_exact: bool) -> None:
    """QuantizedReduceProd<int16_t>: rescaled after every product (rounding once: 83% equal)."""
    case = _prod(2, S_IN, S_IN)
    data = case.model(True)
    steps = np.concatenate([differences(data, case.feeds(seed), bit_exact) for seed in range(4)])
    assert steps.max() == 0, f"{100 * np.mean(steps == 0):.2f}% equal, {steps.max()} steps"


@MODES
def test_int16_reduce_prod_with_wrapping_products_equals_builtin(bit_exact: bool) -> None:
    """Where the kernel's partial products leave int32 (rounding once was 65535 steps off on
    this model; it was refused) its int64 -> int32 cast wraps, emulated in int64 ops."""
    case = _prod(4, 0.01, 0.5)
    data = case.model(False)
    steps = np.concatenate([differences(data, case.feeds(seed), bit_exact) for seed in range(2)])
    assert steps.max() == 0, f"{100 * np.mean(steps == 0):.2f}% equal, {steps.max()} steps"
