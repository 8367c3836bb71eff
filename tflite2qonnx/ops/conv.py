"""CONV_2D and DEPTHWISE_CONV_2D as ONNX Conv.

Convs are layout sources: they are emitted in ONNX form (OIHW weights, NCHW semantics) while
their activations keep TFLite's NHWC shapes; the layout pass then stores the activations
channels-first around them.
"""

from __future__ import annotations

from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.padding import spatial_attrs
from tflite2qonnx.reader import Operator

OHWI_TO_OIHW = (0, 3, 1, 2)
# depthwise [1, H, W, C*M] -> [C*M, 1, H, W]: ONNX's grouped form with group = C
DEPTHWISE_TO_GROUPED = (3, 0, 1, 2)


def conv_2d(b: GraphBuilder, op: Operator) -> None:
    weights = b.tensor(op.inputs[1])
    groups = b.tensor(op.inputs[0]).shape[-1] // weights.shape[-1]
    _conv(b, op, OHWI_TO_OIHW, weights.shape[1:3], groups)


def depthwise_conv_2d(b: GraphBuilder, op: Operator) -> None:
    weights = b.tensor(op.inputs[1])
    _conv(b, op, DEPTHWISE_TO_GROUPED, weights.shape[1:3], b.tensor(op.inputs[0]).shape[-1])


def _conv(b: GraphBuilder, op: Operator, perm, kernel, groups: int) -> None:
    inputs = [b.input(op.inputs[0]), b.input(op.inputs[1], perm=perm)]
    if len(op.inputs) > 2 and op.inputs[2] >= 0:
        inputs.append(b.input(op.inputs[2]))
    attrs = spatial_attrs(b, op, kernel)
    y = b.emit("Conv", inputs, group=groups, kernel_shape=list(kernel), **attrs)[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))
