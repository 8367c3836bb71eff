"""int16 DIV as TFLite's builtin kernel computes it (reference_ops::DivElementwise<int16_t>),
exactly, in int64 ONNX arithmetic.

Per element, with ``v1 = q1``, ``v2 = q2`` (zero points 0), both negated where ``v2 < 0``:

    (inv, r)  = GetReciprocal(v2, 31)             inv in Q0.31, r = 31 - clz(v2)
    h         = CountLeadingSignBits(v1)          31 for v1 = 0
    u         = SRDHM(v1 << h, inv)
    q_out     = RoundingDivideByPOT(SRDHM(u, M), r + h - shift)     clamped to int16

with ``(M, shift) = QuantizeMultiplier(s1 / (s2 * s_out))`` (float32 quotient). Rounding the
real quotient once was up to 32768 steps off: the right shift ``r + h - shift`` reaches 32
and more wherever the dividend is small (h = 31 at 0), a shift C leaves undefined. The x86-64
build takes the shift count modulo 32 and the rounding mask ``(1ll << e) - 1`` as int32 -1,
so there the kernel returns ``(x >> (e - 32)) + (x >= 0)``: 1 for 0 / y, and up to the
saturated ±32767 for small quotients. That is what the interpreter computes on x86-64 (and
AArch64's scalar shifts take the counts modulo 32 and 64 too), so it is what is emulated,
the 64-bit mask's count modulo 64 included (shifts of 64 and more: multipliers below
2^-18); a build whose shifts fill with the sign (32-bit ARM, SIMD shifts) gives ±1 there
instead. A left shift (a multiplier of 2^15 and more) is refused.

GetReciprocal depends on |v2| only and the headroom on v1 only: three Gathers on tables
computed here (``exact_compare``'s numpy kernels). The two high multiplies and the rounding
division are int64 Mul / Div / Mod (C's truncating division is ONNX Div's on integers).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.fixed_point import cast, grid, quantize_multiplier, raw_integers
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.common import clip_bounds
from tflite2qonnx.ops.exact.compare import get_reciprocal, leading_sign_bits

_DIVISORS = np.arange(0, 32769, dtype=np.int64)  # |v2| (0: the kernel fails; any entry)
_DIVIDENDS = np.arange(-32768, 32769, dtype=np.int64)  # v1 after the sign flip


class Int64Graph:
    """gemmlowp's int32 steps on int64 graph values (every product below 2^62: exact)."""

    def __init__(self, b: GraphBuilder):
        self.b = b

    def c(self, v) -> str:
        return self.b.const(np.asarray(v, np.int64), "i64")

    def op(self, kind: str, *xs: str, **attrs) -> str:
        return self.b.emit(kind, list(xs), **attrs)[0]

    def where(self, cond: str, x: str, y: str) -> str:
        return self.op("Where", cond, x, y)

    def bit(self, cond: str) -> str:
        return cast(self.b, cond, TensorProto.INT64)

    def srdhm(self, a: str, b: str) -> str:
        """SaturatingRoundingDoublingHighMul of int32 values (never both INT32_MIN here):
        ``(a b + nudge) / 2^31`` in C's truncating division."""
        ab = self.op("Mul", a, b)
        nudge = self.where(self.op("Less", ab, self.c(0)), self.c(1 - (1 << 30)), self.c(1 << 30))
        return self.op("Div", self.op("Add", ab, nudge), self.c(1 << 31))

    def rounding_divide_by_pot_x86(self, x: str, e: str) -> str:
        """RoundingDivideByPOT(x, e) for 0 <= e < 96 as x86-64 computes it (see the module
        docstring): with e taken modulo 64, below 32 round half away from zero; from 32 on
        ``floor(x / 2^(e - 32))`` plus one where x >= 0."""
        e = self.op("Mod", e, self.c(64), fmod=0)
        wide = self.op("GreaterOrEqual", e, self.c(32))
        e = self.where(wide, self.op("Sub", e, self.c(32)), e)
        pot = self.op("Gather", self.c(1 << np.arange(32, dtype=np.int64)), e, axis=0)
        remainder = self.op("Mod", x, pot, fmod=0)  # x & (2^e - 1): the divisor is positive
        floor = self.op("Div", self.op("Sub", x, remainder), pot)  # exact
        negative = self.op("Less", x, self.c(0))
        threshold = self.op("Add", self.op("Div", self.op("Sub", pot, self.c(1)), self.c(2)),
                            self.bit(negative))  # fmt: skip
        up = self.where(wide, self.bit(self.op("Not", negative)),
                        self.bit(self.op("Greater", remainder, threshold)))  # fmt: skip
        return self.op("Add", floor, up)


def _tables(g1, g2, g_out) -> tuple[int, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(M, shift, inv[|v2|], r[|v2|], (v1 << h)[v1 + 32768], h[v1 + 32768])."""
    real = float(np.float32(g1.scale) / (np.float32(g2.scale) * np.float32(g_out.scale)))
    m, shift = quantize_multiplier(real)
    inv, recip_shift = get_reciprocal(np.maximum(_DIVISORS, 1))
    headroom = leading_sign_bits(_DIVIDENDS)
    if recip_shift[1:].min() + headroom.min() - shift < 0:  # every pair occurs
        raise ConversionError("int16 DIV: the output multiplier is too large to emulate")
    return m, shift, inv, recip_shift, _DIVIDENDS << headroom, headroom


def convert(b: GraphBuilder, op: Operator) -> None:
    """int16 DIV (both inputs and the output int16, zero points 0), broadcasting as numpy's
    rules say; a zero divisor (on which the kernel fails) gives 0."""
    where = op.where
    (x1, g1), (x2, g2) = (raw_integers(b, i, where) for i in op.inputs[:2])
    g_out = grid(b, op.outputs[0], where)
    try:
        m, shift, inv, recip_shift, shifted, headroom = _tables(g1, g2, g_out)
    except ConversionError as exc:
        raise ConversionError(exc.message, where) from None
    fx = Int64Graph(b)
    v1, v2 = (cast(b, x, TensorProto.INT64) for x in (x1, x2))
    flip = fx.op("Less", v2, fx.c(0))
    v1 = fx.where(flip, fx.op("Neg", v1), v1)
    v2 = fx.op("Abs", v2)
    row = fx.op("Add", v1, fx.c(32768))
    unscaled = fx.srdhm(
        fx.op("Gather", fx.c(shifted), row, axis=0), fx.op("Gather", fx.c(inv), v2, axis=0)
    )
    e = fx.op("Add", fx.op("Gather", fx.c(recip_shift), v2, axis=0),
              fx.op("Gather", fx.c(headroom - shift), row, axis=0))  # fmt: skip
    q = fx.rounding_divide_by_pot_x86(fx.srdhm(unscaled, fx.c(m)), e)
    q = fx.where(fx.op("Equal", v2, fx.c(0)), fx.c(0), q)
    k = b.emit("Clip", [cast(b, q, TensorProto.FLOAT), *clip_bounds(b, -32768.0, 32767.0)])[0]
    y = b.emit("Mul", [k, b.const(np.array(g_out.scale, np.float32), "output_scale")])[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))
