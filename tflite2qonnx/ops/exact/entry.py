"""--bit-exact entry points where one operator picks between kernels by its operands: the
functions operator records name as ``kernel`` when no single kernel function fits."""

from __future__ import annotations

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.exact import bmm16, int8, int16


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
