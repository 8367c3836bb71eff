"""Fused activations (every TFLite op's ``fused_activation_function``); the standalone RELU
and RELU6 converters are in ``ops.arith.elementwise``.

On a quantized output TFLite clamps in the integer domain; applying the float activation
before the output's Quant node gives the same values because quantization is monotone.
"""

from __future__ import annotations

import numpy as np
from onnx import helper

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.common import clip_bounds
from tflite2qonnx.ops.int64_order import clamp


def _clip(b: GraphBuilder, x: str, lo: float, hi: float, dtype=np.float32) -> str:
    """int64 through ``int64_order`` (onnxruntime's int64 Clip misorders some values)."""
    return clamp(
        b, x, *clip_bounds(b, lo, hi, dtype), helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    )


_FUSED = {
    "NONE": lambda b, x: x,
    "RELU": lambda b, x: b.emit("Relu", [x])[0],
    "RELU6": lambda b, x: _clip(b, x, 0.0, 6.0),
    "RELU_N1_TO_1": lambda b, x: _clip(b, x, -1.0, 1.0),
    "TANH": lambda b, x: b.emit("Tanh", [x])[0],
}
# on an integer output (int32 ADD, MUL, SUB) the kernels clamp the integers to these ranges
_INTEGER_RANGES = {"RELU": (0, None), "RELU6": (0, 6), "RELU_N1_TO_1": (-1, 1)}


def fused_activation(b: GraphBuilder, op: Operator, x: str) -> str:
    """Apply ``op``'s fused activation to ``x``."""
    kind = op.options.get("fused_activation_function", "NONE")
    if kind not in _FUSED:
        raise ConversionError(f"fused activation {kind} is not supported", op.where)
    if kind != "NONE" and op.outputs and b.is_integer(op.outputs[0]):
        if kind not in _INTEGER_RANGES:
            raise ConversionError(f"fused {kind} on an integer output", op.where)
        dtype = helper.tensor_dtype_to_np_dtype(b.elem_type(op.outputs[0]))
        lo, hi = _INTEGER_RANGES[kind]
        return _clip(b, x, lo, np.iinfo(dtype).max if hi is None else hi, dtype)
    return _FUSED[kind](b, x)
