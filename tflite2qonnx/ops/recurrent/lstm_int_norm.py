"""TFLite's integer layer normalization of the 8x8_16 LSTM (ApplyLayerNorm on int16 gates),
as exact integer arithmetic in float64 ONNX ops.

Per row of n int16 values v (one batch entry of one gate):

    mean = trunc(1024 * sum(v) / n)
    variance = trunc((sum(v^2) * (2^20 // n) - mean^2) / 2^20), the variance guard if < 1
    (inv, shift) = GetInvSqrtQuantizedMultiplierExp(variance)   (Newton-Raphson in Q3.28)
    r = RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(1024 v - mean, inv), shift)
    out = round_half_away(r * w + bias, 2^10)          (then the caller's fixed-point rescale)

The inverse square root depends on the data, so its multiplier and shift are graph values: the
products of two 31-bit integers are split in 16-bit halves to stay exact in float64.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from tflite2qonnx.fixed_point import f64, rounding_divide_by_pot
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.ops.int64_order import extreme

_HALF_SQRT_2 = 1518500250  # sqrt(2) / 2 in Q0.31
_INT32_MAX = 2**31 - 1


def _op(b: GraphBuilder, op_type: str, *inputs: str, **attrs) -> str:
    return b.emit(op_type, list(inputs), **attrs)[0]


def _floor_div(b: GraphBuilder, x: str, divisor: float) -> str:
    return _op(b, "Floor", _op(b, "Mul", x, f64(b, 1.0 / divisor, "inv_divisor")))


def _trunc_div(b: GraphBuilder, x: str, divisor: float) -> str:
    """C++ integer division (toward zero) by a positive power of two or small integer whose
    reciprocal is exact in float64 for the sizes here (quotients below 2^53)."""
    q = _op(b, "Div", _op(b, "Abs", x), f64(b, divisor, "divisor"))
    return _op(b, "Mul", _op(b, "Sign", x), _op(b, "Floor", q))


def srdhm(b: GraphBuilder, a: str, m: str) -> str:
    """gemmlowp's SaturatingRoundingDoublingHighMul(a, m) = floor(a * m / 2^31 + 1/2) for
    int32 graph values a and m (float64), exactly: m = hi * 2^16 + lo keeps each product
    below 2^47, and the high product's fraction at 2^-31 is carried separately."""
    hi = _floor_div(b, m, 2.0**16)
    lo = _op(b, "Sub", m, _op(b, "Mul", hi, f64(b, 2.0**16, "two16")))
    p = _op(b, "Mul", a, hi)
    p1 = _floor_div(b, p, 2.0**15)
    p0 = _op(b, "Sub", p, _op(b, "Mul", p1, f64(b, 2.0**15, "two15")))
    rest = _op(b, "Add", _op(b, "Mul", p0, f64(b, 2.0**16, "two16")), _op(b, "Mul", a, lo))
    rest = _op(b, "Add", rest, f64(b, 2.0**30, "nudge"))
    return _op(b, "Add", p1, _floor_div(b, rest, 2.0**31))


def _i64(b: GraphBuilder, value: int, hint: str) -> str:
    return b.const(np.array(value, np.int64), hint)


def _srdhm_nonnegative(b: GraphBuilder, a: str, m: str) -> str:
    """SaturatingRoundingDoublingHighMul of int64 graph values a, m >= 0 (int32 range):
    (a * m + 2^30) // 2^31, the product exact in int64."""
    ab = _op(b, "Add", _op(b, "Mul", a, m), _i64(b, 1 << 30, "nudge"))
    return _op(b, "Div", ab, _i64(b, 1 << 31, "two31"))


def _saturate_pot(b: GraphBuilder, x: str, exponent: int) -> str:
    """SaturatingRoundingMultiplyByPOT of a non-negative int64 x by 2^exponent (> 0)."""
    y = _op(b, "Mul", x, _i64(b, 1 << exponent, "pot"))
    # not Min: onnxruntime's int64 Min takes y in [2^31, 2^32) for the smaller (int64_order)
    return extreme(b, "Min", y, _i64(b, _INT32_MAX, "int32_max"), TensorProto.INT64)


