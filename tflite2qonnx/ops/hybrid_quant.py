"""TFLite's hybrid (dynamic-range) products: float rows quantized to int8 on the fly, times
int8 weights, scaled back to float. Shared by the hybrid RNN, SVDF and LSTM kernels.

tensor_utils' BatchQuantizeFloats quantizes each row (the last axis) on its own:

- symmetric (SymmetricQuantizeFloats): r = max |row|; scaling factor r / 127, q =
  clamp(round(x * (127 / r)), -127, 127), all float32; a zero row gives q = 0, factor 1;
- asymmetric (AsymmetricQuantizeFloats, ``asymmetric_quantize_inputs``): rmin / rmax = the
  row's min / max widened to include 0, scale = (rmax - rmin) / 255 (the difference in
  float32, the division in double: what the interpreter matches on every row tried), the zero
  point chosen and nudged as in ChooseQuantizationParams, in double; the factor is that scale in
  float32, q = clamp(round(zp + x * float(1.0 / factor)), -128, 127); a zero row gives q = 0,
  zero point 0, factor 1.

round is std::round (half away from zero). The kernel's int32 product dot(q, w) - zp * row
sum (MatrixBatchVectorMultiplyAccumulate) is dot(q - zp, w) here, exact in float32 while its
bound stays under 2^24 (in float64 beyond), and is added to the result as
float(dot) * (factor * weight scale), all float32 as in the kernel.
"""

from __future__ import annotations

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


def round_half_away(b: GraphBuilder, v: str, dtype=np.float32) -> str:
    """std::round exactly: sign(v) * (floor|v| + (frac >= 0.5)); floor(|v| + 0.5) is not
    (0.49999997 + 0.5 rounds to 1 in float32)."""
    mag = b.emit("Abs", [v])[0]
    whole = b.emit("Floor", [mag])[0]
    frac = b.emit("Sub", [mag, whole])[0]
    up = b.emit("GreaterOrEqual", [frac, b.const(np.array(0.5, dtype), "half")])[0]
    up = b.emit("Cast", [up], to=TensorProto.DOUBLE if dtype == np.float64 else TensorProto.FLOAT)
    return b.emit("Mul", [b.emit("Sign", [v])[0], b.emit("Add", [whole, up[0]])[0]])[0]


def symmetric_rows(b: GraphBuilder, x: str) -> tuple[str, str]:
    """SymmetricQuantizeFloats of each row: (q as float32 integers, scaling factor)."""
    r = reduce_axes(b, "ReduceMax", b.emit("Abs", [x])[0], [-1], keepdims=1)
    zero = b.emit("Equal", [r, _f32(b, 0.0, "zero")])[0]
    safe = b.emit("Where", [zero, _f32(b, 1.0, "one"), r])[0]
    inv = b.emit("Div", [_f32(b, _K, "k127"), safe])[0]
    q = round_half_away(b, b.emit("Mul", [x, inv])[0])
    q = b.emit("Clip", [q, _f32(b, -_K, "qmin"), _f32(b, _K, "qmax")])[0]
    factor = b.emit("Div", [r, _f32(b, _K, "k127")])[0]
    return q, b.emit("Where", [zero, _f32(b, 1.0, "one"), factor])[0]


def asymmetric_rows(b: GraphBuilder, x: str) -> tuple[str, str, str]:
    """AsymmetricQuantizeFloats of each row: (q - zero point, scaling factor), both float32,
    and the zero point."""
    lo = b.emit("Min", [reduce_axes(b, "ReduceMin", x, [-1], 1), _f32(b, 0.0, "zero")])[0]
    hi = b.emit("Max", [reduce_axes(b, "ReduceMax", x, [-1], 1), _f32(b, 0.0, "zero")])[0]
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
    wide = b.emit("Cast", [factor], to=TensorProto.DOUBLE)[0]
    inv = b.emit("Div", [_f64(b, 1.0, "one64"), wide])[0]
    inv = b.emit("Cast", [inv], to=TensorProto.FLOAT)[0]
    q = round_half_away(b, b.emit("Add", [zp, b.emit("Mul", [x, inv])[0]])[0])
    q = b.emit("Clip", [q, _f32(b, -128.0, "qmin"), _f32(b, 127.0, "qmax")])[0]
    return b.emit("Sub", [q, zp])[0], factor, zp


@dataclass(frozen=True)
class HybridMatrix:
    """Raw int8 weights as a MatMul constant [in, out] (float64 when float32 would not hold
    the int32 sums exactly), their per-column scale, and the input quantization they meet."""

    weights: str
    scale: str
    asymmetric: bool
    wide: bool


def hybrid_matrix(
    b: GraphBuilder,
    w: np.ndarray,
    w_scale: np.ndarray | float,
    asymmetric: bool,
    hint: str,
    where: str,
) -> HybridMatrix:
    """Constants for x @ W^T with raw int8 ``w`` [out, in] and one scale, or one per output
    column (one per gate when gates are stacked)."""
    bound = (255.0 if asymmetric else 127.0) * np.abs(w).sum(axis=1).max(initial=0.0)
    if bound >= 2.0**31:
        raise ConversionError(f"hybrid {hint}: its int32 accumulator could overflow", where)
    wide = bound >= _EXACT_F32
    weights = np.ascontiguousarray(w.T).astype(np.float64 if wide else np.float32)
    scale = b.const(np.asarray(w_scale, np.float32), f"{hint}_scale")
    return HybridMatrix(b.const(weights, f"{hint}_int8"), scale, asymmetric, wide)


def hybrid_product(b: GraphBuilder, x: str, m: HybridMatrix) -> str:
    """x @ W^T as the hybrid kernel computes it (float32 [..., out])."""
    if m.asymmetric:
        q, factor, _ = asymmetric_rows(b, x)
    else:
        q, factor = symmetric_rows(b, x)
    if m.wide:  # int32 sums past float32's integers: exact in float64, rounded as float(int32)
        q = b.emit("Cast", [q], to=TensorProto.DOUBLE)[0]
        dot = b.emit("Cast", [b.emit("MatMul", [q, m.weights])[0]], to=TensorProto.FLOAT)[0]
    else:
        dot = b.emit("MatMul", [q, m.weights])[0]
    return b.emit("Mul", [dot, b.emit("Mul", [factor, m.scale])[0]])[0]
