"""QUANTIZE and DEQUANTIZE: in QONNX they become Quant nodes or vanish into the float graph."""

from __future__ import annotations

import numpy as np

from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.exact import int16 as exact_int16


def quantize(b: GraphBuilder, op: Operator) -> None:
    """float -> int, or int -> int requantization: a Quant node with the output's parameters
    (the kernel's requantization under bit_exact, its record's ``table``; from int16 always,
    ``from_int16``)."""
    if b.bit_exact and _float_rounded_first(b, op):
        return
    b.set_output(op.outputs[0], b.input(op.inputs[0]))


def from_int16(b: GraphBuilder, op: Operator) -> None:
    """QUANTIZE from int16: the 16x8 kernel's requantization where it is emulated, else the
    output's Quant node alone."""
    if not exact_int16.quantize(b, op):
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
