"""Fused activations (every TFLite op's ``fused_activation_function``) and standalone ones.

On a quantized output TFLite clamps in the integer domain; applying the float activation
before the output's Quant node gives the same values because quantization is monotone.
"""

from __future__ import annotations

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops import exact_unary
from tflite2qonnx.ops.common import clip_bounds


def _clip(b: GraphBuilder, x: str, lo: float, hi: float) -> str:
    return b.emit("Clip", [x, *clip_bounds(b, lo, hi)])[0]


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
    if b.bit_exact and exact_unary.convert(b, op):
        return
    b.set_output(op.outputs[0], b.emit("Relu", [b.input(op.inputs[0])])[0])


def relu6(b: GraphBuilder, op: Operator) -> None:
    if b.bit_exact and exact_unary.convert(b, op):
        return
    b.set_output(op.outputs[0], _clip(b, b.input(op.inputs[0]), 0.0, 6.0))
