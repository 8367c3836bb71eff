"""Hybrid (dynamic-range) FULLY_CONNECTED: float input, constant int8 weights.

The kernel (fully_connected.cc EvalHybrid) quantizes each input row on the fly and runs an
integer dot product; the float layer on the dequantized weights is off by the input rounding
(1e-3 on a small Dense, where XNNPACK agrees with the kernel to 1e-7). Its steps, as written:

- symmetric (SymmetricQuantizeFloats): r = max |row| (float32), q = clamp(round(x * (127 / r)),
  +-127), scaling factor r / 127; r == 0 gives q = 0, factor 1;
- ``asymmetric_quantize_inputs`` (AsymmetricQuantizeFloats as x86 builds compile it, the NEON
  version through NEON_2_SSE): rmin = min(0, min row), rmax = max(0, max row) in float32;
  scale = double(rmax - rmin) / 255 (the difference rounded in float32 first), the zero point
  from whichever end has the smaller error (double), rounded half away and clamped to
  [-128, 127]; factor = float(scale), q = clamp(round(x * (1 / factor)) + zp, -128, 127)
  (rounded before the zero point is added); the dot product subtracts zp * row_sum(w);
  rmin == rmax gives q = 0, factor 1, zp 0;
- output = bias + float(dot) * (factor * weight scale), float32, then the fused activation;
  per-channel weights (asymmetric inputs only) take each unit's scale there.

Integer products run as int32 MatMul (exact); round is half away from zero (std::round).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.common import reduce_axes
from tflite2qonnx.ops.hybrid_quant import round_half_away, symmetric_rows


def is_hybrid_fc(b: GraphBuilder, op: Operator) -> bool:
    """Float input with int8 weights."""
    return b.tensor(op.inputs[0]).dtype == "float32" and b.tensor(op.inputs[1]).dtype == "int8"


def _c(b: GraphBuilder, value, dtype, hint: str) -> str:
    return b.const(np.array(value, dtype), hint)


def _asymmetric(b: GraphBuilder, x: str) -> tuple[str, str, str]:
    f64 = np.float64
    zero32 = _c(b, 0.0, np.float32, "zero")
    rmin = b.emit("Min", [reduce_axes(b, "ReduceMin", x, [-1], keepdims=1), zero32])[0]
    rmax = b.emit("Max", [reduce_axes(b, "ReduceMax", x, [-1], keepdims=1), zero32])[0]
    same = b.emit("Equal", [rmin, rmax])[0]
    width = b.emit("Cast", [b.emit("Sub", [rmax, rmin])[0]], to=TensorProto.DOUBLE)[0]
    rmin = b.emit("Cast", [rmin], to=TensorProto.DOUBLE)[0]
    rmax = b.emit("Cast", [rmax], to=TensorProto.DOUBLE)[0]
    scale = b.emit("Div", [width, _c(b, 255.0, f64, "k255")])[0]
    scale = b.emit("Where", [same, _c(b, 1.0, f64, "one"), scale])[0]
    lo, hi = b.emit("Div", [rmin, scale])[0], b.emit("Div", [rmax, scale])[0]
    zp_min = b.emit("Sub", [_c(b, -128.0, f64, "qmin"), lo])[0]
    zp_max = b.emit("Sub", [_c(b, 127.0, f64, "qmax"), hi])[0]
    err_min = b.emit("Add", [_c(b, 128.0, f64, "k128"), b.emit("Abs", [lo])[0]])[0]
    err_max = b.emit("Add", [_c(b, 127.0, f64, "k127"), b.emit("Abs", [hi])[0]])[0]
    zp = b.emit("Where", [b.emit("Less", [err_min, err_max])[0], zp_min, zp_max])[0]
    zp = round_half_away(b, zp, f64)
    zp = b.emit("Clip", [zp, _c(b, -128.0, f64, "qmin"), _c(b, 127.0, f64, "qmax")])[0]
    zp = b.emit("Where", [same, _c(b, 0.0, f64, "zero"), zp])[0]
    zp32 = b.emit("Cast", [zp], to=TensorProto.FLOAT)[0]
    factor = b.emit("Cast", [scale], to=TensorProto.FLOAT)[0]
    inv = b.emit("Div", [_c(b, 1.0, np.float32, "one"), factor])[0]
    q = round_half_away(b, b.emit("Mul", [x, inv])[0], np.float32)
    q = b.emit("Add", [q, zp32])[0]
    lo8, hi8 = _c(b, -128.0, np.float32, "qmin"), _c(b, 127.0, np.float32, "qmax")
    q = b.emit("Clip", [q, lo8, hi8])[0]
    q = b.emit("Where", [same, zero32, q])[0]
    return q, factor, b.emit("Cast", [zp], to=TensorProto.INT32)[0]


def hybrid_fully_connected(b: GraphBuilder, op: Operator, x: str) -> None:
    """``x``: the (flattened) float input rows."""
    w_idx = op.inputs[1]
    bias_idx = op.inputs[2] if len(op.inputs) > 2 else -1
    t = b.tensor(w_idx)
    q = t.quantization
    asymmetric = bool(op.options.get("asymmetric_quantize_inputs", False))
    if t.data is None or q is None or np.any(q.zero_point != 0):
        raise ConversionError(
            "hybrid FULLY_CONNECTED needs constant symmetric int8 weights",
            f"{op.where}, tensor {w_idx} '{t.name}'",
        )
    if q.per_axis and (not asymmetric or q.quantized_dimension != 0):
        raise ConversionError(
            "hybrid FULLY_CONNECTED with per-channel weights is only supported with "
            "asymmetric_quantize_inputs (per output unit)",
            f"{op.where}, tensor {w_idx} '{t.name}'",
        )
    if bias_idx >= 0 and b.tensor(bias_idx).dtype != "float32":
        raise ConversionError("hybrid FULLY_CONNECTED needs a float bias", op.where)
    # per unit (one or all): the kernel multiplies the row factor by it in float32
    w_scale = np.asarray(q.scale, np.float32)
    w_scale = w_scale if q.per_axis else w_scale[0]
    raw = np.asarray(t.data, np.int64)  # [units, depth]
    # the weights keep their Quant (read as real values), recovered exactly as integers
    w_real = b.input(w_idx, perm=(1, 0))
    w_int = b.emit("Round", [b.emit("Div", [w_real, _c(b, w_scale, np.float32, "w_scale")])[0]])
    w_int = b.emit("Cast", w_int, to=TensorProto.INT32)[0]
    if asymmetric:
        q_x, factor, zp = _asymmetric(b, x)
    else:
        (q_x, factor), zp = symmetric_rows(b, x), None
    dot = b.emit("MatMul", [b.emit("Cast", [q_x], to=TensorProto.INT32)[0], w_int])[0]
    if zp is not None:
        row_sums = _c(b, raw.sum(axis=1).astype(np.int32), np.int32, "row_sums")
        dot = b.emit("Sub", [dot, b.emit("Mul", [zp, row_sums])[0]])[0]
    factor = b.emit("Mul", [factor, _c(b, w_scale, np.float32, "w_scale")])[0]
    y = b.emit("Mul", [b.emit("Cast", [dot], to=TensorProto.FLOAT)[0], factor])[0]
    if bias_idx >= 0:
        y = b.emit("Add", [b.input(bias_idx), y])[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))
