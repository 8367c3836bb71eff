"""--bit-exact comparisons, DIV and NEG on int8 / uint8 operands, as TFLite's builtin kernels
compute them.

* LESS, LESS_EQUAL, GREATER, GREATER_EQUAL, EQUAL, NOT_EQUAL (ComparisonQuantized): each
  operand's ``(q - zp) << 8`` is rescaled by its own scale with
  MultiplyByQuantizedMultiplierSmallerThanOneExp (multiplier from
  QuantizeMultiplierSmallerThanOneExp), and the two int32 results are compared. Neither float
  comparison of the real values nor of the raw integers is that: two different inputs can
  rescale to one value (a scale below 1/256 merges neighbours), and differing grids round.
  Each operand's rescaled value is a 256-entry table (a Gather); the ONNX comparison follows.
* DIV (DivElementwise, int8 and uint8): the reciprocal of ``q2 - zp2`` (GetReciprocal),
  a headroom shift of ``q1 - zp1`` and two fixed-point multiplies. The output depends on the
  pair of stored integers only, so the kernel is a 65536-entry table indexed by both.
* NEG (int8): ai_edge_litert's NEG (version 1, the only one it registers) negates the stored
  int8 integers in the storage type, ignoring both grids: ``q_out = int8(-q)`` (-128 wraps to
  itself). A 256-entry table; TFLite's newer zero-point-aware NEG (version 2) is not that
  kernel and its model is refused by this runtime.

The tables come from the kernels' integer arithmetic in numpy
(``tflite2qonnx.ops.exact.int8_tables`` has gemmlowp's primitives), never from running TFLite.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.fixed_point import Grid, cast, grid, quantize_multiplier, raw_integers
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.exact.int8_math_tables import srdhm_arrays
from tflite2qonnx.ops.exact.int8_tables import clamp_to_grid, rounding_divide_by_pot, srdhm
from tflite2qonnx.ops.exact.table_gather import lookup, storage_range, unary_table

_I32_MAX = (1 << 31) - 1
_COMPARE_LEFT_SHIFT = 8
COMPARISONS = {
    "LESS": ("Less", False),
    "LESS_EQUAL": ("LessOrEqual", False),
    "GREATER": ("Greater", False),
    "GREATER_EQUAL": ("GreaterOrEqual", False),
    "EQUAL": ("Equal", False),
    "NOT_EQUAL": ("Equal", True),
}


# ---------------------------------------------------------------------- the kernels (numpy)
def compare_rescaled(q: np.ndarray, g: Grid) -> np.ndarray:
    """An operand's ``MultiplyByQuantizedMultiplierSmallerThanOneExp((q - zp) << 8, M, e)``
    with ``(M, e) = QuantizeMultiplierSmallerThanOneExp(scale)``."""
    m0, shift = quantize_multiplier(float(g.scale))
    if shift > 0 or m0 == 0:
        raise ConversionError(
            f"bit_exact: a comparison operand's scale {g.scale} is not in (2^-31, 1)"
        )
    shifted = (np.asarray(q, np.int64) - g.zero_point) << _COMPARE_LEFT_SHIFT
    return rounding_divide_by_pot(srdhm(shifted, m0), -shift)


def _clz32(x: np.ndarray) -> np.ndarray:
    """CountLeadingZeros of positive int32 values (exact: every value is below 2^31)."""
    x = np.asarray(x, np.int64)
    return 31 - np.floor(np.log2(np.maximum(x, 1))).astype(np.int64)


def _one_over_one_plus_x(a: np.ndarray) -> np.ndarray:
    """gemmlowp's one_over_one_plus_x_for_x_in_0_1 on Q0.31 raws: three Newton steps in Q2.29."""
    s = a + _I32_MAX
    half = np.trunc((s + np.where(s >= 0, 1, -1)) / 2).astype(np.int64)  # RoundingHalfSum
    x = 1515870810 + srdhm_arrays(half, np.int64(-1010580540))
    for _ in range(3):
        one_minus = (1 << 29) - srdhm_arrays(half, x)
        x = x + _saturating_shift(srdhm_arrays(x, one_minus), 2)
    return _saturating_shift(x, 1)


def _saturating_shift(x: np.ndarray, e: int) -> np.ndarray:
    return np.clip(np.asarray(x, np.int64) << e, -(1 << 31), _I32_MAX)


