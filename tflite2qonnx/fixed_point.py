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
kernels for int8 and uint8 (per-channel FULLY_CONNECTED uses the 64-bit, single-rounding
multiply); a covered op it cannot make exact (int16 activations, a uint8 MEAN over H and W,
MEAN with equal input and output grids, weight zero points per channel) raises
ConversionError rather than silently rounding once. Ops not covered here (SUB, MUL,
SOFTMAX, ...) convert as by default; float ops and float models are untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.padding import spatial_attrs
from tflite2qonnx.ops.reduce import reduce_axes
from tflite2qonnx.reader import Operator

_EXACT_F32 = 2.0**24  # integers below this are exact in float32 (and in its sums)
_EXACT_F64 = 2.0**53
_WEIGHT_SPLIT_BITS = 4  # weights = hi * 16 + lo when one float32 Conv could be inexact
_INT8_TYPES = {"int8": (8, True), "uint8": (8, False)}


# Integer ops emulated here, and those whose int8 kernels only copy, compare or clamp the
# integers (GraphBuilder.reinterpret), which the default graph already reproduces exactly.
EMULATED = frozenset(
    {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "MEAN", "AVERAGE_POOL_2D"}
)
EXACT_AS_CONVERTED = frozenset(
    {
        "BROADCAST_TO", "CONCATENATION", "DEPTH_TO_SPACE", "DEQUANTIZE", "EXPAND_DIMS",
        "GATHER", "GATHER_ND", "MAX_POOL_2D", "MAXIMUM", "MINIMUM", "MIRROR_PAD", "PACK",
        "PAD", "PADV2", "REDUCE_MAX", "REDUCE_MIN", "RESHAPE", "RESIZE_NEAREST_NEIGHBOR",
        "REVERSE_V2", "SELECT", "SELECT_V2", "SLICE", "SPACE_TO_DEPTH", "SPLIT", "SPLIT_V",
        "SQUEEZE", "STRIDED_SLICE", "TILE", "TRANSPOSE", "UNPACK",
    }
)  # fmt: skip
_CLAMPS = frozenset({"RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1"})  # exact on one grid


def rounded_once(b: GraphBuilder, operators) -> list[str]:
    """Names of the integer operators bit_exact leaves to the default single rounding."""
    names = []
    for op in operators:
        t = b.tensor(op.inputs[0]) if op.inputs and op.inputs[0] >= 0 else None
        if t is None or t.quantization is None or t.dtype in ("float32", "float16"):
            continue
        if op.name in EMULATED or op.name in EXACT_AS_CONVERTED:
            continue
        out = b.tensor(op.outputs[0]).quantization if op.outputs else None
        same_grid = out is not None and (list(out.scale), list(out.zero_point)) == (
            list(t.quantization.scale),
            list(t.quantization.zero_point),
        )
        if op.name in _CLAMPS and same_grid:
            continue
        names.append(op.name)
    return names


