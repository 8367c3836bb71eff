"""QUANTIZE and DEQUANTIZE: in QONNX they become Quant nodes or vanish into the float graph."""

from __future__ import annotations

from tflite2qonnx.fixed_point import emulates, is_int16
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops import exact_int16, exact_unary


def quantize(b: GraphBuilder, op: Operator) -> None:
    """float -> int, or int -> int requantization: a Quant node with the output's parameters
    (the kernel's requantization under bit_exact, and from int16 always)."""
    if emulates(b, op) and is_int16(b, op.inputs[0]):
        if exact_int16.quantize(b, op):
            return
    elif b.bit_exact and exact_unary.convert(b, op):
        return
    b.set_output(op.outputs[0], b.input(op.inputs[0]))


def dequantize(b: GraphBuilder, op: Operator) -> None:
    """The input already holds real values on its grid; constants (float16, int8) fold."""
    src = op.inputs[0]
    value = b.constant(src)
    if value is not None:
        b.set_constant(op.outputs[0], value)
    else:
        b.alias(op.outputs[0], b.input(src))
