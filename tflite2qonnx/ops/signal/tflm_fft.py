"""SignalRfft and SignalIrfft: TFLM's kissfft v130 (int16 / int32 fixed point, FIXED_POINT
16 / 32, or float), emulated stage by stage.

kiss_fftr of length N packs the real input as N/2 complex values, runs kiss_fft on them
(decimation in time, radix-4 then radix-2 stages) and splits the result with "super
twiddles"; kiss_fftri undoes the split and runs the inverse kiss_fft. In fixed point every
butterfly first divides its inputs by the radix (``sround(x * (SAMP_MAX / p))``), every
complex product rounds ``(a*b - c*d + 2^(f-1)) >> f`` (f = 15 / 31 fraction bits) and every
store wraps to the kernel's int16 / int32; in float
the same steps are float32 operations in the same order. Each stage is one Gather of its
butterflies' operands (the recursion's data movement folded into index tables at conversion
time) and that arithmetic (``tflm_int`` for the integers), so the output is bit exact. Only
power-of-two lengths (radix 4 and 2 stages) are emulated; other factors (kissfft's radix 3, 5
and generic butterflies) are refused by name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.signal.tflm_int import Int64, check_operand, int_option, options

_TYPES = {7: "int16", 2: "int32", 0: "float32"}  # tflite.TensorType codes of the 'T' option

Complex = tuple[str, str]


class _Arith:
    """kissfft's scalar macros for one kernel type: int16 or int32 fixed point (FIXED_POINT
    16 / 32: 15 / 31 fraction bits, int32 / int64 products) on int64 values, or float32."""

    def __init__(self, m: Int64, dtype: str) -> None:
        self.m, self.fixed = m, dtype != "float32"
        self.bits = 32 if dtype == "int32" else 16
        self.frac = self.bits - 1
        self.samp_max = (1 << self.frac) - 1

    def sround(self, x: str) -> str:
        """``(x + 2^(frac-1)) >> frac`` for any int64 x (int32 products reach 2^63 - 2^32,
        beyond ``Int64.shr``'s offset): the floor quotient plus whether the remainder and
        the rounding term carry."""
        m, step = self.m, 1 << self.frac
        rest = m.op("Mod", x, m.c(step), fmod=0)
        floor = m.op("Div", m.sub(x, rest), m.c(step))
        carry = m.op("GreaterOrEqual", rest, m.c(step >> 1))
        return m.add(floor, m.op("Cast", carry, to=TensorProto.INT64))

    def const(self, value) -> str:
        if self.fixed:
            return self.m.c(value)
        return self.m.b.const(np.asarray(value, np.float32), "kissfft_float")

    def op(self, kind: str, *xs: str) -> str:
        return self.m.op(kind, *xs)

    def store(self, v: str) -> str:
        return self.m.wrap(v, self.bits) if self.fixed else v

    def fixdiv(self, c: Complex, p: int) -> Complex:
        """C_FIXDIV: each part times (SAMP_MAX / p), rounded (a no-op in float)."""
        if not self.fixed:
            return c
        return tuple(self.store(self.sround(self.m.mul(v, self.samp_max // p))) for v in c)

    def add(self, a: Complex, b: Complex) -> Complex:
        return self.store(self.op("Add", a[0], b[0])), self.store(self.op("Add", a[1], b[1]))

    def sub(self, a: Complex, b: Complex) -> Complex:
        return self.store(self.op("Sub", a[0], b[0])), self.store(self.op("Sub", a[1], b[1]))

    def neg(self, v: str) -> str:
        return self.store(self.op("Neg", v))

    def half(self, v: str) -> str:
        """HALF_OF of an int sum (wrapping as a 32-bit int): ``>> 1``; ``* 0.5f`` in float."""
        if self.fixed:
            return self.m.shr(self.m.wrap(v, 32), 1)
        return self.op("Mul", v, self.const(0.5))

    def cmul(self, a: Complex, br: np.ndarray, bi: np.ndarray) -> Complex:
        cr, ci = self.const(br), self.const(bi)
        re = self.op("Sub", self.op("Mul", a[0], cr), self.op("Mul", a[1], ci))
        im = self.op("Add", self.op("Mul", a[0], ci), self.op("Mul", a[1], cr))
        if not self.fixed:
            return re, im
        return tuple(self.store(self.sround(v)) for v in (re, im))

    def cexp(self, phases: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
        """kf_cexp: floor(0.5 + SAMP_MAX * cos / sin) in fixed point, (float) cos / sin else."""
        if self.fixed:
            cos = [math.floor(0.5 + self.samp_max * math.cos(p)) for p in phases]
            sin = [math.floor(0.5 + self.samp_max * math.sin(p)) for p in phases]
            return np.array(cos, np.int64), np.array(sin, np.int64)
        cos = np.array([math.cos(p) for p in phases]).astype(np.float32)
        return cos, np.array([math.sin(p) for p in phases]).astype(np.float32)


def _factors(n: int) -> list[tuple[int, int]]:
    """kissfft's factorization: (radix, remaining length) pairs, 4s first, then 2."""
    out, p, floor_sqrt = [], 4, math.floor(math.sqrt(n))
    while True:
        while n % p:
            p = {4: 2, 2: 3}.get(p, p + 2)
            if p > floor_sqrt:
                p = n
        n //= p
        out.append((p, n))
        if n <= 1:
            return out


def _leaf_order(n: int, factors: list[tuple[int, int]]) -> np.ndarray:
    """Which input value kf_work's leaves copy to each output slot."""
    order = np.zeros(n, np.int64)

    def work(out: int, src: int, stride: int, level: int) -> None:
        p, m = factors[level]
        for q in range(p):
            if m == 1:
                order[out + q] = src + q * stride
            else:
                work(out + q * m, src + q * stride, stride * p, level + 1)

    work(0, 0, 1, 0)
    return order


def _kiss_fft(a: _Arith, z: Complex, n: int, inverse: bool) -> tuple[Complex, np.ndarray]:
    """kiss_fft of the complex values ``z`` (last axis, logical order): the result and the
    physical position of each logical slot."""
    factors = _factors(n)
    sign = 1 if inverse else -1
    tw = a.cexp([sign * 2 * math.pi * i / n for i in range(n)])
    m = a.m
    order = _leaf_order(n, factors)
    re, im = (m.op("Gather", v, m.c(order), axis=-1) for v in z)
    pos = np.arange(n)
    for p, m_len in reversed(factors):
        fstride = n // (p * m_len)
        blocks = np.arange(0, n, p * m_len)[:, None]
        k = np.arange(m_len)[None, :]
        slots = [(blocks + k + q * m_len).ravel() for q in range(p)]
        kk = np.broadcast_to(k, (len(blocks), m_len)).ravel()
        x = [a.fixdiv(tuple(m.op("Gather", v, m.c(pos[s]), axis=-1) for v in (re, im)), p)
             for s in slots]  # fmt: skip
        t = [None] + [a.cmul(x[q], tw[0][q * kk * fstride], tw[1][q * kk * fstride])
                      for q in range(1, p)]  # fmt: skip
        if p == 2:
            outs = [a.add(x[0], t[1]), a.sub(x[0], t[1])]
        else:
            s5, f0 = a.sub(x[0], t[2]), a.add(x[0], t[2])
            s3, s4 = a.add(t[1], t[3]), a.sub(t[1], t[3])
            plus = (a.store(a.op("Add", s5[0], s4[1])), a.store(a.op("Sub", s5[1], s4[0])))
            minus = (a.store(a.op("Sub", s5[0], s4[1])), a.store(a.op("Add", s5[1], s4[0])))
            one, three = (minus, plus) if inverse else (plus, minus)
            outs = [a.add(f0, s3), one, a.sub(f0, s3), three]
        re = m.op("Concat", *[o[0] for o in outs], axis=-1)
        im = m.op("Concat", *[o[1] for o in outs], axis=-1)
        pos = np.empty(n, np.int64)
        pos[np.concatenate(slots)] = np.arange(n)
    return (re, im), pos


def _pair_slots(m: Int64, first: str, low: str, high: str, last: str, half: int) -> str:
    """[first, low_1 .. low_{h-1}, high_h .. high_1, last] over the last axis (h = half / 2):
    slot k from ``low`` (k < h), slot half - k from ``high`` (slot h written last)."""
    h = half // 2
    body_low = m.op("Slice", low, m.c([0]), m.c([h - 1]), m.c([-1]))
    body_high = m.op("Gather", high, m.c(np.arange(h - 1, -1, -1)), axis=-1)
    parts = [p for p in (first, body_low, body_high, last) if p is not None]
    return m.op("Concat", *parts, axis=-1)


def _check(b: GraphBuilder, op: Operator, inverse: bool) -> tuple[int, str, tuple, tuple]:
    opts = options(op)
    length = int_option(opts, "fft_length", op, 4, 1 << 16)
    dtype = _TYPES.get(opts.get("T"))
    if dtype is None:
        raise ConversionError(
            f"{op.name} with T={opts.get('T')!r}: TFLM's kernels are int16 (7), int32 (2) and "
            "float32 (0)",
            op.where,
        )
    factors = _factors(length // 2)
    if length % 2 or any(p not in (2, 4) for p, _ in factors):
        raise ConversionError(
            f"{op.name}: fft_length {length} is not a power of two >= 4; kissfft's radix "
            f"3 / 5 / generic butterflies ({[p for p, _ in factors]}) are not emulated",
            op.where,
        )
    shape = check_operand(b, op.inputs[0], dtype, None, op, "the input")
    out = check_operand(b, op.outputs[0], dtype, len(shape), op, "the output")
    want = length if inverse else length + 2
    fits = shape[-1] >= length + 2 and shape[-1] % 2 == 0 if inverse else shape[-1] <= length
    if not fits or out != (*shape[:-1], want):
        raise ConversionError(
            f"{op.name}: input {list(shape)} and output {list(out)} do not fit fft_length "
            f"{length} (outputs of {want} per row)",
            op.where,
        )
    return length, dtype, shape, out


def rfft(b: GraphBuilder, op: Operator) -> None:
    """[..., L] (zero-padded to fft_length) -> [..., fft_length + 2]: the fft_length / 2 + 1
    complex outputs as (real, imaginary) pairs; the int16 kernel keeps kissfft's scaling (the
    DFT divided by fft_length)."""
    length, dtype, shape, out = _check(b, op, inverse=False)
    a = _Arith(Int64(b), dtype)
    m, half = a.m, length // 2
    x = m.cast_in(op.inputs[0]) if a.fixed else b.input(op.inputs[0])
    if shape[-1] < length:
        pads = [0] * len(shape) + [0] * (len(shape) - 1) + [length - shape[-1]]
        x = m.op("Pad", x, m.c(pads))
    z = tuple(m.op("Gather", x, m.c(2 * np.arange(half) + j), axis=-1) for j in (0, 1))
    (re, im), pos = _kiss_fft(a, z, half, inverse=False)

    def take(v: str, slots) -> str:
        return m.op("Gather", v, m.c(pos[np.asarray(slots)]), axis=-1)

    k = np.arange(1, half // 2 + 1)
    sr, si = a.cexp([-math.pi * ((i + 1) / half + 0.5) for i in range(half // 2)])
    dc = a.fixdiv((take(re, [0]), take(im, [0])), 2)
    first, last = a.store(a.op("Add", *dc)), a.store(a.op("Sub", *dc))
    pk = a.fixdiv((take(re, k), take(im, k)), 2)
    pnk = a.fixdiv((take(re, half - k), a.neg(take(im, half - k))), 2)
    f1, f2 = a.add(pk, pnk), a.sub(pk, pnk)
    tw = a.cmul(f2, sr, si)
    low = a.half(a.op("Add", f1[0], tw[0])), a.half(a.op("Add", f1[1], tw[1]))
    high = a.half(a.op("Sub", f1[0], tw[0])), a.half(a.op("Sub", tw[1], f1[1]))
    zero = a.const(np.zeros((*out[:-1], 1)))
    real = _pair_slots(m, first, low[0], high[0], last, half)
    imag = _pair_slots(m, zero, low[1], high[1], zero, half)
    _interleave(a, real, imag, op.outputs[0], out)


def irfft(b: GraphBuilder, op: Operator) -> None:
    """[..., 2 * (fft_length / 2 + 1) or more] complex pairs -> [..., fft_length]: kiss_fftri
    (the halves recombined, the inverse kiss_fft); the float kernel then divides by
    fft_length, the int16 one keeps kissfft's scaling."""
    length, dtype, shape, out = _check(b, op, inverse=True)
    a = _Arith(Int64(b), dtype)
    m, half = a.m, length // 2
    x = m.cast_in(op.inputs[0]) if a.fixed else b.input(op.inputs[0])

    def part(j: int, slots) -> str:
        return m.op("Gather", x, m.c(2 * np.asarray(slots) + j), axis=-1)

    k = np.arange(1, half // 2 + 1)
    sr, si = a.cexp([math.pi * ((i + 1) / half + 0.5) for i in range(half // 2)])
    dc = (a.store(a.op("Add", part(0, [0]), part(0, [half]))),
          a.store(a.op("Sub", part(0, [0]), part(0, [half]))))  # fmt: skip
    dc = a.fixdiv(dc, 2)
    fk = a.fixdiv((part(0, k), part(1, k)), 2)
    fnkc = a.fixdiv((part(0, half - k), a.neg(part(1, half - k))), 2)
    fek, diff = a.add(fk, fnkc), a.sub(fk, fnkc)
    fok = a.cmul(diff, sr, si)
    low, high = a.add(fek, fok), a.sub(fek, fok)
    high = high[0], a.neg(high[1])
    z = tuple(_pair_slots(m, dc[j], low[j], high[j], None, half) for j in (0, 1))
    (re, im), pos = _kiss_fft(a, z, half, inverse=True)
    re, im = (m.op("Gather", v, m.c(pos), axis=-1) for v in (re, im))
    if not a.fixed:
        re, im = (a.op("Div", v, a.const(float(length))) for v in (re, im))
    _interleave(a, re, im, op.outputs[0], out)


def _interleave(a: _Arith, re: str, im: str, idx: int, shape: tuple) -> None:
    """(real, imaginary) pairs along the last axis, stored as the output tensor."""
    m = a.m
    both = m.op("Concat", *(m.op("Unsqueeze", v, m.c([-1])) for v in (re, im)), axis=-1)
    y = m.op("Reshape", both, m.c(list(shape)))
    if a.fixed:
        m.set_output(idx, y)
    else:
        m.b.set_output(idx, y)
