"""How a TFLite tensor's quantization maps onto a QONNX Quant node.

TFLite's real = scale * (q - zero_point) is exactly QONNX's dequantize(quantize(x)) (seed 002,
QONNX paper Eq. 1-4), so every quantized TFLite tensor becomes a float tensor on that grid,
produced by a Quant node with the tensor's own scale, zero point and storage width.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.reader import Tensor

# storage dtype -> (bit width, signed)
INTEGER_TYPES = {
    "int4": (4, True),
    "int8": (8, True),
    "uint8": (8, False),
    "int16": (16, True),
    "int32": (32, True),
    "int64": (64, True),  # 16x8 quantization's biases
}
# TFLite quantizes with std::round (ties away from zero), which qonnx calls HALF_UP.
ROUNDING_MODE = "HALF_UP"


@dataclass(frozen=True)
class QuantArgs:
    """Keyword arguments for ``qonnx_ingest.quant.make_quant``, in the TFLite tensor's layout."""

    scale: np.ndarray
    zero_point: np.ndarray
    bit_width: int
    signed: bool
    narrow: bool
    axis: int | None

    def as_kwargs(self) -> dict:
        return {
            "scale": self.scale,
            "zero_point": self.zero_point,
            "bit_width": self.bit_width,
            "signed": self.signed,
            "narrow": self.narrow,
            "axis": self.axis,
            "rounding_mode": ROUNDING_MODE,
        }


def quant_args(tensor: Tensor) -> QuantArgs | None:
    """The Quant parameters of an integer-quantized tensor, or None for a float tensor."""
    q = tensor.quantization
    if q is None or tensor.dtype not in INTEGER_TYPES:
        return None
    bits, signed = INTEGER_TYPES[tensor.dtype]
    per_axis = q.per_axis
    scale = q.scale.astype(np.float64)
    zero_point = q.zero_point.astype(np.float64)
    if not per_axis:
        scale, zero_point = scale.reshape(()), zero_point.reshape(())
    return QuantArgs(
        scale=scale,
        zero_point=zero_point,
        bit_width=bits,
        signed=signed,
        narrow=_is_narrow(tensor),
        axis=_axis(tensor) if per_axis else None,
    )


def dequantize(tensor: Tensor) -> np.ndarray:
    """A constant tensor's real values as float32 (int: scale * (q - zero_point))."""
    if tensor.data is None:
        raise ConversionError(
            "expected a constant tensor", f"tensor {tensor.index} '{tensor.name}'"
        )
    args = quant_args(tensor)
    if args is None:
        if tensor.quantization is not None and tensor.dtype in ("int8", "int16", "uint8"):
            raise ConversionError("integer constant without scale", f"tensor '{tensor.name}'")
        return np.asarray(tensor.data, dtype=np.float32)
    scale, zero_point = args.scale, args.zero_point
    if args.axis is not None:
        bshape = [1] * len(tensor.shape)
        bshape[args.axis] = -1
        scale, zero_point = scale.reshape(bshape), zero_point.reshape(bshape)
    return (scale * (tensor.data.astype(np.float64) - zero_point)).astype(np.float32)


def _is_narrow(tensor: Tensor) -> bool:
    """int8 weights use TFLite's symmetric range [-127, 127]; say so when the data agrees."""
    if tensor.dtype != "int8" or tensor.data is None or tensor.quantization is None:
        return False
    return bool(np.all(tensor.quantization.zero_point == 0) and np.min(tensor.data) >= -127)


def _axis(tensor: Tensor) -> int:
    axis = tensor.quantization.quantized_dimension
    if not 0 <= axis < len(tensor.shape):
        raise ConversionError(
            f"quantized_dimension {axis} is not an axis of shape {tensor.shape}",
            f"tensor '{tensor.name}'",
        )
    return axis
