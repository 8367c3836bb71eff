"""The kernels operator records name (``kernel``, run by ``ops.dispatch``) where the kernel
function needs more than ``(builder, operator)``: the operand geometry its float converter
derives too (``ops.geometry``), or a choice between kernels by operand types (int8 / uint8 or
16x8: a record whose ``int16`` treatment runs by default and names no ``int16_kernel`` runs
its ``kernel`` on those int16 inputs).
"""

from __future__ import annotations

from functools import partial

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.fixed_point import is_int16
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops import geometry
from tflite2qonnx.ops.exact import bmm16, int8, int16, softmax16, softmax_int16_out, tconv16
from tflite2qonnx.ops.exact import reduce as exact_reduce
from tflite2qonnx.ops.exact import softmax as exact_softmax


def add(b: GraphBuilder, op: Operator) -> None:
    """int16 with power-of-two scales (pot_scale_int16): that kernel; else the general one."""
    if int16.pot_scaled(b, op):
        return int16.add_pot(b, op)
    return int8.add(b, op)


def sub(b: GraphBuilder, op: Operator) -> None:
    if int16.pot_scaled(b, op):
        return int16.add_pot(b, op, subtract=True)
    return int8.add(b, op, subtract=True)


def squared_difference(b: GraphBuilder, op: Operator) -> None:
    if b.tensor(op.inputs[0]).dtype != "int8":  # the runtime has int8 only
        raise ConversionError("bit_exact: TFLite has no uint8 SQUARED_DIFFERENCE", op.where)
    return int8.squared_difference(b, op)


def batch_matmul(b: GraphBuilder, op: Operator) -> None:
    if b.tensor(op.inputs[0]).dtype == "int16":
        return bmm16.batch_matmul(b, op)
    return int8.batch_matmul(b, op)


def conv_2d(b: GraphBuilder, op: Operator) -> None:
    _conv(b, op, geometry.conv_2d_layout(b, op))


def depthwise_conv_2d(b: GraphBuilder, op: Operator) -> None:
    _conv(b, op, geometry.depthwise_layout(b, op))


def _conv(b: GraphBuilder, op: Operator, layout: geometry.ConvLayout) -> None:
    """int16 activations: the 16x8 kernel (``int16``); int8 / uint8: ``int8``'s."""
    (int16 if is_int16(b, op.inputs[0]) else int8).conv(b, op, *layout)


def transpose_conv(b: GraphBuilder, op: Operator) -> None:
    """The activation is input 2; int16: the 16x8 kernel (``tconv16``)."""
    kernel = tconv16 if is_int16(b, op.inputs[2]) else int8
    kernel.transpose_conv(b, op, geometry.OHWI_TO_IOHW, geometry.transpose_conv_2d_attrs(b, op))


def fully_connected(b: GraphBuilder, op: Operator) -> None:
    geometry.check_fc_weights(op)
    kernel = int16 if is_int16(b, op.inputs[0]) else int8
    kernel.fully_connected(b, op, partial(geometry.flatten_fc, b, op))


def average_pool_2d(b: GraphBuilder, op: Operator) -> None:
    (int16 if is_int16(b, op.inputs[0]) else int8).average_pool(b, op, geometry.pool_window(op))


def mean(b: GraphBuilder, op: Operator) -> None:
    """int8 / uint8 and 16x8 alike (``int8.mean``)."""
    int8.mean(b, op, geometry.reduction_axes(b, op), geometry.keep_dims(op))


def reduce_sum(b: GraphBuilder, op: Operator) -> None:
    exact_reduce.sum_(b, op, geometry.reduction_axes(b, op), geometry.keep_dims(op))


def reduce_prod(b: GraphBuilder, op: Operator) -> None:
    exact_reduce.reduce_prod(b, op, geometry.reduction_axes(b, op), geometry.keep_dims(op))


def softmax(b: GraphBuilder, op: Operator) -> None:
    """int16 input: the 16x8 kernel; int8 / uint8 input: an int16 output is gemmlowp's fixed
    point, not the float table."""
    if is_int16(b, op.inputs[0]):
        return softmax16.softmax(b, op)
    if is_int16(b, op.outputs[0]):
        return softmax_int16_out.softmax(b, op)
    return exact_softmax.softmax(b, op)