def get_reciprocal(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GetReciprocal(x, 31): a Q0.31 multiplier and the bits over unit, for 0 < x < 2^31."""
    hp1 = _clz32(x)
    shifted_minus_one = (np.asarray(x, np.int64) << hp1) - (1 << 31)
    return _one_over_one_plus_x(shifted_minus_one), 31 - hp1


def leading_sign_bits(x: np.ndarray) -> np.ndarray:
    """CountLeadingSignBits of int32 values (__builtin_clrsb; 31 for zero)."""
    x = np.asarray(x, np.int64)
    y = np.where(x >= 0, x, ~x)
    return np.where(y == 0, 31, _clz32(y) - 1)


def _rounding_divide_by_pot_x86(x: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """RoundingDivideByPOT on int32 as the x86-64 build computes it, exponents of 32 and more
    included: C leaves those shifts undefined; there the mask ``(1ll << e) - 1`` is shifted by
    ``e`` modulo 64 (``shl``) and truncated to int32, and the int32 shift count is taken
    modulo 32 (``sar``), which is what makes the builtin kernel saturate (or add one) where a
    right shift of 32 or more is asked for (a mask of all ones for every e >= 62 was off
    wherever e reached 64: 225 of 65,536 pairs with a multiplier of 2^-30)."""
    x = np.asarray(x, np.int64)
    e = np.asarray(exponent, np.int64) + np.zeros_like(x)
    mask = np.left_shift(np.int64(1), e % 64) - 1  # 1 << 63 wraps, as in C
    mask = ((mask + (1 << 31)) % (1 << 32)) - (1 << 31)  # as int32
    threshold = (mask >> 1) + (x < 0)
    return (x >> (e & 31)) + ((x & mask) > threshold)


def div_table(g1: Grid, g2: Grid, g_out: Grid) -> np.ndarray:
    """DivElementwise for every pair of stored integers: rows q1, columns q2 (a zero divisor,
    on which the kernel's check fails, gives the output's zero point)."""
    f32 = np.float32
    real = float(f32(g1.scale) / (f32(g2.scale) * f32(g_out.scale)))
    m_out, s_out = quantize_multiplier(real)
    v1 = storage_range(g1)[:, None] - g1.zero_point + 0 * storage_range(g2)[None, :]
    v2 = storage_range(g2)[None, :] - g2.zero_point + 0 * v1
    zero = v2 == 0
    v1 = np.where(v2 < 0, -v1, v1)
    v2 = np.where(zero, 1, np.abs(v2))
    inv, recip_shift = get_reciprocal(v2)
    headroom = leading_sign_bits(v1)
    unscaled = srdhm_arrays(v1 << headroom, inv)
    total_shift = s_out - recip_shift - headroom
    if np.any(total_shift > 0):
        raise ConversionError("bit_exact: DIV's output multiplier is too large to emulate")
    y = _rounding_divide_by_pot_x86(srdhm(unscaled, m_out), -total_shift)
    return np.where(zero, g_out.zero_point, clamp_to_grid(y + g_out.zero_point, g_out))


def neg_table(q: np.ndarray, g_in: Grid, g_out: Grid) -> np.ndarray:
    """NEG version 1 on int8: the stored integer negated, wrapped to int8."""
    return ((128 - np.asarray(q, np.int64)) % 256) - 128


# ---------------------------------------------------------------------- converters
def _check_8bit(b: GraphBuilder, op: Operator, indices) -> None:
    kinds = {b.tensor(i).dtype for i in indices}
    if not kinds <= {"int8", "uint8"}:
        raise ConversionError(f"bit_exact: {op.name} on {sorted(kinds)} is not emulated", op.where)


def compare(b: GraphBuilder, op: Operator) -> None:
    """A comparison of two quantized operands: each rescaled through its table, compared."""
    where = op.where
    _check_8bit(b, op, op.inputs[:2])
    onnx_op, negate = COMPARISONS[op.name]
    values = []
    for pos, idx in enumerate(op.inputs[:2]):
        x_raw, g = raw_integers(b, idx, where)
        q = storage_range(g)
        try:
            table = compare_rescaled(q, g)
        except ConversionError as exc:
            raise ConversionError(exc.message, where) from None
        values.append(lookup(b, x_raw, int(q[0]), table, f"{op.name.lower()}_{pos}"))
    y = b.emit(onnx_op, values)[0]
    b.set_output(op.outputs[0], b.emit("Not", [y])[0] if negate else y)


def div(b: GraphBuilder, op: Operator) -> None:
    """DIV: a Gather on the kernel's table at ``(q1 - lo) * 256 + (q2 - lo)`` (broadcasting
    as numpy's rules say, as the kernel's)."""
    where = op.where
    _check_8bit(b, op, [*op.inputs[:2], op.outputs[0]])
    (x1, g1), (x2, g2) = (raw_integers(b, i, where) for i in op.inputs[:2])
    g_out = grid(b, op.outputs[0], where)
    try:
        q_out = div_table(g1, g2, g_out)
    except ConversionError as exc:
        raise ConversionError(exc.message, where) from None
    lo1, lo2 = int(storage_range(g1)[0]), int(storage_range(g2)[0])
    row = b.emit("Mul", [b.emit("Sub", [x1, _f(b, lo1)])[0], _f(b, 256.0)])[0]
    idx = b.emit("Add", [row, b.emit("Sub", [x2, _f(b, lo2)])[0]])[0]
    real = np.float32(g_out.scale) * (q_out.reshape(-1) - g_out.zero_point).astype(np.float32)
    table = b.const(real.astype(np.float32), "div_table")
    y = b.emit("Gather", [table, cast(b, idx, TensorProto.INT64)], axis=0)[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))


def _f(b: GraphBuilder, v: float) -> str:
    return b.const(np.array(v, np.float32), "div_offset")


def neg(b: GraphBuilder, op: Operator) -> None:
    """NEG (int8 only: the runtime has no uint8 NEG kernel, nor a zero-point-aware one)."""
    _check_8bit(b, op, [op.inputs[0], op.outputs[0]])
    if b.tensor(op.inputs[0]).dtype != "int8" or b.tensor(op.outputs[0]).dtype != "int8":
        raise ConversionError("bit_exact: only int8 NEG is emulated", op.where)
    if op.opcode.version != 1:
        raise ConversionError(
            f"bit_exact: NEG version {op.opcode.version} is not the emulated kernel", op.where
        )
    unary_table(b, op, neg_table)
