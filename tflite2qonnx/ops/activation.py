"""Fused activations (every TFLite op's ``fused_activation_function``) and standalone ones.

On a quantized output TFLite clamps in the integer domain; applying the float activation
before the output's Quant node gives the same values because quantization is monotone.
"""

from __future__ import annotations

import numpy as np

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.reader import Operator


def _clip(b: GraphBuilder, x: str, lo: float, hi: float) -> str:
    lo_name = b.const(np.array(lo, np.float32), "clip_min")
    hi_name = b.const(np.array(hi, np.float32), "clip_max")
    return b.emit("Clip", [x, lo_name, hi_name])[0]


_FUSED = {
    "NONE": lambda b, x: x,
    "RELU": lambda b, x: b.emit("Relu", [x])[0],
    "RELU6": lambda b, x: _clip(b, x, 0.0, 6.0),
    "RELU_N1_TO_1": lambda b, x: _clip(b, x, -1.0, 1.0),
    "TANH": lambda b, x: b.emit("Tanh", [x])[0],
}


def fused_activation(b: GraphBuilder, op: Operator, x: str) -> str:
    """Apply ``op``'s fused activation to ``x``."""
    kind = op.options.get("fused_activation_function", "NONE")
    if kind not in _FUSED:
        raise ConversionError(f"fused activation {kind} is not supported", op.where)
    return _FUSED[kind](b, x)


def relu(b: GraphBuilder, op: Operator) -> None:
    b.set_output(op.outputs[0], b.emit("Relu", [b.input(op.inputs[0])])[0])


def relu6(b: GraphBuilder, op: Operator) -> None:
    b.set_output(op.outputs[0], _clip(b, b.input(op.inputs[0]), 0.0, 6.0))
