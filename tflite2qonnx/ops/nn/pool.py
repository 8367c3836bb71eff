"""AVERAGE_POOL_2D and MAX_POOL_2D (TFLite's average ignores padded cells; both pool raw
integers, see ``GraphBuilder.reinterpret``)."""

from __future__ import annotations

from tflite2qonnx.fixed_point import is_int16
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.exact import int8 as exact
from tflite2qonnx.ops.exact import int16 as exact_int16
from tflite2qonnx.ops.padding import spatial_attrs
from tflite2qonnx.ops.treatment import emulates


def _pool(b: GraphBuilder, op: Operator, op_type: str, **extra) -> None:
    kernel = [op.options["filter_height"], op.options["filter_width"]]
    attrs = spatial_attrs(b, op, kernel)
    x = b.raw_input(op.inputs[0], op.outputs[0])
    y = b.emit(op_type, [x], kernel_shape=kernel, **attrs, **extra)[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))


def average_pool_2d(b: GraphBuilder, op: Operator) -> None:
    if emulates(b, op):
        kernel = [op.options["filter_height"], op.options["filter_width"]]
        kernel_fn = exact_int16.average_pool if is_int16(b, op.inputs[0]) else exact.average_pool
        return kernel_fn(b, op, kernel)
    _pool(b, op, "AveragePool", count_include_pad=0)


def max_pool_2d(b: GraphBuilder, op: Operator) -> None:
    _pool(b, op, "MaxPool")
