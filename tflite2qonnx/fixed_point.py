"""Bit-exact emulation of TFLite's builtin integer kernels (``convert(..., bit_exact=True)``).

The default graph puts one Quant (round half away from zero) after each float op, so a
convolution rounds once, as XNNPACK does. The builtin reference kernels instead requantize an
int32 accumulator with gemmlowp's fixed point ``MultiplyByQuantizedMultiplier``:

    t = SaturatingRoundingDoublingHighMul(acc << left, M0)   # round half toward +inf, at 2^-31
    k = RoundingDivideByPOT(t, right)                        # round half away from zero

with ``(M0, shift) = QuantizeMultiplier(real multiplier)``. Rounding twice moves about one
output in a few hundred by a step, and on deep networks those steps compound chaotically, so
only the exact arithmetic agrees with the builtin kernels end to end.

How it is reproduced with ONNX ops and qonnx Quant nodes, exactly:

* Integers are carried in float tensors. An activation's ``q - zero_point`` comes from
  ``Quant(Div(x, scale), scale=1, zero_point)`` (x is already on its grid, so this is exact).
* Accumulators: Conv / MatMul on integer-valued float32 tensors are exact while every partial
  sum stays below 2^24; when the worst case over the weights could not, the weights are split
  into two 4-bit halves (two Convs, recombined in float64).
* The fixed-point multiply happens in float64: ``acc * M0 * 2^(left - 31)`` is exact while the
  integer product has at most 53 bits; ``Floor(v + 1/2)`` is then SaturatingRoundingDoubling-
  HighMul's rounding. Where the product could be wider and the result not saturate (ADD's
  output stage), M0 is split in 15 + 16 bits and the fraction carried separately.
* ``Quant(t, scale=2^right, zero_point=0, 32 bits, HALF_UP)`` is RoundingDivideByPOT: qonnx
  divides by a power of two (exact) and rounds half away from zero; its output
  ``2^right * k`` is exact in float32 for every k that does not saturate the int8 output.
  qonnx's executor hands every Quant output on as float32, which is why the steps that need
  more than 24 bits (the accumulator, t) use plain float64 ONNX ops instead.
* ``Mul(k, s_out)`` then feeds the existing fused activation and output Quant, which now only
  add the zero point and clamp.

Which kernel variant runs (and how its multipliers are derived) follows TFLite's reference
kernels for int8 and uint8 (int8 FULLY_CONNECTED rounds once, with the whole 31-bit multiplier)
and for the 16x8 kernels the records mark (``ops.exact.int16``, ``ops.exact.softmax16``,
which run by default too, and ADD / SUB / MUL); a covered op it cannot make exact (other
int16 kernels; a uint8 MEAN over H and W, an int8 / uint8 MEAN with equal input and output grids,
weight zero points per channel) raises ConversionError rather than silently rounding once.
Integer ops not covered convert as by default and the conversion warns; float ops and float
models are untouched.

This module is the arithmetic and the graph pieces; the kernels that use them are operator code
(``tflite2qonnx.ops.exact.int8``: convolutions (TRANSPOSE_CONV too), FULLY_CONNECTED, BATCH_MATMUL,
ADD / SUB, MUL, PRELU, SQUARED_DIFFERENCE, MEAN, AVERAGE_POOL_2D; ``ops.exact.softmax``;
``ops.exact.resize``; ``ops.exact.concat``; ``ops.exact.reduce``: SUM, REDUCE_PROD;
``ops.exact.log_softmax``; ``ops.exact.l2norm``; ``ops.exact.compare``: comparisons, DIV, NEG;
``ops.exact.unary`` with ``ops.exact.int8_tables`` and ``ops.exact.int8_math_tables``: the one-input
kernels as lookup tables); how --bit-exact and int16 treat each operator is in its record,
read by ``tflite2qonnx.ops.dispatch``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.dtypes import INT8_TYPES
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import ScaleRangeError

_F32_TINY = float(np.finfo(np.float32).tiny)  # the smallest normal float32
EXACT_F32 = 2.0**24  # integers below this are exact in float32 (and in its sums)
_EXACT_F64 = 2.0**53
_WEIGHT_SPLIT_BITS = 4  # weights = hi * 16 + lo when one float32 Conv could be inexact
# the activations whose integer kernels are emulated: int8 / uint8, and int16 of 16x8 models
ACTIVATION_TYPES = {**INT8_TYPES, "int16": (16, True)}


# ---------------------------------------------------------------------- TFLite's arithmetic
def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier: ``real ~= M0 * 2^(shift - 31)``, M0 in [2^30, 2^31).

    frexp's fraction is rounded half away from zero (TfLiteRound) to 31 bits; a fraction that
    rounds up to 2^31 is halved; shifts below -31 give zero, above 30 saturate. Zero is a real
    multiplier (LEAKY_RELU with alpha 0); an infinite, NaN or denormal one comes from scales out
    of range (a corrupt file).
    """
    real = float(real)
    if not np.isfinite(real) or 0.0 < abs(real) < _F32_TINY:
        raise ScaleRangeError(
            f"requantization multiplier {real!r} (from its tensors' scales) is not a finite, "
            "normal number"
        )
    if real == 0.0:
        return 0, 0
    fraction, shift = np.frexp(float(real))
    q = float(fraction) * float(1 << 31)
    q_fixed = int(np.sign(q) * np.floor(abs(q) + 0.5))
    if q_fixed == 1 << 31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    if shift > 30:
        return (1 << 31) - 1, 30
    return q_fixed, int(shift)


