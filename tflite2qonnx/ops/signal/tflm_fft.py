"""SignalRfft on int16 (TFLM's kissfft v130, FIXED_POINT 16), emulated stage by stage.

kiss_fftr of length N packs the real input as N/2 complex values, runs kiss_fft on them
(decimation in time, radix-4 then radix-2 stages) and splits the result with "super
twiddles". In fixed point every butterfly first divides its inputs by the radix
(``sround(x * (32767 / p))``), every complex product rounds ``(a*b - c*d + 2^14) >> 15`` and
every store is an int16 (wrapping). Here each stage is one Gather of its butterflies'
operands (the recursion's data movement folded into index tables at conversion time) and the
same int64 arithmetic (``tflm_int``), so the output is bit exact. Only power-of-two lengths
(radix 4 and 2 stages) are emulated; other factors (kissfft's radix 3, 5 and generic
butterflies) and the int32 / float kernels are refused by name.
"""

from __future__ import annotations

import math

import numpy as np

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.signal.tflm_int import Int64, check_operand, int_option, options

_SAMP_MAX = 32767
_INT16 = 7  # tflite.TensorType.INT16, the 'T' option


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


def _cexp(phase: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """kf_cexp in fixed point: floor(0.5 + 32767 * cos / sin)."""
    cos = np.array([math.floor(0.5 + _SAMP_MAX * math.cos(p)) for p in phase], np.int64)
    sin = np.array([math.floor(0.5 + _SAMP_MAX * math.sin(p)) for p in phase], np.int64)
    return cos, sin


def _leaf_order(n: int, factors: list[tuple[int, int]]) -> np.ndarray:
    """Which input sample kf_work's leaves copy to each output slot."""
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


class _Fft:
    """The complex values of one kissfft buffer: real and imaginary int64 tensors whose
    physical order ``pos`` maps to kissfft's logical slots."""

    def __init__(self, m: Int64, n: int) -> None:
        self.m, self.n = m, n
        self.tw = _cexp([-2 * math.pi * i / n for i in range(n)])

    def fixdiv(self, v: str, p: int) -> str:
        return self.m.shr(self.m.mul(v, _SAMP_MAX // p), 15, 1 << 14)

    def cmul(self, ar: str, ai: str, br, bi) -> tuple[str, str]:
        m = self.m
        br, bi = m.c(br), m.c(bi)
        re = m.sub(m.mul(ar, br), m.mul(ai, bi))
        im = m.add(m.mul(ar, bi), m.mul(ai, br))
        return m.wrap(m.shr(re, 15, 1 << 14), 16), m.wrap(m.shr(im, 15, 1 << 14), 16)

    def stage(self, re: str, im: str, pos: np.ndarray, p: int, m_len: int):
        """One butterfly stage over every block: returns the new tensors and their order."""
        m, n = self.m, self.n
        fstride = n // (p * m_len)
        blocks = np.arange(0, n, p * m_len)[:, None]
        k = np.arange(m_len)[None, :]
        slots = [(blocks + k + q * m_len).ravel() for q in range(p)]
        kk = np.broadcast_to(k, (len(blocks), m_len)).ravel()
        a = []
        for q in range(p):
            phys = m.c(pos[slots[q]])
            a.append((self.fixdiv(m.op("Gather", re, phys, axis=-1), p),
                      self.fixdiv(m.op("Gather", im, phys, axis=-1), p)))  # fmt: skip
        tw = [(self.tw[0][q * kk * fstride], self.tw[1][q * kk * fstride]) for q in range(p)]
        w16 = lambda v: m.wrap(v, 16)  # noqa: E731

        def add(x, y):
            return w16(m.add(x[0], y[0])), w16(m.add(x[1], y[1]))

        def sub(x, y):
            return w16(m.sub(x[0], y[0])), w16(m.sub(x[1], y[1]))

        if p == 2:
            t = self.cmul(*a[1], *tw[1])
            outs = [add(a[0], t), sub(a[0], t)]
        else:
            s0, s1, s2 = (self.cmul(*a[q], *tw[q]) for q in (1, 2, 3))
            s5, f0 = sub(a[0], s1), add(a[0], s1)
            s3, s4 = add(s0, s2), sub(s0, s2)
            outs = [
                add(f0, s3),
                (w16(m.add(s5[0], s4[1])), w16(m.sub(s5[1], s4[0]))),
                sub(f0, s3),
                (w16(m.sub(s5[0], s4[1])), w16(m.add(s5[1], s4[0]))),
            ]
        re = m.op("Concat", *[o[0] for o in outs], axis=-1)
        im = m.op("Concat", *[o[1] for o in outs], axis=-1)
        new_pos = np.empty(n, np.int64)
        new_pos[np.concatenate(slots)] = np.arange(n)
        return re, im, new_pos


def rfft(b: GraphBuilder, op: Operator) -> None:
    """int16 [..., L] (zero-padded to fft_length) -> int16 [..., fft_length + 2]: the
    fft_length / 2 + 1 complex outputs as (real, imaginary) pairs, kissfft's scaling kept
    (the output is the DFT divided by fft_length)."""
    opts = options(op)
    length = int_option(opts, "fft_length", op, 2, 1 << 16)
    kind = opts.get("T")
    if kind != _INT16:
        raise ConversionError(
            f"SignalRfft with T={kind!r}: only the int16 (kissfft fixed-point) kernel is "
            "emulated; the float and int32 kernels are not supported",
            op.where,
        )
    half = length // 2
    factors = _factors(half) if length % 2 == 0 and half >= 2 else [(length, 1)]
    if length % 2 or any(p not in (2, 4) for p, _ in factors):
        raise ConversionError(
            f"SignalRfft: fft_length {length} is not a power of two >= 4; kissfft's radix "
            f"3 / 5 / generic butterflies ({[p for p, _ in factors]}) are not emulated",
            op.where,
        )
    shape = check_operand(b, op.inputs[0], "int16", None, op, "the input")
    out_shape = check_operand(b, op.outputs[0], "int16", len(shape), op, "the output")
    if shape[-1] > length or out_shape != (*shape[:-1], length + 2):
        raise ConversionError(
            f"SignalRfft: input {list(shape)} and output {list(out_shape)} do not fit "
            f"fft_length {length} (input rows of at most {length}, outputs of {length + 2})",
            op.where,
        )
    m = Int64(b)
    x = m.cast_in(op.inputs[0])
    if shape[-1] < length:
        pads = [0] * len(shape) + [0] * (len(shape) - 1) + [length - shape[-1]]
        x = m.op("Pad", x, m.c(pads))
    order = _leaf_order(half, factors)
    fft = _Fft(m, half)
    # the packed complex input z[j] = x[2j] + i x[2j+1], read straight in leaf order
    re = m.op("Gather", x, m.c(2 * order), axis=-1)
    im = m.op("Gather", x, m.c(2 * order + 1), axis=-1)
    pos = np.arange(half)
    for p, m_len in reversed(factors):
        re, im, pos = fft.stage(re, im, pos, p, m_len)
    _split(m, re, im, pos, half, op, b)


def _split(m: Int64, re: str, im: str, pos: np.ndarray, half: int, op, b) -> None:
    """kiss_fftr's last step: the packed spectrum's halves recombined with super twiddles."""
    fft = _Fft(m, half)
    k = np.arange(1, half // 2 + 1)
    sr, si = _cexp([-math.pi * ((i + 1) / half + 0.5) for i in range(half // 2)])

    def take(v: str, slots) -> str:
        return m.op("Gather", v, m.c(pos[np.asarray(slots)]), axis=-1)

    def w16(v: str) -> str:
        return m.wrap(v, 16)

    dc_r, dc_i = fft.fixdiv(take(re, [0]), 2), fft.fixdiv(take(im, [0]), 2)
    first, last = w16(m.add(dc_r, dc_i)), w16(m.sub(dc_r, dc_i))
    pk = fft.fixdiv(take(re, k), 2), fft.fixdiv(take(im, k), 2)
    pnk = fft.fixdiv(take(re, half - k), 2), fft.fixdiv(w16(m.sub(m.c(0), take(im, half - k))), 2)
    f1 = w16(m.add(pk[0], pnk[0])), w16(m.add(pk[1], pnk[1]))
    f2 = w16(m.sub(pk[0], pnk[0])), w16(m.sub(pk[1], pnk[1]))
    tw = fft.cmul(*f2, sr, si)
    low = m.shr(m.add(f1[0], tw[0]), 1), m.shr(m.add(f1[1], tw[1]), 1)  # slots k
    high = m.shr(m.sub(f1[0], tw[0]), 1), m.shr(m.sub(tw[1], f1[1]), 1)  # slots half - k
    # slot half / 2 is written twice, the 'high' value last
    n_low = half // 2 - 1
    rev = m.c(np.arange(half // 2 - 1, -1, -1))
    zero = m.mul(first, 0)
    parts = []
    for j, end in ((0, first), (1, zero)):
        body_low = m.op("Slice", low[j], m.c([0]), m.c([n_low]), m.c([-1]))
        body_high = m.op("Gather", high[j], rev, axis=-1)
        tail = last if j == 0 else zero
        parts.append(m.op("Concat", end, body_low, body_high, tail, axis=-1))
    both = m.op("Concat", m.op("Unsqueeze", parts[0], m.c([-1])),
                m.op("Unsqueeze", parts[1], m.c([-1])), axis=-1)  # fmt: skip
    shape = b.tensor(op.outputs[0]).shape
    m.set_output(op.outputs[0], m.op("Reshape", both, m.c(list(shape))))
