"""LOG_SOFTMAX (int8 / uint8) as the builtin fixed-point LogSoftmax computes it under
--bit-exact.

Both resolvers of ai_edge_litert run that fixed-point kernel for int8, and for uint8 the same
arithmetic with the output offset 255 (q_out in [0, 255], 0 below diff_min): measured equal on
16,800 outputs of three uint8 models, both resolvers, which also agree with each other (the
float lookup table that TFLite's sources give the optimized uint8 kernel is not what runs).
Per row of the last axis, with ``d = q - max(q)`` (int8 shown; uint8 adds 128 to the output):

    S = sum over d >= diff_min of Rescale<12>(exp_on_negative_values(MBQM(d, M_in, shift_in)))
    L = log_x_for_x_greater_than_or_equal_to_1<5>(S as Q12.19)          (Q5.26)
    q_out = d > max(diff_min - 1, MBQM(L + INT32_MIN, M_rev, shift_rev))
            ? clamp(RoundingDivideByPOT(MBQM(d, M_in, shift_in) - L, 22) + 127) : -128

Everything that depends on one element (the exponential, the rescaled difference) is a
256-entry table of d (numpy, gemmlowp's arithmetic); the row's log is evaluated in the graph
with gemmlowp's fixed-point steps on integer-valued float64 tensors. Each
SaturatingRoundingDoublingHighMul splits one operand in 16-bit halves so every product is
exact in float64 (``FixedPointGraph.srdhm``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.fixed_point import cast, grid, quantize_multiplier, raw_integers
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.common import rank_of, reduce_axes
from tflite2qonnx.ops.exact.int8_math_tables import saturating_left_shift, srdhm_arrays
from tflite2qonnx.ops.exact.int8_tables import (
    multiply_by_quantized_multiplier,
    rounding_divide_by_pot,
)

_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1


# ------------------------------------------------------------------ per-element tables (numpy)
def _exp_quarter(a: np.ndarray) -> np.ndarray:
    """exp_on_interval_between_negative_one_quarter_and_0_excl, Q0.31 in and out."""
    x = a + (1 << 28)
    x2 = srdhm_arrays(x, x)
    x3 = srdhm_arrays(x2, x)
    x4 = srdhm_arrays(x2, x2)
    x4_over_4 = rounding_divide_by_pot(x4, 2)
    poly = rounding_divide_by_pot(srdhm_arrays(x4_over_4 + x3, np.int64(715827883)) + x2, 1)
    c = np.int64(1895147668)
    return c + srdhm_arrays(np.full_like(x, c), x + poly)


def exp_on_negative_values(a: np.ndarray, integer_bits: int) -> np.ndarray:
    """gemmlowp's exp_on_negative_values on int32 raws with ``integer_bits``, Q0.31 out."""
    a = np.asarray(a, np.int64)
    frac_bits = 31 - integer_bits
    quarter = 1 << (frac_bits - 2)
    a_mod = (a & (quarter - 1)) - quarter
    result = _exp_quarter(saturating_left_shift(a_mod, integer_bits))
    remainder = a_mod - a
    for exponent, m in ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308)):
        if integer_bits > exponent:
            bit = remainder & (1 << (frac_bits + exponent)) != 0
            result = np.where(bit, srdhm_arrays(result, np.int64(m)), result)
    for exponent, m in ((2, 39332535), (3, 720401), (4, 242)):
        if integer_bits > exponent:
            bit = remainder & (1 << (frac_bits + exponent)) != 0
            result = np.where(bit, srdhm_arrays(result, np.int64(m)), result)
    return np.where(a == 0, _I32_MAX, result)


def _params(s_in: float) -> tuple[int, int, int, int, int]:
    """LogSoftmaxPrepare: (M_in, left shift, M_rev, reverse left shift, diff_min)."""
    real = min(1.0 * float(np.float32(s_in)) * (1 << 26), (1 << 31) - 1.0)
    m_in, left = quantize_multiplier(real)
    if left < 0:
        raise ConversionError("bit_exact: LOG_SOFTMAX input scale too small")
    m_rev, rev_shift = quantize_multiplier((1 << (31 - left)) / float(m_in))
    if rev_shift > 0:
        raise ConversionError("bit_exact: LOG_SOFTMAX reverse scaling above one")
    radius = math.floor(1.0 * ((1 << 5) - 1) * (1 << 26) / (1 << left))
    return int(m_in), int(left), int(m_rev), int(rev_shift), -radius