# ---------------------------------------------------------------------- TFLite's arithmetic
def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier: ``real ~= M0 * 2^(shift - 31)``, M0 in [2^30, 2^31).

    frexp's fraction is rounded half away from zero (TfLiteRound) to 31 bits; a fraction that
    rounds up to 2^31 is halved; shifts below -31 give zero, above 30 saturate.
    """
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


def is_integer_op(b: GraphBuilder, op: Operator) -> bool:
    """Whether ``op`` runs an integer kernel: its first input is a quantized activation.

    Under bit_exact an int16 (or other non-8-bit) quantized activation is refused: its kernels
    use 64-bit accumulators and other multipliers, which this module does not emulate.
    """
    t = b.tensor(op.inputs[0])
    if t.quantization is None or t.dtype in ("float32", "float16"):
        return False
    if t.dtype not in _INT8_TYPES:
        raise ConversionError(
            f"bit_exact: {t.dtype} activations are not emulated (int8 and uint8 only)", op.where
        )
    return True


def grid(b: GraphBuilder, idx: int, where: str) -> Grid:
    t = b.tensor(idx)
    q = t.quantization
    if t.dtype not in _INT8_TYPES or q is None:
        raise ConversionError(
            f"bit_exact: tensor '{t.name}' is {t.dtype}, expected int8 or uint8", where
        )
    if len(q.scale) != 1:
        raise ConversionError(f"bit_exact: activation '{t.name}' is quantized per axis", where)
    bits, signed = _INT8_TYPES[t.dtype]
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


def _f64(b: GraphBuilder, value: np.ndarray | float, hint: str) -> str:
    return b.const(np.asarray(value, np.float64), hint)


def _cast(b: GraphBuilder, x: str, to: int) -> str:
    return b.emit("Cast", [x], to=to)[0]


def integer_weights(b: GraphBuilder, idx: int, perm, where: str) -> tuple[np.ndarray, int]:
    """A constant weight tensor's ``w - zero_point`` (permuted) and its storage bits."""
    t = b.tensor(idx)
    q = t.quantization
    if t.data is None or q is None or t.dtype not in _INT8_TYPES:
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
    bits, signed = _INT8_TYPES[b.tensor(idx).dtype]
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
    if bound.max() < _EXACT_F32:
        y = b.emit(op_type, [x, _weight_quant(b, w, w_idx, w_zero_point, "w")], **attrs)[0]
        return _cast(b, y, TensorProto.DOUBLE), bound
    step = float(1 << _WEIGHT_SPLIT_BITS)
    hi = np.round(w / step)
    lo = w - hi * step
    for part in (hi, lo):
        part_bound = np.moveaxis(np.abs(part), out_axis, 0).reshape(w.shape[out_axis], -1)
        if (part_bound.sum(axis=1) * float(x_max)).max() >= _EXACT_F32:
            raise ConversionError(
                f"bit_exact: {op_type} reduces over too many terms for exact float32 sums", where
            )
    parts = []
    for part, hint in ((hi, "w_hi"), (lo, "w_lo")):
        name = b.const(part.astype(np.float32), hint)
        parts.append(_cast(b, b.emit(op_type, [x, name], **attrs)[0], TensorProto.DOUBLE))
    y = b.emit("Mul", [parts[0], _f64(b, step, "w_split")])[0]
    return b.emit("Add", [y, parts[1]])[0], bound


