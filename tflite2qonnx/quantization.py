"""How a TFLite tensor's quantization maps onto a QONNX Quant node.

TFLite's real = scale * (q - zero_point) is exactly QONNX's dequantize(quantize(x)) (seed 002,
QONNX paper Eq. 1-4), so every quantized TFLite tensor becomes a float tensor on that grid,
produced by a Quant node with the tensor's own scale, zero point and storage width
(``Tensor.quant``, computed once per tensor in the data model).
"""

from __future__ import annotations

import numpy as np

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.minifloat import FORMATS, scaled
from tflite2qonnx.model import Tensor


def dequantize(tensor: Tensor) -> np.ndarray:
    """A constant tensor's real values as float32 (int: scale * (q - zero_point))."""
    if tensor.data is None:
        raise ConversionError(
            "expected a constant tensor", f"tensor {tensor.index} '{tensor.name}'"
        )
    if tensor.dtype in FORMATS:  # FLOAT8: the decoded values times the scale, if any
        return scaled(tensor)
    args = tensor.quant
    if args is None:
        return np.asarray(tensor.data, dtype=np.float32)
    scale, zero_point = args.scale, args.zero_point
    if args.axis is not None:
        bshape = [1] * len(tensor.shape)
        bshape[args.axis] = -1
        scale, zero_point = scale.reshape(bshape), zero_point.reshape(bshape)
    return (scale * (tensor.data.astype(np.float64) - zero_point)).astype(np.float32)
