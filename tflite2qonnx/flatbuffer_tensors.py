"""Decoding a flatbuffer's tensors: shapes, buffers, constant data, quantization, sparsity.

``TensorDecoder`` is the lower half of the reader (``tflite2qonnx.flatbuffer``): the cursor
that turns a bad offset or length into a one-line InputError, and every tensor-level check.
"""

from __future__ import annotations

import math
from typing import Any

import flatbuffers
import numpy as np
import tflite

from qonnx_ingest.errors import ConversionError, InputError
from tflite2qonnx.dtypes import PACKED_TYPES, TENSOR_TYPES, numpy_dtype, unpack_sub_byte
from tflite2qonnx.minifloat import FORMATS
from tflite2qonnx.minifloat import check as check_minifloat
from tflite2qonnx.model import DimensionMetadata, Quantization, Shape, Sparsity, Tensor
from tflite2qonnx.schema import (
    DIMENSION_TYPES,
    SPARSE_INDEX_VECTORS,
    TENSOR_TYPE_NAMES,
    as_tuple,
    enum_name,
    quote,
    snake,
)

# No real single tensor comes near this; it only stops absurd shapes (e.g. 2**31 per dim) from
# being taken at face value by later stages that would try to allocate or reason about them.
_MAX_TENSOR_BYTES = 1 << 40

# QuantizationParameters.details union members (LiteRT's schema; the tflite bindings know 0-1)
_NO_DETAILS, _CUSTOM_DETAILS, _BLOCKWISE = 0, 1, 2
_DETAILS_NAMES = {3: "multi-axis quantization"}


class Cursor:
    """Where in the file we are (``loc``), for error messages, and checked access to it."""

    def __init__(self, data: bytes, name: str):
        self.data = data
        self.name = name
        self.loc = ""
        self.model: Any = None
        self.n_buffers = 0
        self._buffer_cache: dict[int, np.ndarray] = {}
        self.bias_axis_fixes: list[str] = []

    # -- errors ---------------------------------------------------------------------------

    def fail(self, message: str, loc: str | None = None) -> InputError:
        loc = self.loc if loc is None else loc
        return InputError(message, where=f"{self.name}: {loc}" if loc else self.name)

    def text(self, raw: bytes | None, what: str) -> str | None:
        """A string field as text; bytes that are not UTF-8 are a malformed file."""
        if raw is None:
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(
                f"{what} is not valid UTF-8 (byte {exc.start} of {len(raw)}: {raw[:24]!r})"
            ) from None

    def count(self, obj: Any, field: str, elem_size: int = 4) -> int:
        """Vector length, refusing lengths the file cannot possibly hold (garbage offsets)."""
        n = int(getattr(obj, field + "Length")())
        if n < 0 or n * elem_size > len(self.data):
            raise self.fail(f"{snake(field)} vector claims {n} elements, more than the file holds")
        return n

    def buffer_bytes(self, index: int) -> np.ndarray:
        """uint8 read-only view of a buffer's bytes (inline or stored after the flatbuffer)."""
        cached = self._buffer_cache.get(index)
        if cached is not None:
            return cached
        empty = np.zeros(0, np.uint8)
        if index == 0 or index >= self.n_buffers:  # buffer 0 is the empty sentinel
            return empty
        buf = self.model.Buffers(index)
        raw = buf.DataAsNumpy()
        if isinstance(raw, np.ndarray) and raw.size:
            out = raw
        else:
            # Large models keep data outside the flatbuffer; offset is from the file start and
            # "only valid if > 1" per the schema.
            offset, size = int(buf.Offset()), int(buf.Size())
            if offset > 1:
                if offset + size > len(self.data):
                    raise self.fail(
                        f"buffer {index} data [{offset}, {offset + size}) lies beyond the end of "
                        f"the file ({len(self.data)} bytes)"
                    )
                out = np.frombuffer(self.data, np.uint8, count=size, offset=offset)
            else:
                out = empty
        self._buffer_cache[index] = out
        return out