def requantize(
    b: GraphBuilder,
    acc: str,
    m0: np.ndarray,
    shift: np.ndarray,
    bound: np.ndarray | float,
    s_out: float,
    where: str,
) -> str:
    """``s_out * MultiplyByQuantizedMultiplier(acc, M0, shift)`` as a float32 value.

    ``acc`` is a float64 value holding integers (|acc| <= ``bound``, per channel or scalar);
    ``m0`` / ``shift`` are scalars or one per channel along the value's last axis.
    """
    m0 = np.asarray(m0, np.int64)
    shift = np.asarray(shift, np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    bound = np.broadcast_to(np.asarray(bound, np.float64), m0.shape)
    if np.any((bound * 2.0**left >= 2.0**31) & (left > 0)):
        raise ConversionError(
            "bit_exact: the multiplier's left shift could overflow the int32 accumulator", where
        )
    # A float64 product is exact below 2^53; where it could be wider, |v| >= 2^(22 + left), so
    # an output that does not saturate int8 needs right - left > 12.
    simple = (bound * m0 * 2.0**left < _EXACT_F64) | (right - left <= 12)
    if np.all(simple):
        v = b.emit("Mul", [acc, _f64(b, m0 * 2.0 ** (left - 31), "multiplier")])[0]
        t = b.emit("Floor", [b.emit("Add", [v, _f64(b, 0.5, "half")])[0]])[0]
    else:  # M0 = hi * 2^16 + lo: both products exact, the fraction of the first carried
        hi, lo = m0 >> 16, m0 & 0xFFFF
        a = b.emit("Mul", [acc, _f64(b, hi * 2.0 ** (left - 15), "multiplier_hi")])[0]
        a_int = b.emit("Floor", [a])[0]
        a_frac = b.emit("Sub", [a, a_int])[0]
        c = b.emit("Mul", [acc, _f64(b, lo * 2.0 ** (left - 31), "multiplier_lo")])[0]
        c = b.emit("Add", [b.emit("Add", [a_frac, c])[0], _f64(b, 0.5, "half")])[0]
        t = b.emit("Add", [a_int, b.emit("Floor", [c])[0]])[0]
    pot = 2.0**right
    scaled = b.quant(
        t, "divide_by_pot", None, scale=pot, bit_width=32, signed=True, rounding_mode="HALF_UP"
    )
    k = _cast(b, scaled, TensorProto.FLOAT)
    out_scale = (np.float32(s_out) * (1.0 / pot)).astype(np.float32)
    return b.emit("Mul", [k, b.const(out_scale, "output_scale")])[0]


def requantize_single_rounding(
    b: GraphBuilder, acc: str, m0: np.ndarray, shift: np.ndarray, s_out: float
) -> str:
    """``s_out * MultiplyByQuantizedMultiplier(int64 acc, M0, shift)``, the 64-bit overload:
    M0 rounded to 16 bits, then one rounding half toward +inf at ``2^(15 - shift)``.

    acc * M0_16 has at most 47 bits, so the float64 product is exact; the rounded result is
    small enough (or saturates) for the FLOOR Quant's float32 output.
    """
    m0 = np.asarray(m0, np.int64)
    reduced = np.where(m0 < 0x7FFF0000, (m0 + (1 << 15)) >> 16, 0x7FFF)
    total_shift = 15 - np.asarray(shift, np.int64)
    v = b.emit("Mul", [acc, _f64(b, reduced * 2.0**-total_shift, "multiplier")])[0]
    v = b.emit("Add", [v, _f64(b, 0.5, "half")])[0]
    k = b.quant(v, "rounded", None, scale=1.0, bit_width=32, signed=True, rounding_mode="FLOOR")
    return b.emit("Mul", [k, b.const(np.array(s_out, np.float32), "output_scale")])[0]


def _rounding_divide_by_pot(b: GraphBuilder, t: str, right: int) -> str:
    """RoundingDivideByPOT in float64 standard ops (a result wider than 24 bits must not
    pass through a Quant, whose output qonnx stores as float32)."""
    if right == 0:
        return t
    u = b.emit("Mul", [t, _f64(b, 2.0**-right, "pot")])[0]
    mag = b.emit("Floor", [b.emit("Add", [b.emit("Abs", [u])[0], _f64(b, 0.5, "half")])[0]])[0]
    return b.emit("Mul", [b.emit("Sign", [u])[0], mag])[0]


# ---------------------------------------------------------------------- the kernels
def conv(b: GraphBuilder, op: Operator, perm, kernel, groups: int) -> None:
    """CONV_2D / DEPTHWISE_CONV_2D as the reference integer kernels compute them."""
    where = op.where
    g_in, g_out = grid(b, op.inputs[0], where), grid(b, op.outputs[0], where)
    w, w_zp = integer_weights(b, op.inputs[1], perm, where)
    x = offsets(b, op.inputs[0], where)
    attrs = spatial_attrs(b, op, kernel)
    acc, bound = integer_product(
        b,
        "Conv",
        x,
        w,
        op.inputs[1],
        w_zp,
        0,
        g_in.max_abs_offset,
        where,
        group=groups,
        kernel_shape=list(kernel),
        **attrs,
    )
    s_w = b.tensor(op.inputs[1]).quantization.scale
    per_tensor = len(s_w) == 1
    m0, shift = conv_multipliers(
        g_in.scale, s_w, g_out.scale, per_tensor and b.tensor(op.inputs[0]).dtype == "uint8"
    )
    _finish_accumulator(b, op, acc, bound, m0, shift, w.shape[0], g_out, where, bias_slot=2)


def fully_connected(b: GraphBuilder, op: Operator, x_reshaped) -> None:
    """FULLY_CONNECTED; ``x_reshaped(x)`` applies the converter's input reshape."""
    where = op.where
    g_in, g_out = grid(b, op.inputs[0], where), grid(b, op.outputs[0], where)
    w, w_zp = integer_weights(b, op.inputs[1], (1, 0), where)
    x = x_reshaped(offsets(b, op.inputs[0], where))
    acc, bound = integer_product(
        b, "MatMul", x, w, op.inputs[1], w_zp, 1, g_in.max_abs_offset, where
    )
    s_w = b.tensor(op.inputs[1]).quantization.scale
    m0, shift = conv_multipliers(g_in.scale, s_w, g_out.scale, len(s_w) == 1)
    # per-channel weights: FullyConnectedPerChannel requantizes with the 64-bit
    # MultiplyByQuantizedMultiplier (one rounding, multiplier rounded to 16 bits)
    single = len(s_w) > 1
    _finish_accumulator(
        b, op, acc, bound, m0, shift, w.shape[1], g_out, where, bias_slot=2, single=single
    )


def _finish_accumulator(
    b, op, acc, bound, m0, shift, channels, g_out, where, bias_slot, single=False
):
    bias_idx = op.inputs[bias_slot] if len(op.inputs) > bias_slot else -1
    if bias_idx >= 0:
        t = b.tensor(bias_idx)
        if t.data is None or t.dtype != "int32":
            raise ConversionError(f"bit_exact: bias '{t.name}' must be a constant int32", where)
        bias = np.broadcast_to(np.asarray(t.data, np.float64).reshape(-1), (channels,))
        acc = b.emit("Add", [acc, _f64(b, bias, "bias")])[0]
        bound = bound + np.abs(bias)
    if m0.size == 1:
        m0, shift, bound = m0[0], shift[0], np.max(bound)
    if single:
        y = requantize_single_rounding(b, acc, m0, shift, g_out.scale)
    else:
        y = requantize(b, acc, m0, shift, bound, g_out.scale, where)
    b.set_output(op.outputs[0], fused_activation(b, op, y))


def add(b: GraphBuilder, op: Operator) -> None:
    """ADD (int8 / uint8): each input ``(q - zp) << 20`` scaled to twice the larger input
    scale with its own multiplier (two roundings), summed, then requantized to the output."""
    where = op.where
    g1, g2 = grid(b, op.inputs[0], where), grid(b, op.inputs[1], where)
    g_out = grid(b, op.outputs[0], where)
    left_shift = 20
    twice_max = 2.0 * float(np.float32(max(np.float32(g1.scale), np.float32(g2.scale))))
    out_real = twice_max / float(np.float32((1 << left_shift) * np.float32(g_out.scale)))
    parts, bound = [], 0.0
    for idx, g in ((op.inputs[0], g1), (op.inputs[1], g2)):
        m, e = quantize_multiplier(g.scale / twice_max)
        if e > 0:
            raise ConversionError("bit_exact: ADD input multiplier >= 1", where)
        x = _cast(b, offsets(b, idx, where), TensorProto.DOUBLE)
        # (x << 20) * m / 2^31: x * m has at most 40 bits, so this product is exact
        v = b.emit("Mul", [x, _f64(b, m * 2.0 ** (left_shift - 31), "multiplier")])[0]
        t = b.emit("Floor", [b.emit("Add", [v, _f64(b, 0.5, "half")])[0]])[0]
        parts.append(_rounding_divide_by_pot(b, t, -e))
        bound += g.max_abs_offset * (1 << left_shift) * m / 2.0**31 / 2.0**-e + 1
    raw = b.emit("Add", parts)[0]
    m_out, e_out = quantize_multiplier(out_real)
    y = requantize(b, raw, np.int64(m_out), np.int64(e_out), bound, g_out.scale, where)
    b.set_output(op.outputs[0], fused_activation(b, op, y))


def mean(b: GraphBuilder, op: Operator, axes: list[int], keepdims: int) -> None:
    """MEAN as EvalMeanReferenceOps dispatches it for int8 / uint8.

    Both the int8 H-and-W kernel (reference_integer_ops::Mean) and QuantizedMeanOrSum (other
    axes, differing grids) sum ``q - zp`` and requantize it with the input/output multiplier
    divided by the count in fixed point: ``(M0 << s) / count`` with s = min(floor(log2
    count), 32, 31 + shift). uint8 over H and W (a float-derived multiplier and bias) and
    equal input / output grids (an integer division) are other kernels, not emulated.
    """
    where = op.where
    g_in, g_out = grid(b, op.inputs[0], where), grid(b, op.outputs[0], where)
    shape = b.tensor(op.inputs[0]).shape
    count = int(np.prod([shape[a] for a in axes]))
    spatial = keepdims and len(shape) == 4 and sorted(axes) == [1, 2]
    uint8 = b.tensor(op.inputs[0]).dtype == "uint8"
    same_grid = (g_in.scale, g_in.zero_point) == (g_out.scale, g_out.zero_point)
    if (spatial and uint8) or (not spatial and same_grid):
        raise ConversionError(
            "bit_exact: this MEAN variant (uint8 over H and W, or equal input and output "
            "grids) is not emulated",
            where,
        )
    if count * g_in.max_abs_offset >= _EXACT_F32:
        raise ConversionError("bit_exact: MEAN over too many elements for exact sums", where)
    m0, sh = quantize_multiplier(float(np.float32(g_in.scale)) / float(np.float32(g_out.scale)))
    adj = min(count.bit_length() - 1, 32, 31 + sh)
    m1, sh1 = (m0 << adj) // count, sh - adj
    acc = reduce_axes(b, "ReduceSum", offsets(b, op.inputs[0], where), axes, keepdims)
    acc = _cast(b, acc, TensorProto.DOUBLE)
    bound = float(count * g_in.max_abs_offset)
    y = requantize(b, acc, np.int64(m1), np.int64(sh1), bound, g_out.scale, where)
    b.set_output(op.outputs[0], y)


def average_pool(b: GraphBuilder, op: Operator, kernel) -> None:
    """AVERAGE_POOL_2D: the raw integers summed over the window's valid cells, divided by
    their count rounding half away from zero, on the output's grid."""
    where = op.where
    g_out = grid(b, op.outputs[0], where)
    raw, _ = raw_integers(b, op.inputs[0], where)
    attrs = spatial_attrs(b, op, kernel)
    if "auto_pad" in attrs:
        raise ConversionError("bit_exact: AVERAGE_POOL_2D needs static spatial dims", where)
    window = int(kernel[0] * kernel[1])
    pool_attrs = {"kernel_shape": list(kernel), "count_include_pad": 1, **attrs}
    pooled = b.emit("AveragePool", [raw], **pool_attrs)[0]
    # mean * window is within a few ulps of the integer sum: Round recovers it exactly
    total = b.emit(
        "Round", [b.emit("Mul", [pooled, b.const(np.array(window, np.float32), "window")])[0]]
    )[0]
    counts = _valid_counts(
        b.tensor(op.inputs[0]).shape[1:3], b.tensor(op.outputs[0]).shape[1:3], kernel, attrs
    )
    # |sum / count - (m + 1/2)| >= 1 / (2 count) >> float32's error: ties stay exact ties
    mean_ = b.emit("Div", [total, b.const(counts, "count")])[0]
    k = b.quant(
        mean_, "rounded", None, scale=1.0, bit_width=32, signed=True, rounding_mode="HALF_UP"
    )
    if g_out.zero_point:
        k = b.emit("Sub", [k, b.const(np.array(g_out.zero_point, np.float32), "zero_point")])[0]
    y = b.emit("Mul", [k, b.const(np.array(g_out.scale, np.float32), "scale")])[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))


def _valid_counts(in_hw, out_hw, kernel, attrs) -> np.ndarray:
    """Cells of each window inside the input (TFLite divides by that), NHWC-broadcastable."""
    per_axis = []
    for a in range(2):
        begin, stride = attrs["pads"][a], attrs["strides"][a]
        starts = np.arange(out_hw[a]) * stride - begin
        ends = np.minimum(starts + kernel[a], in_hw[a])
        per_axis.append(ends - np.maximum(starts, 0))
    counts = np.outer(per_axis[0], per_axis[1]).astype(np.float32)
    if np.all(counts == counts.flat[0]):
        return np.array(counts.flat[0], np.float32)
    return counts.reshape(1, out_hw[0], out_hw[1], 1)
