"""QUANTIZE and DEQUANTIZE: in QONNX they become Quant nodes or vanish into the float graph."""

from __future__ import annotations

from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.minifloat import FORMATS
from tflite2qonnx.model import Operator


def quantize(b: GraphBuilder, op: Operator) -> None:
    """float -> int, or int -> int requantization: a Quant node with the output's parameters.
    The kernels its record names run instead where they apply: the requantization from int16
    (always), between integer grids and from float onto a zero point (--bit-exact), and
    by default between int8 / uint8 grids where ``s_in / s_out`` shifts right (twice rounded
    as the builtin kernel rounds, ``ops.nn.quantize_rounding``)."""
    b.set_output(op.outputs[0], b.input(op.inputs[0]))


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
