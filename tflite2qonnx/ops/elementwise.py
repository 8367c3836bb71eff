"""Elementwise TFLite ops: binary arithmetic with numpy broadcasting and unary activations.

Quantized variants need no special handling: TFLite rescales the operands to a common scale in
integer arithmetic and requantizes the result, which the float op followed by the output's
Quant node reproduces to within one step of the output grid.
"""

from __future__ import annotations

import numpy as np

from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.reader import Operator


def _binary(onnx_op: str):
    def convert(b: GraphBuilder, op: Operator) -> None:
        y = b.emit(onnx_op, [b.input(op.inputs[0]), b.input(op.inputs[1])])[0]
        b.set_output(op.outputs[0], fused_activation(b, op, y))

    convert.__doc__ = f"TFLite's broadcasting rules are numpy's, as are ONNX {onnx_op}'s."
    return convert


add = _binary("Add")
sub = _binary("Sub")
mul = _binary("Mul")


def _unary(onnx_op: str):
    def convert(b: GraphBuilder, op: Operator) -> None:
        b.set_output(op.outputs[0], b.emit(onnx_op, [b.input(op.inputs[0])])[0])

    return convert


logistic = _unary("Sigmoid")


def prelu(b: GraphBuilder, op: Operator) -> None:
    """alpha broadcasts against x (usually [1, 1, C] on NHWC), as ONNX PRelu's slope does."""
    y = b.emit("PRelu", [b.input(op.inputs[0]), b.input(op.inputs[1])])[0]
    b.set_output(op.outputs[0], y)


def hard_swish(b: GraphBuilder, op: Operator) -> None:
    """x * relu6(x + 3) / 6; HardSwish exists from opset 14, x * HardSigmoid(x) before it."""
    x = b.input(op.inputs[0])
    if b.opset >= 14:
        y = b.emit("HardSwish", [x])[0]
    else:
        gate = b.emit("HardSigmoid", [x], alpha=float(np.float32(1 / 6)), beta=0.5)[0]
        y = b.emit("Mul", [x, gate])[0]
    b.set_output(op.outputs[0], y)
