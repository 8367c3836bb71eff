"""TFLite's hybrid (dynamic-range) products: float rows quantized to int8 on the fly, times
int8 weights, scaled back to float. Shared by the hybrid FULLY_CONNECTED, conv, RNN, SVDF and
LSTM kernels.

tensor_utils' SymmetricQuantizeFloats / AsymmetricQuantizeFloats quantize each row (the last
axis; a conv's whole batch element) on its own, as x86 builds of the interpreter compile them
(the NEON versions through NEON_2_SSE, for the builtin and the reference resolver alike):

- symmetric: r = max |row|; v = x * (127 / r), q = clamp(round(v), -127, 127), scaling
  factor r / 127, all float32; a zero row gives q = 0, factor 1;
- asymmetric (``asymmetric_quantize_inputs``, per-channel conv filters): rmin / rmax = the
  row's min / max widened to include 0, scale = (rmax - rmin) / 255 (the difference in
  float32, the division in double), the zero point chosen and nudged as in
  ChooseQuantizationParams, in double; the factor is that scale in float32, v = x * (1 /
  factor) in float32, q = clamp(round(v) + zp, -128, 127) (rounded before the zero point is
  added: the portable kernel's round(zp + v) differs wherever zp + v loses v's last bit); a
  zero row gives q = 0, zero point 0, factor 1.

round is two roundings by position: the vector loop (each row's first n - n % 8 values)
rounds as NEON's pre-ARMv8 RoundToNearest, trunc(v + 0.5 * sign(v)) with the sum in float32
(so +-0.49999997 becomes +-1), the scalar tail as std::round (half away from zero, 0). The
kernel's int32 product dot(q, w) - zp * row sum is dot(q - zp, w) here, exact in float32 while
its bound stays under 2^24 (in float64 beyond), and is added to the result as float(dot) *
(factor * weight scale), all float32 as in the kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.ops.common import reduce_axes

_K = 127.0
_EXACT_F32 = 2.0**24


def _f32(b: GraphBuilder, value: float, hint: str) -> str:
    return b.const(np.array(value, np.float32), hint)


def _f64(b: GraphBuilder, value: float, hint: str) -> str:
    return b.const(np.array(value, np.float64), hint)


def int8_weights(b: GraphBuilder, where: str, idx: int) -> tuple[np.ndarray, float]:
    """The raw int8 weights [out, in] as float32 and their scale (the kernels read the one
    scale and no zero point)."""
    t = b.tensor(idx)
    q = t.quantization
    if t.dtype != "int8" or t.data is None or q is None or len(q.scale) != 1:
        raise ConversionError(
            "the hybrid kernel needs constant per-tensor int8 weights (it reads one scale)",
            f"{where}, tensor {idx} '{t.name}'",
        )
    return np.asarray(t.data, np.float32), float(np.float32(q.scale[0]))


def weight_integers(b: GraphBuilder, idx: int, perm: Sequence[int] | None = None) -> str:
    """Constant int8 weights ``idx`` (permuted by ``perm``) as integer-valued float32, read
    through the Quant node that carries their scale and width (``GraphBuilder.input``):
    round(Quant(w) / scale) is the stored integers exactly, so consumers see 8-bit weights
    and the kernel still gets its integers."""
    args = b.tensor(idx).quant
    assert args is not None and not np.any(args.zero_point), "symmetric int8 weights"
    scale = np.asarray(args.scale, np.float32)
    if args.axis is not None:
        rank = len(b.tensor(idx).shape)
        shape = [1] * rank
        shape[args.axis if perm is None else list(perm).index(args.axis)] = -1
        scale = scale.reshape(shape)
    real = b.input(idx, perm=perm)
    return b.emit("Round", [b.emit("Div", [real, b.const(scale, "w_scale")])[0]])[0]


def round_half_away(b: GraphBuilder, v: str, dtype=np.float32) -> str:
    """std::round exactly: sign(v) * (floor|v| + (frac >= 0.5)); floor(|v| + 0.5) is not
    (0.49999997 + 0.5 rounds to 1 in float32)."""
    mag = b.emit("Abs", [v])[0]
    whole = b.emit("Floor", [mag])[0]
    frac = b.emit("Sub", [mag, whole])[0]
    up = b.emit("GreaterOrEqual", [frac, b.const(np.array(0.5, dtype), "half")])[0]
    up = b.emit("Cast", [up], to=TensorProto.DOUBLE if dtype == np.float64 else TensorProto.FLOAT)
    return b.emit("Mul", [b.emit("Sign", [v])[0], b.emit("Add", [whole, up[0]])[0]])[0]


def _kernel_round(b: GraphBuilder, v: str, row_shape: Sequence[int]) -> str:
    """round(v) (float32) as the quantizers do it: trunc(v + 0.5 * sign(v)) over each row's
    vector blocks of 8, std::round over its scalar tail (module docstring)."""
    n = int(np.prod(row_shape))
    blocks = n - n % 8
    if blocks == 0:
        return round_half_away(b, v)
    half = b.emit("Where", [b.emit("Less", [v, _f32(b, 0.0, "zero")])[0], _f32(b, -0.5, "neg_half"),
                            _f32(b, 0.5, "half")])[0]  # fmt: skip
    u = b.emit("Add", [v, half])[0]
    trunc = b.emit("Mul", [b.emit("Sign", [u])[0], b.emit("Floor", [b.emit("Abs", [u])[0]])[0]])[0]
    if blocks == n:
        return trunc
    in_block = (np.arange(n) < blocks).reshape(tuple(row_shape))
    return b.emit("Where", [b.const(in_block, "vector_block"), trunc, round_half_away(b, v)])[0]


def _row_axes(row_shape: Sequence[int]) -> list[int]:
    return list(range(-len(row_shape), 0))


def symmetric_rows(b: GraphBuilder, x: str, row_shape: Sequence[int]) -> tuple[str, str]:
    """SymmetricQuantizeFloats of each row (the trailing ``row_shape`` axes): (q as float32
    integers, scaling factor)."""
    axes = _row_axes(row_shape)
    r = reduce_axes(b, "ReduceMax", b.emit("Abs", [x])[0], axes, keepdims=1)
    zero = b.emit("Equal", [r, _f32(b, 0.0, "zero")])[0]
    safe = b.emit("Where", [zero, _f32(b, 1.0, "one"), r])[0]
    inv = b.emit("Div", [_f32(b, _K, "k127"), safe])[0]
    q = _kernel_round(b, b.emit("Mul", [x, inv])[0], row_shape)
    q = b.emit("Clip", [q, _f32(b, -_K, "qmin"), _f32(b, _K, "qmax")])[0]
    factor = b.emit("Div", [r, _f32(b, _K, "k127")])[0]
    return q, b.emit("Where", [zero, _f32(b, 1.0, "one"), factor])[0]


def asymmetric_rows(b: GraphBuilder, x: str, row_shape: Sequence[int]) -> tuple[str, str]:
    """AsymmetricQuantizeFloats of each row (the trailing ``row_shape`` axes): (q - zero
    point, scaling factor), both float32."""
    axes = _row_axes(row_shape)
    lo = b.emit("Min", [reduce_axes(b, "ReduceMin", x, axes, 1), _f32(b, 0.0, "zero")])[0]
    hi = b.emit("Max", [reduce_axes(b, "ReduceMax", x, axes, 1), _f32(b, 0.0, "zero")])[0]
    flat = b.emit("Equal", [lo, hi])[0]
    span = b.emit("Cast", [b.emit("Sub", [hi, lo])[0]], to=TensorProto.DOUBLE)[0]
    lo, hi = (b.emit("Cast", [v], to=TensorProto.DOUBLE)[0] for v in (lo, hi))
    scale = b.emit("Div", [span, _f64(b, 255.0, "k255")])[0]
    scale = b.emit("Where", [flat, _f64(b, 1.0, "one64"), scale])[0]
    lo_s, hi_s = (b.emit("Div", [v, scale])[0] for v in (lo, hi))
    from_min = b.emit("Sub", [_f64(b, -128.0, "qmin64"), lo_s])[0]
    from_max = b.emit("Sub", [_f64(b, 127.0, "qmax64"), hi_s])[0]
    err_min = b.emit("Add", [_f64(b, 128.0, "k128"), b.emit("Abs", [lo_s])[0]])[0]
    err_max = b.emit("Add", [_f64(b, 127.0, "qmax64"), b.emit("Abs", [hi_s])[0]])[0]
    zp = b.emit("Where", [b.emit("Less", [err_min, err_max])[0], from_min, from_max])[0]
    zp = round_half_away(b, zp, np.float64)
    zp = b.emit("Clip", [zp, _f64(b, -128.0, "qmin64"), _f64(b, 127.0, "qmax64")])[0]
    zp = b.emit("Where", [flat, _f64(b, 0.0, "zero64"), zp])[0]
    zp = b.emit("Cast", [zp], to=TensorProto.FLOAT)[0]
    factor = b.emit("Cast", [scale], to=TensorProto.FLOAT)[0]
    inv = b.emit("Div", [_f32(b, 1.0, "one"), factor])[0]
    q = _kernel_round(b, b.emit("Mul", [x, inv])[0], row_shape)
    q = b.emit("Add", [q, zp])[0]
    q = b.emit("Clip", [q, _f32(b, -128.0, "qmin"), _f32(b, 127.0, "qmax")])[0]
    return b.emit("Sub", [q, zp])[0], factor


def quantize_rows(
    b: GraphBuilder, x: str, row_shape: Sequence[int], asymmetric: bool
) -> tuple[str, str]:
    """(q - zero point, scaling factor) of each row, symmetric or asymmetric."""
    if asymmetric:
        return asymmetric_rows(b, x, row_shape)
    return symmetric_rows(b, x, row_shape)


@dataclass(frozen=True)
class HybridMatrix:
    """Raw int8 weights as a MatMul operand [in, out] (float64 when float32 would not hold
    the int32 sums exactly), their per-column scale, and the input quantization they meet."""

    weights: str
    scale: str
    asymmetric: bool
    wide: bool
    depth: int


def hybrid_matrix(
    b: GraphBuilder,
    indices: Sequence[int],
    asymmetric: bool,
    hint: str,
    where: str,
) -> HybridMatrix:
    """x @ W^T with the per-tensor int8 weights ``indices`` ([out, in] each) side by side:
    their integers through their Quant nodes (``weight_integers``), each column with its
    tensor's scale (one per gate when gates are stacked)."""
    parts = [int8_weights(b, where, idx) for idx in indices]
    w = np.concatenate([p[0] for p in parts], axis=0)
    w_scale = np.concatenate([np.full(p[0].shape[0], p[1], np.float32) for p in parts])
    bound = (255.0 if asymmetric else 127.0) * np.abs(w).sum(axis=1).max(initial=0.0)
    if bound >= 2.0**31:
        raise ConversionError(f"hybrid {hint}: its int32 accumulator could overflow", where)
    wide = bound >= _EXACT_F32
    columns = [weight_integers(b, idx, perm=(1, 0)) for idx in indices]
    weights = columns[0] if len(columns) == 1 else b.emit("Concat", columns, axis=1)[0]
    if wide:
        weights = b.emit("Cast", [weights], to=TensorProto.DOUBLE)[0]
    scale = b.const(w_scale if len(parts) > 1 else np.float32(parts[0][1]), f"{hint}_scale")
    return HybridMatrix(weights, scale, asymmetric, wide, int(w.shape[1]))


def hybrid_product(b: GraphBuilder, x: str, m: HybridMatrix) -> str:
    """x @ W^T as the hybrid kernel computes it (float32 [..., out])."""
    q, factor = quantize_rows(b, x, (m.depth,), m.asymmetric)
    if m.wide:  # int32 sums past float32's integers: exact in float64, rounded as float(int32)
        q = b.emit("Cast", [q], to=TensorProto.DOUBLE)[0]
        dot = b.emit("Cast", [b.emit("MatMul", [q, m.weights])[0]], to=TensorProto.FLOAT)[0]
    else:
        dot = b.emit("MatMul", [q, m.weights])[0]
    return b.emit("Mul", [dot, b.emit("Mul", [factor, m.scale])[0]])[0]