def inv_sqrt(b: GraphBuilder, v: str) -> tuple[str, str]:
    """GetInvSqrtQuantizedMultiplierExp(v, reverse_shift=-1) for int32 v >= 1 (float64 graph
    values): the multiplier and the right shift that follows it (both float64 integers).

    The Newton-Raphson iteration runs in int64 ops: from x = 1 below 1 / sqrt(input) every
    iterate, product and difference is non-negative, so integer division is the floor
    SaturatingRoundingDoublingHighMul rounds with."""
    # e = floor(log2 v) by comparisons (exact), k = pairs of bits shifted left (-1: v >> 2)
    powers = f64(b, 2.0 ** np.arange(1, 31), "powers_of_two")
    e = _op(b, "Cast", _op(b, "GreaterOrEqual", v, powers), to=TensorProto.DOUBLE)
    e = _op(b, "ReduceSum", e, b.const(np.array([-1], np.int64), "axis"), keepdims=1)
    pairs = _floor_div(b, _op(b, "Sub", f64(b, 30.0, "thirty"), e), 2.0)
    k = _op(b, "Sub", pairs, f64(b, 1.0, "one"))
    shift = _op(b, "Sub", f64(b, 11.0, "eleven"), k)
    scaled = _op(b, "Floor", _op(b, "Mul", v, _op(b, "Pow", f64(b, 4.0, "four"), k)))
    x_in = _floor_div(b, scaled, 2.0)  # Q3.28 of the normalized input
    half = _op(b, "Floor", _op(b, "Add", _op(b, "Mul", x_in, f64(b, 0.5, "h")), f64(b, 0.5, "h")))
    half = _op(b, "Cast", half, to=TensorProto.INT64)
    half_three = _i64(b, (1 << 28) + (1 << 27), "half_three")
    x = _op(b, "Mul", _op(b, "Cast", e, to=TensorProto.INT64), _i64(b, 0, "zero"))
    x = _op(b, "Add", x, _i64(b, 1 << 28, "q3_one"))
    for _ in range(5):
        x3 = _srdhm_nonnegative(b, _srdhm_nonnegative(b, x, x), x)
        x3 = _saturate_pot(b, x3, 6)
        diff = _op(b, "Sub", _srdhm_nonnegative(b, half_three, x),
                   _srdhm_nonnegative(b, half, x3))  # fmt: skip
        x = _saturate_pot(b, diff, 3)
    x = _srdhm_nonnegative(b, x, _i64(b, _HALF_SQRT_2, "half_sqrt_2"))
    x = _op(b, "Cast", x, to=TensorProto.DOUBLE)
    # a negative shift moves into the multiplier (a left shift, within int32 here)
    left = _op(b, "Max", _op(b, "Neg", shift), f64(b, 0.0, "zero"))
    x = _op(b, "Mul", x, _op(b, "Pow", f64(b, 2.0, "two"), left))
    shift = _op(b, "Max", shift, f64(b, 0.0, "zero"))
    # v <= 1: INT32_MAX, no shift
    small = _op(b, "LessOrEqual", v, f64(b, 1.0, "one"))
    x = _op(b, "Where", small, f64(b, float(_INT32_MAX), "int32_max"), x)
    shift = _op(b, "Where", small, f64(b, 0.0, "zero"), shift)
    return x, shift


def layer_norm_integer(
    b: GraphBuilder, v: str, n: int, weights: np.ndarray, bias: np.ndarray, guard: int
) -> str:
    """ApplyLayerNorm's int32 result before its final rescale, round(r * w + bias, 2^10), for
    int16 rows ``v`` (float64 [batch, n])."""
    axis = b.const(np.array([-1], np.int64), "axis")
    total = _op(b, "ReduceSum", v, axis, keepdims=1)
    total_sq = _op(b, "ReduceSum", _op(b, "Mul", v, v), axis, keepdims=1)
    mean = _trunc_div(b, _op(b, "Mul", total, f64(b, 1024.0, "k1024")), float(n))
    variance = _op(b, "Sub", _op(b, "Mul", total_sq, f64(b, float((1 << 20) // n), "temp")),
                   _op(b, "Mul", mean, mean))  # fmt: skip
    variance = _trunc_div(b, variance, 2.0**20)
    variance = _op(b, "Where", _op(b, "Less", variance, f64(b, 1.0, "one")),
                   f64(b, float(guard), "variance_guard"), variance)  # fmt: skip
    inv, shift = inv_sqrt(b, variance)
    shifted = _op(b, "Sub", _op(b, "Mul", v, f64(b, 1024.0, "k1024")), mean)
    t = srdhm(b, shifted, inv)
    # RoundingDivideByPOT by the per-row shift: round half away from zero
    u = _op(b, "Div", t, _op(b, "Pow", f64(b, 2.0, "two"), shift))
    mag = _op(b, "Floor", _op(b, "Add", _op(b, "Abs", u), f64(b, 0.5, "half")))
    r = _op(b, "Mul", _op(b, "Sign", u), mag)
    y = _op(b, "Add", _op(b, "Mul", r, f64(b, weights.astype(np.float64), "ln_weights")),
            f64(b, bias.astype(np.float64), "ln_bias"))  # fmt: skip
    return rounding_divide_by_pot(b, y, 10)