class TensorDecoder(Cursor):
    """Reads one tensor at a time into the data model, checking it against the file."""

    def read_tensor(self, sg_index: int, t: Any, index: int) -> Tensor:
        self.loc = f"subgraph {sg_index} tensor {index}"
        self._subgraph = sg_index
        name = self.text(t.Name(), "name") or ""
        self.loc = f"subgraph {sg_index} tensor {index} {quote(name)}"

        type_code = int(t.Type())
        type_name = TENSOR_TYPE_NAMES.get(type_code)
        if type_name is None:
            raise self.fail(f"unknown tensor type {type_code}")
        dtype = type_name.lower()

        self.count(t, "Shape")
        self.count(t, "ShapeSignature")
        shape = as_tuple(t.ShapeAsNumpy())
        shape_signature = as_tuple(t.ShapeSignatureAsNumpy()) if t.ShapeSignatureLength() else shape
        if len(shape_signature) != len(shape):
            raise self.fail(
                f"shape_signature {list(shape_signature)} has a different rank than "
                f"shape {list(shape)}"
            )
        for label, dims in (("shape", shape), ("shape_signature", shape_signature)):
            if any(d < -1 for d in dims):
                raise self.fail(f"{label} {list(dims)} has a negative dimension")
        n_elements = math.prod(shape)
        static = all(d >= 0 for d in shape)
        if static:
            spec = TENSOR_TYPES[type_name].numpy
            itemsize = (
                1
                if spec is None or spec in PACKED_TYPES
                else np.dtype(numpy_dtype(type_name)).itemsize
            )
            if n_elements * itemsize > _MAX_TENSOR_BYTES:
                raise self.fail(f"shape {list(shape)} is absurdly large ({n_elements} elements)")

        buffer_index = int(t.Buffer())
        if buffer_index != 0 and buffer_index >= self.n_buffers:
            raise self.fail(
                f"buffer index {buffer_index} out of range (model has {self.n_buffers} buffers)"
            )

        sparsity = self.read_sparsity(t.Sparsity(), len(shape))
        quantization = self.read_quantization(t.Quantization(), shape, shape_signature)
        if quantization is not None and quantization.block_size and dtype == "int2":
            # measured on ai-edge-quantizer's dynamic_wi2b32: LiteRT 2.3's optimized kernel is
            # 0.7 off the dequantized weights, the reference kernel returns the bias alone and
            # XNNPACK refuses it: no kernel to agree with
            raise ConversionError(
                "blockwise int2 weights: LiteRT's kernels do not compute them",
                where=f"{self.name}: {self.loc}",
            )
        if quantization is not None and dtype.startswith(("int", "uint")):
            scale = quantization.scale
            # a denormal scale is as unusable as zero: its reciprocal overflows float32
            usable = np.isfinite(scale) & (scale >= np.finfo(np.float32).tiny)
            if not np.all(usable):
                bad = float(np.asarray(scale)[~usable][0])
                raise self.fail(f"quantization scale {bad} is not a positive finite normal number")

        raw = self.buffer_bytes(buffer_index)
        data = None
        if raw.size:
            data = self.tensor_data(raw, type_name, shape, static, sparse=sparsity is not None)

        where = f"tensor {index} {quote(name)}"
        tensor = Tensor(
            index=index,
            name=name,
            shape=Shape(shape, where),
            shape_signature=Shape(shape_signature, where),
            dtype=dtype,
            buffer=buffer_index,
            data=data,
            quantization=quantization,
            is_variable=bool(t.IsVariable()),
            sparsity=sparsity,
        )
        if dtype in FORMATS:  # FLOAT8: constants only (minifloat.py)
            check_minifloat(tensor, f"{self.name}: {self.loc}")
        return tensor

    def tensor_data(
        self, raw: np.ndarray, type_name: str, shape: tuple[int, ...], static: bool, sparse: bool
    ) -> np.ndarray:
        if type_name == "STRING":
            return self.string_data(raw, shape, static)
        if type_name in ("RESOURCE", "VARIANT"):
            return raw  # opaque; no element layout to interpret
        if not static and not sparse:
            raise self.fail(f"constant tensor has a non-static shape {list(shape)}")
        n_elements = math.prod(shape)
        packed = PACKED_TYPES.get(TENSOR_TYPES[type_name].numpy)
        if packed is not None:
            values = unpack_sub_byte(raw, *packed)
            if sparse:
                return values
            per_byte = 8 // packed[0]
            if raw.size != -(-n_elements // per_byte):
                raise self.fail(
                    f"buffer holds {raw.size} bytes but shape {list(shape)} of "
                    f"{type_name.lower()} needs {-(-n_elements // per_byte)}"
                )
            return values[:n_elements].reshape(shape)
        dtype = np.dtype(numpy_dtype(type_name))
        if sparse:
            if raw.size % dtype.itemsize:
                raise self.fail(
                    f"sparse buffer of {raw.size} bytes is not a whole number of "
                    f"{type_name.lower()} values"
                )
            return raw.view(dtype)
        expected = n_elements * dtype.itemsize
        if raw.size != expected:
            raise self.fail(
                f"buffer holds {raw.size} bytes but shape {list(shape)} of "
                f"{type_name.lower()} needs {expected}"
            )
        return raw.view(dtype).reshape(shape)

    def string_data(self, raw: np.ndarray, shape: tuple[int, ...], static: bool) -> np.ndarray:
        """TFLite string buffer: int32 count, int32 offsets[count + 1], then the bytes."""
        blob = raw.tobytes()
        if len(blob) < 4:
            raise self.fail(f"string buffer of {len(blob)} bytes has no element count")
        count = int.from_bytes(blob[:4], "little", signed=True)
        header = 4 * (count + 2)
        if count < 0 or header > len(blob):
            raise self.fail(f"string buffer claims {count} strings but holds {len(blob)} bytes")
        offsets = np.frombuffer(blob, "<i4", count=count + 1, offset=4).astype(np.int64)
        if offsets[0] < header or np.any(np.diff(offsets) < 0) or offsets[-1] > len(blob):
            raise self.fail("string buffer has inconsistent offsets")
        if static and count != math.prod(shape):
            raise self.fail(f"string buffer holds {count} strings but shape is {list(shape)}")
        values = np.empty(count, dtype=object)
        for k in range(count):
            values[k] = blob[offsets[k] : offsets[k + 1]]
        out = values.reshape(shape) if static else values
        out.flags.writeable = False
        return out

    def read_quantization(
        self, q: Any, shape: tuple[int, ...], shape_signature: tuple[int, ...]
    ) -> Quantization | None:
        if q is None:
            return None
        details = int(q.DetailsType())
        if details == _BLOCKWISE:
            return self.read_blockwise(q.Details(), shape)
        if details not in (_NO_DETAILS, _CUSTOM_DETAILS):
            # LiteRT's multi-axis quantization keeps its scales in other tensors; reading the
            # stored integers without them would compute wrong numbers.
            kind = _DETAILS_NAMES.get(details, f"quantization details type {details}")
            raise ConversionError(
                f"{kind} is not supported (its scales live in other tensors)",
                where=f"{self.name}: {self.loc}",
            )
        n_scale = self.count(q, "Scale")
        if n_scale == 0:
            return None  # min/max-only or custom details: not affine quantization
        n_zp = self.count(q, "ZeroPoint", 8)
        scale = np.array(q.ScaleAsNumpy(), dtype=np.float32)
        if n_zp == 0:
            zero_point = np.zeros(n_scale, np.int64)
        elif n_zp == n_scale or n_zp == 1:
            zero_point = np.broadcast_to(
                np.asarray(q.ZeroPointAsNumpy(), dtype=np.int64), (n_scale,)
            ).copy()
        else:
            raise self.fail(f"quantization has {n_scale} scales but {n_zp} zero points")
        qdim = int(q.QuantizedDimension())
        if n_scale > 1:
            rank = len(shape)
            if not 0 <= qdim < rank:
                if rank == 1 and shape[0] == n_scale:
                    # TOCO-era files (e.g. TFLM person_detect) copy the weights' quantized
                    # dimension onto rank-1 per-channel biases; axis 0 is the only reading.
                    self.bias_axis_fixes.append(self.loc)
                    qdim = 0
                else:
                    raise self.fail(
                        f"quantized_dimension {qdim} out of range for rank {rank} "
                        f"(per-axis quantization with {n_scale} scales)"
                    )
            if shape_signature[qdim] != -1 and shape[qdim] != n_scale:
                raise self.fail(
                    f"{n_scale} scales for quantized_dimension {qdim} of size {shape[qdim]}"
                )
        scale.flags.writeable = False
        zero_point.flags.writeable = False
        return Quantization(scale=scale, zero_point=zero_point, quantized_dimension=qdim)

    def read_blockwise(self, table: Any, shape: tuple[int, ...]) -> Quantization:
        """LiteRT's BlockwiseQuantization {scales, zero_points: tensor indices, block_size,
        block_shape}, read from the union table by field slot (the tflite bindings lack it).

        The scales tensor has the weight's shape with one axis divided by ``block_size``: one
        scale per block of ``block_size`` consecutive values along that axis."""
        where = f"{self.name}: {self.loc}"
        tab = table  # flatbuffers Table of the union member

        def field(slot: int, default: int) -> int:
            o = tab.Offset(4 + 2 * slot)
            return int(tab.Get(flatbuffers.number_types.Int32Flags, o + tab.Pos)) if o else default

        scales_idx, zp_idx, block = field(0, -1), field(1, -1), field(2, 0)
        if tab.Offset(10) and tab.VectorLen(tab.Offset(10)):
            raise ConversionError(
                "blockwise quantization with a block_shape is not supported", where
            )
        scale = self.side_tensor(scales_idx, "scales", where)
        if block <= 0 or scale.ndim != len(shape):
            raise self.fail(
                f"blockwise quantization: block_size {block}, scales {list(scale.shape)}"
            )
        axes = [a for a in range(len(shape)) if scale.shape[a] != shape[a]]
        if len(axes) != 1 or scale.shape[axes[0]] * block != shape[axes[0]]:
            raise self.fail(
                f"blockwise quantization: scales {list(scale.shape)} do not divide shape "
                f"{list(shape)} into blocks of {block}"
            )
        if zp_idx >= 0:
            zero_point = self.side_tensor(zp_idx, "zero_points", where).astype(np.int64)
            if zero_point.shape != scale.shape:
                raise self.fail(
                    f"blockwise zero_points {list(zero_point.shape)} differ from scales"
                )
        else:
            zero_point = np.zeros(scale.shape, np.int64)
        scale = scale.astype(np.float32)
        scale.flags.writeable = False
        zero_point.flags.writeable = False
        return Quantization(
            scale=scale, zero_point=zero_point, quantized_dimension=axes[0], block_size=block
        )

    def side_tensor(self, idx: int, what: str, where: str) -> np.ndarray:
        """A constant a quantization refers to by tensor index (blockwise scales)."""
        sg = self.model.Subgraphs(self._subgraph)
        if not 0 <= idx < sg.TensorsLength():
            raise self.fail(f"blockwise {what} tensor {idx} out of range")
        t = sg.Tensors(idx)
        type_name = TENSOR_TYPE_NAMES.get(int(t.Type()), "")
        if type_name not in ("FLOAT32", "FLOAT16", "INT8", "INT32"):
            raise ConversionError(f"blockwise {what} of type {type_name or t.Type()}", where)
        shape = as_tuple(t.ShapeAsNumpy())
        raw = self.buffer_bytes(int(t.Buffer()))
        dtype = np.dtype(numpy_dtype(type_name))
        if raw.size != math.prod(shape) * dtype.itemsize:
            raise self.fail(f"blockwise {what} tensor {idx} has no constant data of its shape")
        return raw.view(dtype).reshape(shape)

    def read_sparsity(self, sp: Any, rank: int) -> Sparsity | None:
        if sp is None:
            return None
        self.count(sp, "TraversalOrder")
        self.count(sp, "BlockMap")
        traversal_order = as_tuple(sp.TraversalOrderAsNumpy())
        block_map = as_tuple(sp.BlockMapAsNumpy())
        n_dims = len(traversal_order)
        if sorted(traversal_order) != list(range(n_dims)):
            raise self.fail(
                f"sparsity traversal_order {list(traversal_order)} is not a permutation"
            )
        if n_dims != rank + len(block_map):
            raise self.fail(
                f"sparsity traversal_order has {n_dims} dims, expected rank {rank} + "
                f"{len(block_map)} block dims"
            )
        if any(not 0 <= b < rank for b in block_map):
            raise self.fail(f"sparsity block_map {list(block_map)} out of range for rank {rank}")
        n_meta = self.count(sp, "DimMetadata")
        if n_meta != n_dims:
            raise self.fail(f"sparsity has {n_meta} dim_metadata entries for {n_dims} dims")
        dims = []
        for k in range(n_meta):
            dm = sp.DimMetadata(k)
            fmt = enum_name(DIMENSION_TYPES, int(dm.Format()))
            segments = self.index_vector(dm.ArraySegmentsType(), dm.ArraySegments())
            indices = self.index_vector(dm.ArrayIndicesType(), dm.ArrayIndices())
            if fmt == "SPARSE_CSR" and (segments is None or indices is None):
                raise self.fail(f"sparse dimension {k} lacks array_segments / array_indices")
            if fmt not in ("DENSE", "SPARSE_CSR"):
                raise self.fail(f"sparse dimension {k} has unknown format {fmt}")
            dims.append(
                DimensionMetadata(
                    format=fmt,
                    dense_size=int(dm.DenseSize()),
                    array_segments=segments,
                    array_indices=indices,
                )
            )
        return Sparsity(
            traversal_order=traversal_order, block_map=block_map, dim_metadata=tuple(dims)
        )

    def index_vector(self, type_code: int, table: Any) -> np.ndarray | None:
        if type_code == 0 or table is None:
            return None
        class_name = SPARSE_INDEX_VECTORS.get(int(type_code))
        if class_name is None:
            raise self.fail(f"unknown sparse index vector type {type_code}")
        vec = getattr(tflite, class_name)()
        vec.Init(table.Bytes, table.Pos)
        values = vec.ValuesAsNumpy()
        out = np.array(values if isinstance(values, np.ndarray) else [], dtype=np.int64)
        out.flags.writeable = False
        return out
