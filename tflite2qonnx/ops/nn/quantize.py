"""QUANTIZE and DEQUANTIZE: in QONNX they become Quant nodes or vanish into the float graph."""

from __future__ import annotations

import numpy as np

from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.minifloat import FORMATS
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.kernel_rounding import int8_scales, round_as_kernel


def quantize(b: GraphBuilder, op: Operator) -> None:
    """float -> int, or int -> int requantization: a Quant node with the output's parameters.
    The kernels its record names run instead where they apply: the requantization from int16
    (always), between integer grids and from float onto a zero point (--bit-exact).
    int8 / uint8 to int8 / uint8: rounded as the kernel's ``MultiplyByQuantizedMultiplier``
    rounds (``kernel_rounding``), twice where ``s_in / s_out`` shifts right (XNNPACK rounds
    once: 58% equal to the builtin kernel where the ratio is 0.5)."""
    x = b.input(op.inputs[0])
    scales = int8_scales(b, op, 1) if b.tensor(op.inputs[0]).integer_quantized else None
    if scales is not None:
        s_in, s_out = scales
        x = round_as_kernel(b, x, float(np.float64(s_in) / np.float64(s_out)), s_out, "requantized")
    b.set_output(op.outputs[0], x)


def dequantize(b: GraphBuilder, op: Operator) -> None:
    """The input already holds real values on its grid; float16 constants fold, quantized
    integer constants (weight-only quantization) keep their Quant node: its width and scale
    are what FINN / hls4ml read."""
    src = op.inputs[0]
    tensor = b.tensor(src)
    quantized = tensor.quant is not None or tensor.dtype in FORMATS  # FLOAT8: FloatQuant
    if tensor.data is not None and quantized and tensor.sparsity is None:
        b.alias(op.outputs[0], b.input(src))
        return
    value = b.constant(src)
    if value is not None:
        b.set_constant(op.outputs[0], value)
    else:
        b.alias(op.outputs[0], b.input(src))
