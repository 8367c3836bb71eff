"""QUANTIZE and DEQUANTIZE: in QONNX they become Quant nodes or vanish into the float graph."""

from __future__ import annotations

import numpy as np

from tflite2qonnx.fixed_point import is_int16
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.dispatch import emulates
from tflite2qonnx.ops.exact import int16 as exact_int16
from tflite2qonnx.ops.exact import unary as exact_unary


def quantize(b: GraphBuilder, op: Operator) -> None:
    """float -> int, or int -> int requantization: a Quant node with the output's parameters
    (the kernel's requantization under bit_exact, and from int16 always)."""
    if emulates(b, op) and is_int16(b, op.inputs[0]):
        if exact_int16.quantize(b, op):
            return
    elif b.bit_exact and (exact_unary.convert(b, op) or _float_rounded_first(b, op)):
        return
    b.set_output(op.outputs[0], b.input(op.inputs[0]))


def _float_rounded_first(b: GraphBuilder, op: Operator) -> bool:
    """float -> int with a zero point, bit for bit: TFLite computes zp + round(x / s) (half
    away from zero), Quant round(x / s + zp), which differ on the ties between 0 and -zp
    (x / s = -2.5, zp = 5: 2 against 3). The rounding comes first here, on the output's scale
    with no zero point and 32 bits; the output's Quant is then the identity on its result."""
    src, dst = b.tensor(op.inputs[0]), b.tensor(op.outputs[0])
    args = dst.quant
    if src.quant is not None or args is None or args.axis is not None:
        return False
    if not np.any(np.asarray(args.zero_point) != 0):
        return False  # Quant's rounding is TFLite's then
    rounded = b.quant(
        b.input(op.inputs[0]),
        "rounded",
        dst.shape,
        scale=np.float32(np.asarray(args.scale).reshape(())),
        bit_width=32,
        signed=True,
        rounding_mode="HALF_UP",
    )
    b.set_output(op.outputs[0], rounded)
    return True


def dequantize(b: GraphBuilder, op: Operator) -> None:
    """The input already holds real values on its grid; constants (float16, int8) fold."""
    src = op.inputs[0]
    value = b.constant(src)
    if value is not None:
        b.set_constant(op.outputs[0], value)
    else:
        b.alias(op.outputs[0], b.input(src))
