"""AVERAGE_POOL_2D and MAX_POOL_2D (TFLite's average ignores padded cells; both pool raw
integers, see ``GraphBuilder.reinterpret``)."""

from __future__ import annotations

from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.geometry import pool_window
from tflite2qonnx.ops.padding import spatial_attrs


def _pool(b: GraphBuilder, op: Operator, op_type: str, **extra) -> None:
    kernel = pool_window(op)
    attrs = spatial_attrs(b, op, kernel)
    x = b.raw_input(op.inputs[0], op.outputs[0])
    y = b.emit(op_type, [x], kernel_shape=kernel, **attrs, **extra)[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))


def average_pool_2d(b: GraphBuilder, op: Operator) -> None:
    """Integer kernels (int16 always, int8 under --bit-exact): its record's ``kernel``."""
    _pool(b, op, "AveragePool", count_include_pad=0)


def max_pool_2d(b: GraphBuilder, op: Operator) -> None:
    _pool(b, op, "MaxPool")
