"""expm1 of float32 values as glibc's expm1f computes it (fdlibm's algorithm), written with
standard ONNX float32 ops so that TANH can be computed as the reference kernel's std::tanh
does (``float_kernels``). glibc's expm1f is not correctly rounded (6.7% of values differ by an
ulp from the correctly rounded result), so only its own steps give its last bits.

The steps (all float32, each rounded): k = trunc(x / ln2 +- 1/2) (+-1 for 0.5 ln2 < |x| <
1.5 ln2, 0 below), hi = x - k ln2_hi, lo = k ln2_lo, r = hi - lo, c = (hi - r) - lo; a rational
correction e from hxs = r^2 / 2 and a degree-5 polynomial in hxs (coefficients Q1..Q5), then
the result by k's case, 2^k applied exactly. |x| < 2^-25 gives x; x <= -27 ln2 gives -1.
Checked against glibc 2.36's expm1f on 475k values in [-60, 60]: all equal. Not for x above
88.7 (overflow; tanh never asks).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from tflite2qonnx.graph import GraphBuilder


def _bits(word: int) -> np.float32:
    return np.array([word], np.uint32).view(np.float32)[0]


LN2_HI, LN2_LO, INV_LN2 = _bits(0x3F317180), _bits(0x3717F7D1), _bits(0x3FB8AA3B)
Q = tuple(_bits(w) for w in (0xBD088889, 0x3AD00D01, 0xB8A670CD, 0x36867E54, 0xB457EDBB))
_HALF_LN2, _ONE_HALF_LN2 = _bits(0x3EB17218), _bits(0x3F851592)
_MINUS_ONE_FROM, _TINY = _bits(0x4195B844), _bits(0x33000000)  # 27 ln2, 2^-25
_K_RANGE = 127  # 2^k as a table over k in [-127, 127]


class _Ops:
    """Float32 arithmetic on ONNX values, one node per operation."""

    def __init__(self, b: GraphBuilder):
        self.b = b

    def c(self, value: float) -> str:
        return self.b.const(np.array(value, np.float32), "expm1f_c")

    def __call__(self, op: str, *inputs: str) -> str:
        return self.b.emit(op, list(inputs))[0]

    def add(self, x: str, y: str) -> str:
        return self("Add", x, y)

    def sub(self, x: str, y: str) -> str:
        return self("Sub", x, y)

    def mul(self, x: str, y: str) -> str:
        return self("Mul", x, y)

    def where(self, cond: str, x: str, y: str) -> str:
        return self("Where", cond, x, y)


def _pow2(o: _Ops, k: str, sign: int) -> str:
    """2^(sign k) exactly, from a table (k is integer-valued float32)."""
    b = o.b
    table = np.ldexp(np.float32(1), np.arange(-_K_RANGE, _K_RANGE + 1)).astype(np.float32)
    idx = b.emit("Cast", [k], to=TensorProto.INT64)[0]
    if sign < 0:
        idx = o("Neg", idx)
    bound = b.const(np.array(_K_RANGE, np.int64), "k_range")
    idx = o("Add", o("Clip", idx, b.const(np.array(-_K_RANGE, np.int64), "k_min"), bound), bound)
    return b.emit("Gather", [b.const(table, "pow2"), idx], axis=0)[0]


def expm1f(b: GraphBuilder, x: str) -> str:
    """glibc's expm1f of float32 ``x`` (module docstring)."""
    o = _Ops(b)
    one, half, zero = o.c(1.0), o.c(0.5), o.c(0.0)
    a = o("Abs", x)
    neg = o("Less", x, zero)
    u = o.add(o.mul(x, o.c(INV_LN2)), o.where(neg, o.c(-0.5), half))
    trunc = o.mul(o("Sign", u), o("Floor", o("Abs", u)))
    sign = o.where(neg, o.c(-1.0), one)
    k = o.where(o("Less", a, o.c(_ONE_HALF_LN2)), sign, trunc)
    k = o.where(o("Greater", a, o.c(_HALF_LN2)), k, zero)
    # k = 0: hi = x, lo = 0, so r = x and c = 0 as the unreduced branch has them
    hi = o.sub(x, o.mul(k, o.c(LN2_HI)))
    lo = o.mul(k, o.c(LN2_LO))
    r = o.sub(hi, lo)
    c = o.sub(o.sub(hi, r), lo)
    hfx = o.mul(half, r)
    hxs = o.mul(r, hfx)
    poly = o.c(Q[4])
    for q in reversed(Q[:4]):
        poly = o.add(o.c(q), o.mul(hxs, poly))
    r1 = o.add(one, o.mul(hxs, poly))
    t = o.sub(o.c(3.0), o.mul(r1, hfx))
    e = o.mul(hxs, o("Div", o.sub(r1, t), o.sub(o.c(6.0), o.mul(r, t))))
    y_k0 = o.sub(r, o.sub(o.mul(r, e), hxs))
    e = o.sub(o.sub(o.mul(r, o.sub(e, c)), c), hxs)
    e_minus_r = o.sub(e, r)
    y_km1 = o.sub(o.mul(half, o.sub(r, e)), half)
    two = o.c(2.0)
    y_k1 = o.where(o("Less", r, o.c(-0.25)),
                   o("Neg", o.mul(two, o.sub(e, o.add(r, half)))),
                   o.add(one, o.mul(two, o.sub(r, e))))  # fmt: skip
    p2k, p2mk = _pow2(o, k, 1), _pow2(o, k, -1)
    y_far = o.sub(o.mul(o.sub(one, e_minus_r), p2k), one)  # k <= -2 or k > 56
    y_mid = o.mul(o.sub(o.sub(one, p2mk), e_minus_r), p2k)  # 2 <= k < 23
    y_high = o.mul(o.add(o.sub(r, o.add(e, p2mk)), one), p2k)  # 23 <= k <= 56
    y = o.where(o("Less", k, o.c(23.0)), y_mid, y_high)
    far = o("Or", o("Less", k, o.c(-1.5)), o("Greater", k, o.c(56.0)))
    y = o.where(far, y_far, y)
    y = o.where(o("Equal", k, one), y_k1, y)
    y = o.where(o("Equal", k, o.c(-1.0)), y_km1, y)
    y = o.where(o("Equal", k, zero), y_k0, y)
    y = o.where(o("And", neg, o("GreaterOrEqual", a, o.c(_MINUS_ONE_FROM))), o.c(-1.0), y)
    return o.where(o("Less", a, o.c(_TINY)), x, y)