def conv_multipliers(
    s_in: float, s_w: np.ndarray, s_out: float, per_tensor_float_product: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(M0, shift) per output channel as the conv / fully-connected kernels derive them.

    Per-channel (int8) weights: ``double(s_in) * double(s_w[c]) / double(s_out)``. Per-tensor
    uint8 convs and per-tensor fully-connected layers go through
    GetQuantizedConvolutionMultipler, which multiplies the two scales in float32 first.
    """
    m0, shift = [], []
    for sw in np.asarray(s_w, np.float32).reshape(-1):
        if per_tensor_float_product:
            real = float(np.float32(s_in) * np.float32(sw)) / float(np.float32(s_out))
        else:
            real = float(np.float32(s_in)) * float(sw) / float(np.float32(s_out))
        a, b = quantize_multiplier(real)
        m0.append(a)
        shift.append(b)
    return np.array(m0, np.int64), np.array(shift, np.int64)


# ---------------------------------------------------------------------- graph pieces
@dataclass(frozen=True)
class Grid:
    """A quantized tensor's per-tensor grid: float32 scale, zero point, storage width."""

    scale: float
    zero_point: int
    bits: int
    signed: bool

    @property
    def max_abs_offset(self) -> int:
        """max |q - zero_point| over the storage range."""
        lo = -(1 << (self.bits - 1)) if self.signed else 0
        hi = lo + (1 << self.bits) - 1
        return max(abs(lo - self.zero_point), abs(hi - self.zero_point))


def is_int16(b: GraphBuilder, idx: int) -> bool:
    return b.tensor(idx).dtype == "int16"


def grid(b: GraphBuilder, idx: int, where: str) -> Grid:
    t = b.tensor(idx)
    q = t.quantization
    if t.dtype not in ACTIVATION_TYPES or q is None:
        raise ConversionError(
            f"bit_exact: tensor '{t.name}' is {t.dtype}, expected int8, uint8 or int16", where
        )
    if len(q.scale) != 1:
        raise ConversionError(f"bit_exact: activation '{t.name}' is quantized per axis", where)
    bits, signed = ACTIVATION_TYPES[t.dtype]
    if bits == 16 and int(q.zero_point[0]) != 0:  # 16x8 kernels assume it (and check it)
        raise ConversionError(f"bit_exact: int16 tensor '{t.name}' has a zero point", where)
    return Grid(float(np.float32(q.scale[0])), int(q.zero_point[0]), bits, signed)


def offsets(b: GraphBuilder, idx: int, where: str) -> str:
    """``q - zero_point`` of tensor ``idx`` as an integer-valued float32 value."""
    g = grid(b, idx, where)
    t = b.tensor(idx)
    if t.data is not None:
        data = np.asarray(t.data, np.float64) - g.zero_point
        return b.const(data.astype(np.float32), f"{b.tensor_name(idx)}_int")
    x = b.emit("Div", [b.input(idx), b.const(np.array(g.scale, np.float32), "scale")])[0]
    hint = f"{b.tensor_name(idx)}_int"
    return b.quant(
        x, hint, t.shape, scale=1.0, zero_point=g.zero_point, bit_width=g.bits, signed=g.signed
    )


def raw_integers(b: GraphBuilder, idx: int, where: str) -> tuple[str, Grid]:
    """Tensor ``idx``'s stored integers q (not minus the zero point), float32."""
    g = grid(b, idx, where)
    x = b.emit("Div", [b.input(idx), b.const(np.array(g.scale, np.float32), "scale")])[0]
    if g.zero_point:
        x = b.emit("Add", [x, b.const(np.array(g.zero_point, np.float32), "zero_point")])[0]
    hint = f"{b.tensor_name(idx)}_raw"
    return b.quant(x, hint, b.tensor(idx).shape, scale=1.0, bit_width=g.bits, signed=g.signed), g


def f64(b: GraphBuilder, value: np.ndarray | float, hint: str) -> str:
    return b.const(np.asarray(value, np.float64), hint)


def cast(b: GraphBuilder, x: str, to: int) -> str:
    return b.emit("Cast", [x], to=to)[0]


def integer_weights(b: GraphBuilder, idx: int, perm, where: str) -> tuple[np.ndarray, int]:
    """A constant weight tensor's ``w - zero_point`` (permuted) and its storage bits."""
    t = b.tensor(idx)
    q = t.quantization
    if t.data is None or q is None or t.dtype not in INT8_TYPES:
        raise ConversionError(
            f"bit_exact: weights '{t.name}' must be a constant int8 / uint8 tensor", where
        )
    zps = np.asarray(q.zero_point).reshape(-1)
    if np.any(zps != zps[0]):
        raise ConversionError(f"bit_exact: weights '{t.name}' have per-channel zero points", where)
    w = np.asarray(t.data, np.float64) - float(zps[0])
    if perm is not None:
        w = np.ascontiguousarray(w.transpose(perm))
    return w, int(zps[0])


def _weight_quant(b: GraphBuilder, w: np.ndarray, idx: int, zero_point: int, hint: str) -> str:
    """Integer weights annotated with their storage range by a scale-1 Quant."""
    bits, signed = INT8_TYPES[b.tensor(idx).dtype]
    raw = b.const(w.astype(np.float32), f"{hint}_int")
    return b.quant(
        raw, hint, w.shape, scale=1.0, zero_point=zero_point, bit_width=bits, signed=signed
    )


def integer_product(
    b: GraphBuilder,
    op_type: str,
    x: str,
    w: np.ndarray,
    w_idx: int,
    w_zero_point: int,
    out_axis: int,
    x_max: int,
    where: str,
    **attrs,
) -> tuple[str, np.ndarray]:
    """Exact ``op_type(x, w)`` (Conv or MatMul on integers) as a float64 value.

    Returns the value and the worst-case |result| per output channel (``out_axis`` of ``w``).
    One float32 node is exact while every partial sum is below 2^24; otherwise ``w`` is split
    as ``hi * 16 + lo`` (each half within [-8, 8]), and the two products meet in float64.
    """
    moved = np.moveaxis(np.abs(w), out_axis, 0).reshape(w.shape[out_axis], -1)
    bound = moved.sum(axis=1) * float(x_max)
    if bound.max() < EXACT_F32:
        y = b.emit(op_type, [x, _weight_quant(b, w, w_idx, w_zero_point, "w")], **attrs)[0]
        return cast(b, y, TensorProto.DOUBLE), bound
    step = float(1 << _WEIGHT_SPLIT_BITS)
    hi = np.round(w / step)
    lo = w - hi * step
    for part in (hi, lo):
        part_bound = np.moveaxis(np.abs(part), out_axis, 0).reshape(w.shape[out_axis], -1)
        if (part_bound.sum(axis=1) * float(x_max)).max() >= EXACT_F32:
            raise ConversionError(
                f"bit_exact: {op_type} reduces over too many terms for exact float32 sums", where
            )
    parts = []
    for part, hint in ((hi, "w_hi"), (lo, "w_lo")):
        name = b.const(part.astype(np.float32), hint)
        parts.append(cast(b, b.emit(op_type, [x, name], **attrs)[0], TensorProto.DOUBLE))
    y = b.emit("Mul", [parts[0], f64(b, step, "w_split")])[0]
    return b.emit("Add", [y, parts[1]])[0], bound


def requantize(
    b: GraphBuilder,
    acc: str,
    m0: np.ndarray,
    shift: np.ndarray,
    bound: np.ndarray | float,
    s_out: float,
    where: str,
    out_bits: int = 8,
) -> str:
    """``s_out * MultiplyByQuantizedMultiplier(acc, M0, shift)`` as a float32 value.

    ``acc`` is a float64 value holding integers (|acc| <= ``bound``, per channel or scalar);
    ``m0`` / ``shift`` are scalars or one per channel along the value's last axis;
    ``out_bits``: the output's storage width (16 for int16 outputs).
    """
    m0 = np.asarray(m0, np.int64)
    shift = np.asarray(shift, np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    bound = np.broadcast_to(np.asarray(bound, np.float64), m0.shape)
    if np.any((bound * 2.0**left >= 2.0**31) & (left > 0)):
        acc, bound = _wrapped_left_shift(b, acc, left, bound, where)
        left = np.zeros_like(left)
    # A float64 product is exact below 2^53; where it could be wider, |v| >= 2^(22 + left), so
    # an output that does not saturate int8 needs right - left > 12 (int16: > 4, which keeps
    # the same margin).
    simple = (bound * m0 * 2.0**left < _EXACT_F64) | (right - left <= 20 - out_bits)
    if np.all(simple):
        v = b.emit("Mul", [acc, f64(b, m0 * 2.0 ** (left - 31), "multiplier")])[0]
        t = b.emit("Floor", [b.emit("Add", [v, f64(b, 0.5, "half")])[0]])[0]
    else:  # M0 = hi * 2^16 + lo: both products exact, the fraction of the first carried
        hi, lo = m0 >> 16, m0 & 0xFFFF
        a = b.emit("Mul", [acc, f64(b, hi * 2.0 ** (left - 15), "multiplier_hi")])[0]
        a_int = b.emit("Floor", [a])[0]
        a_frac = b.emit("Sub", [a, a_int])[0]
        c = b.emit("Mul", [acc, f64(b, lo * 2.0 ** (left - 31), "multiplier_lo")])[0]
        c = b.emit("Add", [b.emit("Add", [a_frac, c])[0], f64(b, 0.5, "half")])[0]
        t = b.emit("Add", [a_int, b.emit("Floor", [c])[0]])[0]
    pot = 2.0**right
    scaled = b.quant(
        t, "divide_by_pot", None, scale=pot, bit_width=32, signed=True, rounding_mode="HALF_UP"
    )
    k = cast(b, scaled, TensorProto.FLOAT)
    out_scale = (np.float32(s_out) * (1.0 / pot)).astype(np.float32)
    return b.emit("Mul", [k, b.const(out_scale, "output_scale")])[0]


def _wrapped_left_shift(
    b: GraphBuilder, acc: str, left: np.ndarray, bound: np.ndarray, where: str
) -> tuple[str, np.ndarray]:
    """``x * (1 << left_shift)`` as the kernels' int32 arithmetic computes it where it can
    overflow: wrapped to int32 (two's complement, what x86-64 and ARM builds of
    MultiplyByQuantizedMultiplier return). A multiplier above 1 on a near-constant output
    (OSNet's channels with a 7.8e-9 output scale) reaches it. The shifted value and its wrap
    are exact float64 while ``bound * 2^left`` stays below 2^53."""
    if np.any(bound * 2.0**left >= _EXACT_F64):
        raise ConversionError(
            "bit_exact: the multiplier's left shift overflows int32 beyond float64's exact "
            "integers",
            where,
        )
    shifted = b.emit("Mul", [acc, f64(b, 2.0**left, "left_shift")])[0]
    return wrap_int32(b, shifted), np.minimum(bound * 2.0**left, 2.0**31)


def wrap_int32(b: GraphBuilder, v: str) -> str:
    """A float64 integer value wrapped to int32 (two's complement), exactly below 2^53."""
    up = b.emit("Add", [v, f64(b, 2.0**31, "int32_half")])[0]
    turns = b.emit("Floor", [b.emit("Mul", [up, f64(b, 2.0**-32, "int32_turn")])[0]])[0]
    return b.emit("Sub", [v, b.emit("Mul", [turns, f64(b, 2.0**32, "int32_span")])[0]])[0]


def requantize_single_rounding(
    b: GraphBuilder,
    acc: str,
    m0: np.ndarray,
    shift: np.ndarray,
    s_out: float,
    full_multiplier: bool = False,
    where: str = "",
) -> str:
    """``s_out * MultiplyByQuantizedMultiplier(acc, M0, shift)`` with one rounding half toward
    +inf. The 64-bit overload (int64 accumulators, the 16x8 kernels) first rounds M0 to 16
    bits and rounds at ``2^(15 - shift)``; ``full_multiplier``: the int32 overload as the
    interpreter's int8 FULLY_CONNECTED runs it (TFLITE_SINGLE_ROUNDING), the whole M0 and one
    rounding at ``2^(31 - shift)``.

    acc * M0_16 has at most 47 bits, so that float64 product is exact; the full M0 is split
    as ``hi * 2^16 + lo``, the fraction of the first product carried into the second (exact
    while the rounding point is at most 2^52). The rounded result is small enough (or
    saturates) for the FLOOR Quant's float32 output.
    """
    m0 = np.asarray(m0, np.int64)
    if not full_multiplier:
        reduced = np.where(m0 < 0x7FFF0000, (m0 + (1 << 15)) >> 16, 0x7FFF)
        total_shift = 15 - np.asarray(shift, np.int64)
        v = b.emit("Mul", [acc, f64(b, reduced * 2.0**-total_shift, "multiplier")])[0]
        v = b.emit("Add", [v, f64(b, 0.5, "half")])[0]
    else:
        total_shift = 31 - np.asarray(shift, np.int64)
        if np.any(total_shift > 52):
            raise ConversionError("bit_exact: a multiplier below 2^-21 is not emulated", where)
        hi, lo = m0 >> 16, m0 & 0xFFFF
        a = b.emit("Mul", [acc, f64(b, hi * 2.0 ** (16 - total_shift), "multiplier_hi")])[0]
        a_int = b.emit("Floor", [a])[0]
        c = b.emit("Mul", [acc, f64(b, lo * 2.0**-total_shift, "multiplier_lo")])[0]
        c = b.emit("Add", [b.emit("Sub", [a, a_int])[0], c])[0]
        c = b.emit("Floor", [b.emit("Add", [c, f64(b, 0.5, "half")])[0]])[0]
        v = b.emit("Add", [a_int, c])[0]
    k = b.quant(v, "rounded", None, scale=1.0, bit_width=32, signed=True, rounding_mode="FLOOR")
    return b.emit("Mul", [k, b.const(np.array(s_out, np.float32), "output_scale")])[0]


def rounding_divide_by_pot(b: GraphBuilder, t: str, right: int) -> str:
    """RoundingDivideByPOT in float64 standard ops (a result wider than 24 bits must not
    pass through a Quant, whose output qonnx stores as float32)."""
    if right == 0:
        return t
    u = b.emit("Mul", [t, f64(b, 2.0**-right, "pot")])[0]
    mag = b.emit("Floor", [b.emit("Add", [b.emit("Abs", [u])[0], f64(b, 0.5, "half")])[0]])[0]
    return b.emit("Mul", [b.emit("Sign", [u])[0], mag])[0]
