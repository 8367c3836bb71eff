"""Hybrid (dynamic-range) FULLY_CONNECTED: float input, constant int8 weights.

The kernel (fully_connected.cc EvalHybrid) quantizes each input row on the fly and runs an
integer dot product; the float layer on the dequantized weights is off by the input rounding
(1e-3 on a small Dense, where XNNPACK agrees with the kernel to 1e-7). The input quantization
is ``ops.hybrid.quant``'s (symmetric, or ``asymmetric_quantize_inputs``'s zero point, whose
row sums the kernel subtracts: here the product of q - zp); output = bias + float(dot) *
(factor * weight scale), float32, then the fused activation; per-channel weights (symmetric
or asymmetric inputs: ai-edge-quantizer's dynamic_wi8c) take each unit's scale there.
Integer products run as int32 MatMul (exact).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.geometry import fc_rows
from tflite2qonnx.ops.hybrid.quant import quantize_rows, weight_integers

# constant weights the hybrid kernels take; blockwise ones go through the float layer
_WEIGHTS = ("int8", "int4", "int2")


def is_hybrid_fc(b: GraphBuilder, op: Operator) -> bool:
    """Float input with int8 weights (or int4 / int2: the kernel unpacks them to int8 and runs
    the same hybrid path; measured exact on ai-edge-quantizer's dynamic_wi4c / wi2c_hr)."""
    w = b.tensor(op.inputs[1])
    blockwise = w.quantization is not None and w.quantization.block_size > 0
    return b.tensor(op.inputs[0]).dtype == "float32" and w.dtype in _WEIGHTS and not blockwise


def _c(b: GraphBuilder, value, dtype, hint: str) -> str:
    return b.const(np.array(value, dtype), hint)


def fully_connected(b: GraphBuilder, op: Operator) -> None:
    """The hybrid kernel: its record's ``hybrid`` kernel where ``is_hybrid_fc``."""
    x, bias_idx = fc_rows(b, op)
    w_idx = op.inputs[1]
    t = b.tensor(w_idx)
    q = t.quantization
    asymmetric = bool(op.options.get("asymmetric_quantize_inputs", False))
    if t.data is None or q is None or np.any(q.zero_point != 0):
        raise ConversionError(
            "hybrid FULLY_CONNECTED needs constant symmetric int8 weights",
            f"{op.where}, tensor {w_idx} '{t.name}'",
        )
    if q.per_axis and q.quantized_dimension != 0:
        raise ConversionError(
            "hybrid FULLY_CONNECTED with per-channel weights is only supported per output unit",
            f"{op.where}, tensor {w_idx} '{t.name}'",
        )
    if bias_idx >= 0 and b.tensor(bias_idx).dtype != "float32":
        raise ConversionError("hybrid FULLY_CONNECTED needs a float bias", op.where)
    # per unit (one or all): the kernel multiplies the row factor by it in float32
    w_scale = np.asarray(q.scale, np.float32)
    w_scale = w_scale if q.per_axis else w_scale[0]
    # the weights keep their Quant (read as real values), recovered exactly as integers
    w_int = b.emit("Cast", [weight_integers(b, w_idx, perm=(1, 0))], to=TensorProto.INT32)[0]
    q_x, factor = quantize_rows(b, x, (t.shape[-1],), asymmetric)
    dot = b.emit("MatMul", [b.emit("Cast", [q_x], to=TensorProto.INT32)[0], w_int])[0]
    factor = b.emit("Mul", [factor, _c(b, w_scale, np.float32, "w_scale")])[0]
    y = b.emit("Mul", [b.emit("Cast", [dot], to=TensorProto.FLOAT)[0], factor])[0]
    if bias_idx >= 0:
        y = b.emit("Add", [b.input(bias_idx), y])[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))