# ------------------------------------------------------------ fixed point in the graph
class FixedPointGraph:
    """gemmlowp's int32 steps on integer-valued float64 graph values, exactly."""

    def __init__(self, b: GraphBuilder):
        self.b = b

    def c(self, v: float) -> str:
        return self.b.const(np.array(v, np.float64), "fxp")

    def op(self, kind: str, *xs: str) -> str:
        return self.b.emit(kind, list(xs))[0]

    def floor_div_pot(self, x: str, e: int) -> str:
        return self.op("Floor", self.op("Mul", x, self.c(2.0**-e)))

    def clamp32(self, x: str) -> str:
        return self.op("Max", self.op("Min", x, self.c(_I32_MAX)), self.c(_I32_MIN))

    def srdhm(self, a: str, b: str | int) -> str:
        """SaturatingRoundingDoublingHighMul (a and b never both INT32_MIN here)."""
        if isinstance(b, int):
            bh, bl, sign_b = self.c(b >> 16), self.c(b & 0xFFFF), self.c(float(np.sign(b)))
        else:
            bh = self.floor_div_pot(b, 16)
            bl = self.op("Sub", b, self.op("Mul", bh, self.c(65536.0)))
            sign_b = self.op("Sign", b)
        a1 = self.op("Mul", a, bh)  # |.| < 2^47: exact
        a2 = self.op("Mul", a, bl)
        h1 = self.floor_div_pot(a1, 15)
        l1 = self.op("Sub", a1, self.op("Mul", h1, self.c(32768.0)))
        neg = self.op("Less", self.op("Mul", self.op("Sign", a), sign_b), self.c(0.0))
        nudge = self.b.emit("Where", [neg, self.c(1.0 - 2.0**30), self.c(2.0**30)])[0]
        r = self.op("Add", self.op("Add", self.op("Mul", l1, self.c(65536.0)), a2), nudge)
        scaled = self.op("Mul", r, self.c(2.0**-31))
        fr = self.op("Floor", scaled)
        inexact = self.b.emit("Not", [self.op("Equal", scaled, fr)])[0]
        up = cast(self.b, self.op("And", neg, inexact), TensorProto.DOUBLE)
        return self.op("Add", self.op("Add", h1, fr), up)

    def rdbpot(self, x: str, e: int) -> str:
        """RoundingDivideByPOT: round half away from zero at 2^e."""
        if e == 0:
            return x
        u = self.op("Mul", x, self.c(2.0**-e))
        mag = self.op("Floor", self.op("Add", self.op("Abs", u), self.c(0.5)))
        return self.op("Mul", self.op("Sign", u), mag)

    def sat_left(self, x: str, e: str | int) -> str:
        """SaturatingRoundingMultiplyByPOT(Param) with e >= 0: x * 2^e saturated to int32."""
        scale = self.c(2.0**e) if isinstance(e, int) else self.op("Pow", self.c(2.0), e)
        return self.clamp32(self.op("Mul", x, scale))

    def clz(self, x: str) -> str:
        """CountLeadingZeros of a positive int32: 31 - floor(log2 x), the float log corrected
        by exact powers of two."""
        e = self.op("Floor", self.op("Mul", self.op("Log", x), self.c(1.0 / math.log(2.0))))
        p = self.op("Pow", self.c(2.0), e)
        up = cast(self.b, self.op("LessOrEqual", self.op("Add", p, p), x), TensorProto.DOUBLE)
        down = cast(self.b, self.op("Greater", p, x), TensorProto.DOUBLE)
        e = self.op("Sub", self.op("Add", e, up), down)
        return self.op("Sub", self.c(31.0), e)

    def half_sum(self, a: str, b: str | int) -> str:
        """RoundingHalfSum: (a + b + sign) / 2, truncated."""
        s = self.op("Add", a, self.c(b) if isinstance(b, int) else b)
        sign = self.b.emit("Where", [self.op("Less", s, self.c(0.0)), self.c(-1.0), self.c(1.0)])[0]
        t = self.op("Mul", self.op("Add", s, sign), self.c(0.5))
        return self.op("Mul", self.op("Sign", t), self.op("Floor", self.op("Abs", t)))

    def one_over_one_plus_x(self, a: str) -> str:
        """one_over_one_plus_x_for_x_in_0_1: Q0.31 in and out, three Newton steps in Q2.29."""
        half_den = self.half_sum(a, _I32_MAX)
        x = self.op("Add", self.c(1515870810), self.srdhm(half_den, -1010580540))
        for _ in range(3):
            one_minus = self.op("Sub", self.c(1 << 29), self.srdhm(half_den, x))
            x = self.op("Add", x, self.sat_left(self.srdhm(x, one_minus), 2))
        return self.sat_left(x, 1)

    def log(self, s: str) -> str:
        """log_x_for_x_greater_than_or_equal_to_1<5> of a Q12.19 value: Q5.26."""
        sqrt_half, sqrt_sqrt_half = 1518500250, 1805811301
        shifted_quarter = 536870912 >> 6  # Rescale<6>(1/4): RoundingDivideByPOT by 6, exact
        clz_a = self.clz(s)
        r_a_tmp = self.sat_left(s, self.op("Sub", clz_a, self.c(1.0)))
        r_a = self.sat_left(self.srdhm(r_a_tmp, sqrt_half), 1)
        za_pow = self.op("Mul", self.op("Sub", self.c(12.0), clz_a), self.c(2.0**25))
        za_adj = self.clamp32(self.op("Add", za_pow, self.c(shifted_quarter)))
        z_b = self.srdhm(s, sqrt_half)
        hb = self.op("Sub", self.clz(z_b), self.c(1.0))
        r_b = self.sat_left(s, hb)
        zb_pow = self.op("Mul", self.op("Sub", self.c(12.0), hb), self.c(2.0**25))
        zb_adj = self.clamp32(self.op("Sub", zb_pow, self.c(shifted_quarter)))
        r = self.op("Min", r_a, r_b)
        z_adj = self.op("Max", za_adj, zb_adj)
        p = self.half_sum(r, sqrt_sqrt_half)
        q = self.op("Sub", r, self.c(sqrt_sqrt_half))
        q = self.op("Add", q, q)
        common_sq = self.srdhm(q, q)
        num = self.op("Add", self.srdhm(q, r), self.srdhm(self.srdhm(q, common_sq), 117049297))
        inner = self.op(
            "Add", self.op("Add", self.c(1057819769), q), self.srdhm(common_sq, 127690142)
        )
        den = self.op("Add", self.srdhm(p, inner), self.srdhm(q, 638450708))
        recip = self.one_over_one_plus_x(den)
        num_scaled = self.rdbpot(num, 6)
        total = self.op("Add", self.srdhm(z_adj, 1488522236), self.srdhm(num_scaled, recip))
        return self.sat_left(total, 1)


