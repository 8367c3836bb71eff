"""TFLite tensor types, one row each: how an element is stored, its integer grid, its ONNX type.

The reader, the quantization of a tensor, the graph boundary and the bit-exact kernels all read
this one table instead of keeping a dtype table each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from onnx import TensorProto


@dataclass(frozen=True)
class TensorType:
    """One TensorType of the schema.

    ``numpy``: one stored element, little endian as flatbuffers (None: no fixed-size element;
    INT4 / UINT4 are packed two per byte, INT2 four). ``onnx``: the element type where the
    graph keeps the dtype (None: exposed as float, or no ONNX equivalent). ``bits`` /
    ``signed``: the integer storage a Quant node can reproduce (None: not a quantizable
    integer).
    """

    numpy: str | None
    onnx: int | None = None
    bits: int | None = None
    signed: bool = True


# TensorType member name -> its row
TENSOR_TYPES: dict[str, TensorType] = {
    "FLOAT32": TensorType("<f4"),
    "FLOAT16": TensorType("<f2"),
    "FLOAT64": TensorType("<f8", TensorProto.DOUBLE),
    "INT8": TensorType("i1", TensorProto.INT8, 8),
    "UINT8": TensorType("u1", TensorProto.UINT8, 8, signed=False),
    "INT16": TensorType("<i2", TensorProto.INT16, 16),
    "UINT16": TensorType("<u2", TensorProto.UINT16),
    "INT32": TensorType("<i4", TensorProto.INT32, 32),
    "UINT32": TensorType("<u4", TensorProto.UINT32),
    "INT64": TensorType("<i8", TensorProto.INT64, 64),  # 16x8 quantization's biases
    "UINT64": TensorType("<u8", TensorProto.UINT64),
    "BOOL": TensorType("?", TensorProto.BOOL),
    "COMPLEX64": TensorType("<c8", TensorProto.COMPLEX64),
    "COMPLEX128": TensorType("<c16", TensorProto.COMPLEX128),
    "BFLOAT16": TensorType("bfloat16", TensorProto.BFLOAT16),
    "INT4": TensorType("int4", bits=4),
    "INT2": TensorType("int2", bits=2),  # LiteRT's schema (ai-edge-quantizer's wi2 recipes)
    "UINT4": TensorType("uint4", bits=4, signed=False),
    # OCP FP8 (ml_dtypes' float8 types decode them): constants only, as FloatQuant (minifloat.py)
    "FLOAT8_E4M3FN": TensorType("float8_e4m3fn"),
    "FLOAT8_E5M2": TensorType("float8_e5m2"),
    "STRING": TensorType(None),
    "RESOURCE": TensorType(None),
    "VARIANT": TensorType(None),
}

# the float types whose values the graph reads as float32 (float16 widened, FLOAT8 decoded)
FLOAT_TYPES = frozenset({"float32", "float16", "float8_e4m3fn", "float8_e5m2"})
# Tensor.dtype (the lower-cased name) -> (bit width, signed) of the quantizable integers
INTEGER_TYPES: dict[str, tuple[int, bool]] = {
    name.lower(): (t.bits, t.signed) for name, t in TENSOR_TYPES.items() if t.bits is not None
}
# the 8-bit activations whose builtin kernels --bit-exact emulates
INT8_TYPES = {dtype: grid for dtype, grid in INTEGER_TYPES.items() if grid[0] == 8}
# Tensor.dtype -> ONNX element type, for tensors that are not exposed as float at the boundary
ONNX_TYPES: dict[str, int] = {
    name.lower(): t.onnx for name, t in TENSOR_TYPES.items() if t.onnx is not None
}
# the sub-byte types: numpy spec -> (bits, signed) of their packed elements
PACKED_TYPES: dict[str, tuple[int, bool]] = {
    t.numpy: (t.bits, t.signed)
    for t in TENSOR_TYPES.values()
    if t.numpy in ("int4", "uint4", "int2")
}


def numpy_dtype(type_name: str) -> Any:
    spec = TENSOR_TYPES[type_name].numpy
    if spec in ("float8_e4m3fn", "float8_e5m2"):
        import ml_dtypes  # onnx depends on it

        return np.dtype(getattr(ml_dtypes, spec))
    if spec == "bfloat16":
        try:
            import ml_dtypes  # optional; ships with onnx
        except ImportError:  # pragma: no cover - fall back to the raw bit pattern
            return np.dtype("<u2")
        return np.dtype(ml_dtypes.bfloat16)
    return spec


def unpack_sub_byte(raw: np.ndarray, bits: int, signed: bool) -> np.ndarray:
    """``8 // bits`` values per byte, lowest bits first (LiteRT's packing of INT4, UINT4 and
    INT2, as its ``UnpackPackedIntToInt8`` reads them), sign-extended when ``signed``."""
    per_byte, mask = 8 // bits, (1 << bits) - 1
    raw = np.asarray(raw, np.uint8)
    out = np.empty(raw.size * per_byte, np.int8)
    for k in range(per_byte):
        out[k::per_byte] = ((raw >> (k * bits)) & mask).astype(np.int8)
    if signed:
        half = 1 << (bits - 1)
        out = (out ^ half) - half  # sign-extend
    out.flags.writeable = False
    return out
