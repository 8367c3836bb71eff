"""The kernels operator records name (``Kernel.run``, run by ``ops.dispatch``) where the kernel
function needs more than ``(builder, operator)``: the operand geometry its float converter
derives too (``ops.geometry``). One function per kernel and input type: the record, not this
module, chooses between them.
"""

from __future__ import annotations

from functools import partial

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops import geometry
from tflite2qonnx.ops.exact import int8, int16, tconv16
from tflite2qonnx.ops.exact import reduce as exact_reduce


def sub(b: GraphBuilder, op: Operator) -> None:
    int8.add(b, op, subtract=True)


def sub_pot(b: GraphBuilder, op: Operator) -> None:
    """int16 SUB with power-of-two scales (pot_scale_int16)."""
    int16.add_pot(b, op, subtract=True)


def squared_difference(b: GraphBuilder, op: Operator) -> None:
    if b.tensor(op.inputs[0]).dtype != "int8":  # the runtime has int8 only
        raise ConversionError("bit_exact: TFLite has no uint8 SQUARED_DIFFERENCE", op.where)
    return int8.squared_difference(b, op)


def conv_2d(b: GraphBuilder, op: Operator) -> None:
    int8.conv(b, op, *geometry.conv_2d_layout(b, op))


def conv_2d_16x8(b: GraphBuilder, op: Operator) -> None:
    int16.conv(b, op, *geometry.conv_2d_layout(b, op))


def depthwise_conv_2d(b: GraphBuilder, op: Operator) -> None:
    int8.conv(b, op, *geometry.depthwise_layout(b, op))


def depthwise_conv_2d_16x8(b: GraphBuilder, op: Operator) -> None:
    int16.conv(b, op, *geometry.depthwise_layout(b, op))


def transpose_conv(b: GraphBuilder, op: Operator) -> None:
    int8.transpose_conv(b, op, geometry.OHWI_TO_IOHW, geometry.transpose_conv_2d_attrs(b, op))


def transpose_conv_16x8(b: GraphBuilder, op: Operator) -> None:
    attrs = geometry.transpose_conv_2d_attrs(b, op)
    tconv16.transpose_conv(b, op, geometry.OHWI_TO_IOHW, attrs)


def fully_connected(b: GraphBuilder, op: Operator) -> None:
    geometry.check_fc_weights(op)
    int8.fully_connected(b, op, partial(geometry.flatten_fc, b, op))


def fully_connected_16x8(b: GraphBuilder, op: Operator) -> None:
    geometry.check_fc_weights(op)
    int16.fully_connected(b, op, partial(geometry.flatten_fc, b, op))


def average_pool_2d(b: GraphBuilder, op: Operator) -> None:
    int8.average_pool(b, op, geometry.pool_window(op))


def average_pool_2d_16x8(b: GraphBuilder, op: Operator) -> None:
    int16.average_pool(b, op, geometry.pool_window(op))


def mean(b: GraphBuilder, op: Operator) -> None:
    """int8 / uint8 and 16x8 alike (``int8.mean``)."""
    int8.mean(b, op, geometry.reduction_axes(b, op), geometry.keep_dims(op))


def reduce_sum(b: GraphBuilder, op: Operator) -> None:
    exact_reduce.sum_(b, op, geometry.reduction_axes(b, op), geometry.keep_dims(op))


def reduce_prod(b: GraphBuilder, op: Operator) -> None:
    exact_reduce.reduce_prod(b, op, geometry.reduction_axes(b, op), geometry.keep_dims(op))