def row_max_tables(
    b: GraphBuilder, op: Operator, x_raw: str
) -> tuple[int, str, Callable[[np.ndarray, str], str]]:
    """The last axis, each element's distance below its row's maximum (``max - x``, 0..255,
    int64), and a lookup of 256-entry tables indexed by that distance, as the 8-bit softmax
    kernels index theirs."""
    axis = rank_of(b, op.inputs[0]) - 1
    row_max = reduce_axes(b, "ReduceMax", x_raw, [axis], 1)
    k = cast(b, b.emit("Sub", [row_max, x_raw])[0], TensorProto.INT64)

    def table(values: np.ndarray, hint: str) -> str:
        return b.emit("Gather", [b.const(values.astype(np.float64), hint), k], axis=0)[0]

    return axis, k, table


def log_softmax(b: GraphBuilder, op: Operator) -> None:
    where = op.where
    uint8 = b.tensor(op.inputs[0]).dtype == "uint8"
    if b.tensor(op.inputs[0]).dtype not in ("int8", "uint8"):
        raise ConversionError("bit_exact: only int8 / uint8 LOG_SOFTMAX is emulated", where)
    x_raw, g_in = raw_integers(b, op.inputs[0], where)
    g_out = grid(b, op.outputs[0], where)
    m_in, left, m_rev, rev_shift, diff_min = _params(g_in.scale)
    d = np.arange(0, -256, -1, dtype=np.int64)  # table index k holds d = -k
    scaled = multiply_by_quantized_multiplier(d, m_in, left)
    exps = rounding_divide_by_pot(exp_on_negative_values(scaled, 5), 12)
    exps = np.where(d >= diff_min, exps, 0)
    axis, _, table = row_max_tables(b, op, x_raw)
    fx = FixedPointGraph(b)
    total = reduce_axes(b, "ReduceSum", table(exps, "log_softmax_exp"), [axis], 1)
    log_sum = fx.log(total)
    shifted = fx.op("Add", log_sum, fx.c(_I32_MIN))
    rescaled = fx.rdbpot(fx.srdhm(shifted, m_rev), -rev_shift)
    adjusted = fx.op("Max", rescaled, fx.c(diff_min - 1))
    d_col = table(-np.arange(256, dtype=np.float64), "log_softmax_d")
    diff = fx.op("Sub", table(scaled, "log_softmax_diff"), log_sum)
    top = 255.0 if uint8 else 127.0
    q = fx.op("Add", fx.rdbpot(diff, 22), fx.c(top))
    q = fx.op("Max", fx.op("Min", q, fx.c(top)), fx.c(top - 255.0))
    q = b.emit("Where", [fx.op("Greater", d_col, adjusted), q, fx.c(top - 255.0)])[0]
    q = cast(b, q, TensorProto.FLOAT)
    zp = np.float32(g_out.zero_point)
    y = b.emit(
        "Mul",
        [
            b.emit("Sub", [q, b.const(np.array(zp, np.float32), "zp")])[0],
            b.const(np.array(g_out.scale, np.float32), "output_scale"),
        ],
    )[0]
    b.set_output(op.outputs[0], y)
