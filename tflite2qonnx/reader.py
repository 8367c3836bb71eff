"""Read a ``.tflite`` flatbuffer into a validated, read-only model object.

The converter works on plain dataclasses instead of the generated flatbuffer accessors so that
every malformed-file condition is found here, once, and reported as a one-line
:class:`~qonnx_ingest.errors.InputError` naming the file and the exact subgraph / operator /
tensor, instead of surfacing later as an ``IndexError`` deep inside a lowering rule.

Only the ``tflite`` flatbuffer bindings are used (never TensorFlow).  Constant data is exposed as
read-only numpy views of the file bytes (no per-element Python loops), so reading a multi-MB
model takes milliseconds.
"""

from __future__ import annotations

import math
import os
import re
import struct
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tflite

from qonnx_ingest.errors import ConversionWarning, InputError

__all__ = [
    "DimensionMetadata",
    "MissingOperandError",
    "MissingOptionError",
    "OpCode",
    "Operator",
    "Quantization",
    "SignatureDef",
    "Sparsity",
    "Subgraph",
    "TFLiteModel",
    "Tensor",
    "read_model",
]

_FILE_IDENTIFIER = b"TFL3"
_SCHEMA_VERSION = 3
# No real single tensor comes near this; it only stops absurd shapes (e.g. 2**31 per dim) from
# being taken at face value by later stages that would try to allocate or reason about them.
_MAX_TENSOR_BYTES = 1 << 40


def _enum_names(enum_cls: type) -> dict[int, str]:
    """value -> member name of a generated flatbuffers enum class."""
    return {
        v: k
        for k, v in vars(enum_cls).items()
        if not k.startswith("_") and isinstance(v, int) and not isinstance(v, bool)
    }


def _enum_name(names: dict[int, str], value: int) -> str:
    return names.get(value, f"UNKNOWN_{value}")


_BUILTIN_OPERATOR_NAMES = _enum_names(tflite.BuiltinOperator)
_TENSOR_TYPE_NAMES = _enum_names(tflite.TensorType)
_OPTIONS_UNION = _enum_names(tflite.BuiltinOptions)
# Newer schemas put StableHLO op options in a second union (Operator.builtin_options_2).
_OPTIONS2_UNION = _enum_names(tflite.BuiltinOptions2) if hasattr(tflite, "BuiltinOptions2") else {}
_DIMENSION_TYPES = _enum_names(tflite.DimensionType)
_SPARSE_INDEX_VECTORS = _enum_names(tflite.SparseIndexVector)

# TensorType member name -> numpy dtype of one stored element (little endian, as flatbuffers).
# STRING / RESOURCE / VARIANT have no fixed-size element; INT4 is packed two per byte.
_NUMPY_DTYPES: dict[str, str | None] = {
    "FLOAT32": "<f4",
    "FLOAT16": "<f2",
    "FLOAT64": "<f8",
    "INT8": "i1",
    "UINT8": "u1",
    "INT16": "<i2",
    "UINT16": "<u2",
    "INT32": "<i4",
    "UINT32": "<u4",
    "INT64": "<i8",
    "UINT64": "<u8",
    "BOOL": "?",
    "COMPLEX64": "<c8",
    "COMPLEX128": "<c16",
    "BFLOAT16": "bfloat16",
    "INT4": "int4",
    "STRING": None,
    "RESOURCE": None,
    "VARIANT": None,
}

# Options fields whose integer value is a schema enum.  Explicit on purpose: a field name alone
# does not say which enum it uses, and a wrong guess would silently mislabel a value.
_ENUM_FIELDS: dict[str, dict[int, str]] = {
    "FusedActivationFunction": _enum_names(tflite.ActivationFunctionType),
    "Padding": _enum_names(tflite.Padding),
    "Mode": _enum_names(tflite.MirrorPadMode),
    "Type": _enum_names(tflite.LSHProjectionType),
    "Combiner": _enum_names(tflite.CombinerType),
    "WeightsFormat": _enum_names(tflite.FullyConnectedOptionsWeightsFormat),
    "KernelType": _enum_names(tflite.LSTMKernelType),
    "Algorithm": _enum_names(tflite.RngAlgorithm),
    "ReduceFunction": _enum_names(tflite.ReduceWindowFunction),
    "ComparisonDirection": _enum_names(tflite.StablehloComparisonDirection),
    "CompareType": _enum_names(tflite.StablehloComparisonType),
    "PrecisionConfig": _enum_names(tflite.StablehloPrecisionConfig),
    "CompositeAttributesFormat": _enum_names(tflite.CustomOptionsFormat),
    # TensorType-valued fields (CastOptions, ArgMax/ArgMin, Shape, Unique, Hashtable, bias type)
    "InDataType": _TENSOR_TYPE_NAMES,
    "OutDataType": _TENSOR_TYPE_NAMES,
    "OutType": _TENSOR_TYPE_NAMES,
    "OutputType": _TENSOR_TYPE_NAMES,
    "IdxOutType": _TENSOR_TYPE_NAMES,
    "KeyDtype": _TENSOR_TYPE_NAMES,
    "ValueDtype": _TENSOR_TYPE_NAMES,
    "QuantizedBiasType": _TENSOR_TYPE_NAMES,
}

_SKIP_SUFFIXES = ("AsNumpy", "Length", "IsNone", "Init", "BufferHasIdentifier")

# Options that are a size or a step: the runtime divides by them or loops over them, so zero or
# a negative value (e.g. a stride the writer left out: flatbuffers then reads the default 0) is
# a malformed operator, not a model to convert.
_POSITIVE_OPTIONS = (
    "stride_w",
    "stride_h",
    "stride_d",
    "dilation_w_factor",
    "dilation_h_factor",
    "dilation_d_factor",
    "filter_width",
    "filter_height",
    "block_size",
)

# Operand ranks that TFLite's own kernels require of these operators (their Prepare() refuses
# anything else), as (inputs, outputs); None: any rank. An operand that is absent or omitted
# (-1) is not checked here.
_OPERAND_RANKS: dict[str, tuple[tuple[int | None, ...], tuple[int | None, ...]]] = {
    "CONV_2D": ((4, 4), (4,)),
    "DEPTHWISE_CONV_2D": ((4, 4), (4,)),
    "TRANSPOSE_CONV": ((None, 4, 4), (4,)),
    "CONV_3D": ((5, 5), (5,)),
    "AVERAGE_POOL_2D": ((4,), (4,)),
    "MAX_POOL_2D": ((4,), (4,)),
    "L2_POOL_2D": ((4,), (4,)),
    "SPACE_TO_DEPTH": ((4,), (4,)),
    "DEPTH_TO_SPACE": ((4,), (4,)),
    "LOCAL_RESPONSE_NORMALIZATION": ((4,), (4,)),
    "RESIZE_BILINEAR": ((4,), (4,)),
    "RESIZE_NEAREST_NEIGHBOR": ((4,), (4,)),
}


class _OperandView:
    """What an operand rule sees of one operator: its kind, options, operand shapes and
    constant operands (None for an absent or omitted operand)."""

    def __init__(self, op: Operator, tensors: list[Tensor]):
        self.op, self.kind, self.options = op, op.opcode.builtin, op.options
        self.n_inputs, self.n_outputs = len(op.inputs), len(op.outputs)
        self._tensors = tensors

    def _tensor(self, operands: tuple[int, ...], pos: int) -> Tensor | None:
        if pos < len(operands) and operands[pos] >= 0:
            return self._tensors[operands[pos]]
        return None

    def shape(self, pos: int) -> tuple[int, ...] | None:
        t = self._tensor(self.op.inputs, pos)
        return None if t is None else tuple(t.shape)

    def out(self, pos: int) -> tuple[int, ...] | None:
        t = self._tensor(self.op.outputs, pos)
        return None if t is None else tuple(t.shape)

    def data(self, pos: int) -> np.ndarray | None:
        t = self._tensor(self.op.inputs, pos)
        return None if t is None or t.sparsity is not None else t.data


def _conv_filter(v: _OperandView) -> str | None:
    """A filter without empty dimensions whose channels fit the input's (ranks are checked
    before: CONV_2D [O, H, W, I], DEPTHWISE_CONV_2D [1, H, W, I*M], CONV_3D [D, H, W, I, O])."""
    x, w = v.shape(0), v.shape(1)
    if w is None:
        return None
    if 0 in w:
        return f"filter (input 1) has shape {list(w)}, with a zero-size dimension"
    if x is None or x[-1] <= 0:
        return None
    channels = x[-1]
    if v.kind == "DEPTHWISE_CONV_2D":
        if w[-1] % channels:
            return f"filter (input 1) of shape {list(w)} is not a multiple of {channels} channels"
        return None
    per_group = w[-1] if v.kind == "CONV_2D" else w[3]
    if channels % per_group:
        return f"{channels} input channels do not split into groups of the filter's {per_group}"
    return None


def _pad(v: _OperandView) -> str | None:
    x, paddings = v.shape(0), v.shape(1)
    if paddings is not None:
        if len(paddings) != 2 or paddings[1] != 2:
            return f"paddings (input 1) have shape {list(paddings)}, expected [rank, 2]"
        if x and paddings[0] != len(x):
            return f"paddings (input 1) have {paddings[0]} rows for an input of rank {len(x)}"
    value = v.shape(2)
    if value is not None and math.prod(value) != 1:
        return f"constant_values (input 2) has shape {list(value)}, expected one value"
    return None


def _per_dimension(*positions: int):
    """Inputs ``positions`` hold one value per dimension of input 0 (perm, multiples, begin)."""

    def rule(v: _OperandView) -> str | None:
        x = v.shape(0)
        for pos in positions:
            s = v.shape(pos)
            if x is not None and s is not None and s != (len(x),):
                return (
                    f"input {pos} has shape {list(s)}, expected [{len(x)}] "
                    f"(one value per dimension of the rank-{len(x)} input)"
                )
        return None

    return rule


def _one_axis(v: _OperandView) -> str | None:
    axis = v.shape(1)
    if axis is not None and math.prod(axis) != 1:
        return f"axis (input 1) has shape {list(axis)}, expected a single axis"
    return None


def _reduction(v: _OperandView) -> str | None:
    """Axes: a scalar or a vector of axes of the input; the output keeps what they leave."""
    x, axes_shape, y = v.shape(0), v.shape(1), v.out(0)
    if x is None or axes_shape is None:
        return None
    if len(axes_shape) > 1:
        return f"axes (input 1) have shape {list(axes_shape)}, expected a vector"
    rank, keep = len(x), bool(v.options.get("keep_dims", False))
    axes = v.data(1)
    if axes is not None and axes.dtype.kind in "iuf":
        with np.errstate(invalid="ignore"):  # NaN and inf become out-of-range integers
            values = [int(a) for a in np.rint(np.asarray(axes, np.float64)).reshape(-1)]
        if any(not -rank <= a < rank for a in values):
            return f"axes {values} out of range for an input of rank {rank}"
        low = high = rank if keep else rank - len({a % rank for a in values})
    else:  # computed at conversion time (e.g. behind a DEQUANTIZE): bounds only
        n = math.prod(axes_shape)
        low, high = (rank, rank) if keep else (max(rank - n, 0), rank if n == 0 else rank - 1)
    if y is not None and not low <= len(y) <= high:
        kept = low if low == high else f"{low} to {high}"
        return f"output has shape {list(y)}, but the reduction leaves rank {kept}"
    return None


def _strided_slice(v: _OperandView) -> str | None:
    specs = [v.shape(pos) for pos in (1, 2, 3)]
    lengths = {s for s in specs if s is not None}
    if any(len(s) != 1 for s in lengths) or len(lengths) > 1:
        shown = ", ".join(str(list(s)) for s in specs if s is not None)
        return f"begin, end and strides (inputs 1-3) have shapes {shown}, expected equal [n]"
    return None


def _split(v: _OperandView) -> str | None:
    n = v.options.get("num_splits")
    if n is not None and n != v.n_outputs:
        return f"num_splits is {n} but the operator has {v.n_outputs} outputs"
    return None


def _split_v(v: _OperandView) -> str | None:
    sizes = v.shape(1)
    if sizes is not None and (len(sizes) != 1 or sizes[0] != v.n_outputs):
        return (
            f"size_splits (input 1) has shape {list(sizes)} for {v.n_outputs} outputs, "
            f"expected [{v.n_outputs}]"
        )
    return None


def _resize(v: _OperandView) -> str | None:
    size = v.shape(1)
    if size is not None and size != (2,):
        return f"size (input 1) has shape {list(size)}, expected [2] (new height and width)"
    return None


def _variadic(v: _OperandView) -> str | None:
    return None if v.n_inputs else "has no inputs"


def _concatenation(v: _OperandView) -> str | None:
    y = v.out(0)
    if not v.n_inputs or y is None:
        return _variadic(v)
    rank, axis = len(y), v.options.get("axis", 0)
    if not -rank <= axis < rank:
        return f"axis {axis} is not an axis of the rank-{rank} output"
    for pos in range(v.n_inputs):
        x = v.shape(pos)
        if x is not None and len(x) != rank:
            return f"input {pos} has shape {list(x)}, the output has rank {rank}"
    return None


# Shape facts beyond the rank that those kernels check: each rule returns the problem or None.
_OPERAND_RULES: dict[str, Any] = {
    "ADD_N": _variadic,
    "ARG_MAX": _one_axis,
    "ARG_MIN": _one_axis,
    "CONCATENATION": _concatenation,
    "CONV_2D": _conv_filter,
    "CONV_3D": _conv_filter,
    "CUMSUM": _one_axis,
    "DEPTHWISE_CONV_2D": _conv_filter,
    "EXPAND_DIMS": _one_axis,
    "MEAN": _reduction,
    "MIRROR_PAD": _pad,
    "PAD": _pad,
    "PADV2": _pad,
    "REDUCE_MAX": _reduction,
    "REDUCE_MIN": _reduction,
    "REDUCE_PROD": _reduction,
    "RESIZE_BILINEAR": _resize,
    "RESIZE_NEAREST_NEIGHBOR": _resize,
    "SLICE": _per_dimension(1, 2),
    "SPLIT": _split,
    "SPLIT_V": _split_v,
    "STRIDED_SLICE": _strided_slice,
    "SUM": _reduction,
    "TILE": _per_dimension(1),
    "TRANSPOSE": _per_dimension(1),
}


# ----------------------------------------------------------------------------- checked access


class MissingOperandError(InputError, IndexError):
    """An operator lacks an operand that its kind needs, or a tensor lacks an axis.

    Raised by the operand and shape tuples below when a converter asks for an index the file
    does not provide; it is an ``IndexError`` too, so ``except IndexError`` still works.
    """

    __str__ = Exception.__str__  # not KeyError/IndexError's repr-style message


class MissingOptionError(InputError, KeyError):
    """An operator's builtin options lack a field that its kind needs (also a ``KeyError``)."""

    __str__ = Exception.__str__


class _Operands(tuple):
    """Tensor indices of an operator (``inputs``, ``outputs``, ``intermediates``).

    An index past the end raises :class:`MissingOperandError` naming the operator: a CONV_2D
    with one input is a malformed file, and says so instead of ``tuple index out of range``.
    """

    def __new__(cls, values=(), where: str = "", what: str = "input"):
        self = super().__new__(cls, values)
        self.where, self.what = where, what
        return self

    def __getitem__(self, key):
        if isinstance(key, int) and not -len(self) <= key < len(self):
            n = len(self)
            raise MissingOperandError(
                f"has {n} {self.what}{'' if n == 1 else 's'}, no {self.what} {key}", self.where
            )
        return super().__getitem__(key)


class _Shape(tuple):
    """A tensor's dimensions; an axis it does not have raises :class:`MissingOperandError`."""

    def __new__(cls, values=(), where: str = ""):
        self = super().__new__(cls, values)
        self.where = where
        return self

    def __getitem__(self, key):
        if isinstance(key, int) and not -len(self) <= key < len(self):
            raise MissingOperandError(
                f"has shape {list(self)} (rank {len(self)}), no axis {key}", self.where
            )
        return super().__getitem__(key)


class _Options(dict):
    """An operator's builtin options; a field the table lacks raises MissingOptionError."""

    def __init__(self, values=(), where: str = "", options_type: str = ""):
        super().__init__(values)
        self.where, self.options_type = where, options_type

    def __missing__(self, key):
        if self.options_type:
            problem = f"needs option {key!r}, which its {self.options_type} lack"
        else:
            problem = f"needs option {key!r} but has no builtin_options"
        raise MissingOptionError(problem, self.where)


# ----------------------------------------------------------------------------- data model


@dataclass(frozen=True, eq=False)
class Quantization:
    """Affine quantization of a tensor: real = scale * (q - zero_point).

    ``zero_point`` always has the same length as ``scale`` (a missing or single zero point is
    broadcast), so consumers never special-case the file's shorthand.
    """

    scale: np.ndarray  # float32, 1-D
    zero_point: np.ndarray  # int64, 1-D, len == len(scale)
    quantized_dimension: int

    @property
    def per_axis(self) -> bool:
        """True when there is one scale per slice along ``quantized_dimension``."""
        return len(self.scale) > 1


@dataclass(frozen=True, eq=False)
class DimensionMetadata:
    """One dimension of a sparse tensor's storage (TFLite ``DimensionMetadata``)."""

    format: str  # "DENSE" or "SPARSE_CSR"
    dense_size: int
    array_segments: np.ndarray | None  # int64, CSR row pointers (SPARSE_CSR only)
    array_indices: np.ndarray | None  # int64, CSR column indices (SPARSE_CSR only)


@dataclass(frozen=True, eq=False)
class Sparsity:
    """Sparse storage description, needed to densify a constant (DENSIFY op)."""

    traversal_order: tuple[int, ...]
    block_map: tuple[int, ...]
    dim_metadata: tuple[DimensionMetadata, ...]


@dataclass(frozen=True, eq=False)
class Tensor:
    """A tensor of one subgraph.

    ``data`` is the constant value (read-only, reshaped to ``shape``) or None for activations.
    For sparse tensors it is the 1-D array of stored values (see ``sparsity``); for string
    tensors an object array of ``bytes``; for INT4 an int8 array of the unpacked values.
    """

    index: int
    name: str
    shape: tuple[int, ...]  # an axis past the rank raises MissingOperandError naming the tensor
    shape_signature: tuple[int, ...]  # -1 marks a dynamic dimension
    dtype: str  # lower-cased TensorType name: "float32", "int8", "string", ...
    buffer: int
    data: np.ndarray | None
    quantization: Quantization | None
    is_variable: bool
    sparsity: Sparsity | None


@dataclass(frozen=True)
class OpCode:
    """Operator kind; ``builtin`` is the BuiltinOperator name or ``UNKNOWN_<code>``."""

    builtin: str
    custom_code: str | None
    version: int


@dataclass(frozen=True, eq=False)
class Operator:
    """One node of a subgraph; ``-1`` in ``inputs`` marks an omitted optional input."""

    index: int
    opcode: OpCode
    inputs: tuple[int, ...]  # the reader's tuples name the operator when indexed past the end
    outputs: tuple[int, ...]
    intermediates: tuple[int, ...]
    options: dict[str, Any]  # a missing field raises MissingOptionError (dict.get still works)
    options_type: str  # BuiltinOptions / BuiltinOptions2 member name, "" when none
    custom_options: bytes | None

    @property
    def name(self) -> str:
        """The name the TFLite runtime reports: the custom code for custom ops."""
        if self.opcode.builtin == "CUSTOM" and self.opcode.custom_code is not None:
            return self.opcode.custom_code
        return self.opcode.builtin

    @property
    def where(self) -> str:
        """How errors name this operator: ``operator 12 (CONV_2D)``."""
        return f"operator {self.index} ({self.name})"


@dataclass(frozen=True, eq=False)
class Subgraph:
    """A function body: tensors, operators in execution order, and its interface."""

    index: int
    name: str
    tensors: list[Tensor]
    operators: list[Operator]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class SignatureDef:
    """Named entry point: signature names -> tensor indices of ``subgraph_index``."""

    key: str
    subgraph_index: int
    inputs: dict[str, int]
    outputs: dict[str, int]


@dataclass(frozen=True, eq=False)
class TFLiteModel:
    """The whole validated model."""

    version: int
    description: str
    subgraphs: list[Subgraph]
    opcodes: list[OpCode]
    signature_defs: list[SignatureDef]
    metadata: dict[str, bytes]
    source_name: str


# ----------------------------------------------------------------------------- entry point


def read_model(source: str | os.PathLike | bytes | bytearray | memoryview) -> TFLiteModel:
    """Read and validate a TFLite model from a path or from the file's bytes.

    Every problem with the input raises :class:`InputError` with a one-line message; no
    low-level exception from the flatbuffer library escapes.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        name = "<bytes>"
        try:
            data = bytes(source)
        except (TypeError, ValueError, BufferError) as exc:
            raise InputError(f"cannot read model bytes: {_one_line(exc)}", where=name) from exc
    elif isinstance(source, (str, os.PathLike)):
        name = os.fspath(source)
        if isinstance(name, bytes):
            name = os.fsdecode(name)
        data = _read_file(Path(name), name)
    else:
        raise InputError(
            f"expected a path or bytes, got {type(source).__name__}", where="read_model"
        )

    if len(data) < 8:
        raise InputError(
            f"not a TFLite flatbuffer: file is only {len(data)} bytes long", where=name
        )
    if data[4:8] != _FILE_IDENTIFIER:
        raise InputError(
            f"not a TFLite flatbuffer: file identifier is {data[4:8]!r}, expected b'TFL3'",
            where=name,
        )

    reader = _Reader(data, name)
    try:
        return reader.read()
    except (struct.error, ValueError, TypeError) as exc:
        # What the flatbuffers accessors raise when an offset or a length points outside the
        # file: struct.error (a scalar read past the end), ValueError (a numpy view past the
        # end) and TypeError from flatbuffers' own range check of a computed offset. Anything
        # else (and any other TypeError) is a bug of ours and is not disguised as bad input.
        if isinstance(exc, TypeError) and not str(exc).startswith("bad number"):
            raise
        where = f"{name}: {reader.loc}" if reader.loc else name
        raise InputError(
            f"malformed flatbuffer: an offset or length points outside the file "
            f"({_exc_name(exc)}: {_one_line(exc)})",
            where=where,
        ) from exc


def _read_file(path: Path, name: str) -> bytes:
    try:
        if path.is_dir():
            raise InputError("is a directory, expected a .tflite file", where=name)
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise InputError("file does not exist", where=name) from exc
    except IsADirectoryError as exc:
        raise InputError("is a directory, expected a .tflite file", where=name) from exc
    except (OSError, ValueError) as exc:  # permissions, I/O errors, NUL in the path ...
        reason = getattr(exc, "strerror", None) or _one_line(exc)
        raise InputError(f"cannot read file: {reason}", where=name) from exc


def _one_line(exc: BaseException | str) -> str:
    text = " ".join(str(exc).split())
    return text[:300] + "..." if len(text) > 300 else text


def _q(name: str) -> str:
    """Quote a file-provided name for a one-line message (escapes control characters)."""
    if len(name) > 80:
        name = name[:77] + "..."
    return f"'{name}'" if name.isprintable() else repr(name)


def _exc_name(exc: BaseException) -> str:
    cls = type(exc)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__name__}"


def _snake(camel: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()


def _as_tuple(arr: Any) -> tuple[int, ...]:
    """AsNumpy() result (array, or 0 when the vector is absent) -> tuple of Python ints."""
    if isinstance(arr, np.ndarray):
        return tuple(int(v) for v in arr.tolist())
    return ()


# ----------------------------------------------------------------------------- options


@dataclass(frozen=True)
class _Field:
    key: str  # snake_case dict key
    getter: str
    vector: bool  # read via <getter>AsNumpy
    enum: dict[int, str] | None


_OPTIONS_FIELDS: dict[str, tuple[type, tuple[_Field, ...]]] = {}


def _options_layout(class_name: str) -> tuple[type, tuple[_Field, ...]] | None:
    """Getters of an options table class, discovered once from the generated bindings."""
    cached = _OPTIONS_FIELDS.get(class_name)
    if cached is not None:
        return cached
    cls = getattr(tflite, class_name, None)
    if not isinstance(cls, type):
        return None
    fields = []
    for attr in sorted(vars(cls)):
        if not attr[:1].isupper() or attr.endswith(_SKIP_SUFFIXES) or attr.startswith("GetRootAs"):
            continue
        vector = hasattr(cls, attr + "AsNumpy")
        fields.append(_Field(_snake(attr), attr, vector, _ENUM_FIELDS.get(attr)))
    layout = (cls, tuple(fields))
    _OPTIONS_FIELDS[class_name] = layout
    return layout


def _read_options(
    table: Any, layout: tuple[type, tuple[_Field, ...]], decode: Any
) -> dict[str, Any]:
    """Every getter of the options table, snake_case keys, enums as member names."""
    cls, fields = layout
    obj = cls()
    obj.Init(table.Bytes, table.Pos)
    out: dict[str, Any] = {}
    for f in fields:
        if f.vector:
            values = _as_tuple(getattr(obj, f.getter + "AsNumpy")())
            if f.enum is not None:
                values = tuple(_enum_name(f.enum, v) for v in values)
            out[f.key] = values
            continue
        value = getattr(obj, f.getter)()
        if isinstance(value, bytes):
            value = decode(value, f.key)
        elif f.enum is not None:
            value = _enum_name(f.enum, int(value))
        out[f.key] = value
    return out


# ----------------------------------------------------------------------------- reader


class _Reader:
    """One pass over the flatbuffer; ``loc`` tracks where we are for error messages."""

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
            raise self.fail(f"{_snake(field)} vector claims {n} elements, more than the file holds")
        return n

    # -- top level ------------------------------------------------------------------------

    def read(self) -> TFLiteModel:
        self.loc = "model"
        root = int.from_bytes(self.data[0:4], "little")
        if root + 4 > len(self.data):
            raise self.fail(
                f"root table offset {root} lies beyond the end of the file ({len(self.data)} bytes)"
            )
        model = tflite.Model.GetRootAsModel(self.data, 0)
        self.model = model
        version = int(model.Version())
        if version != _SCHEMA_VERSION:
            raise self.fail(f"unsupported TFLite schema version {version} (expected 3)")
        description = self.text(model.Description(), "description") or ""
        self.n_buffers = self.count(model, "Buffers")

        opcodes = [self.read_opcode(i) for i in range(self.count(model, "OperatorCodes"))]

        self.loc = "model"
        n_subgraphs = self.count(model, "Subgraphs")
        if n_subgraphs == 0:
            raise self.fail("model has no subgraphs")
        subgraphs = [self.read_subgraph(i, opcodes) for i in range(n_subgraphs)]

        self.loc = "model"
        signature_defs = [
            self.read_signature(i, subgraphs) for i in range(self.count(model, "SignatureDefs"))
        ]
        self.loc = "model"
        metadata = self.read_metadata()
        self.loc = ""
        if self.bias_axis_fixes:
            fixes = self.bias_axis_fixes
            warnings.warn(
                f"{self.name}: {len(fixes)} rank-1 per-channel tensors have an out-of-range "
                f"quantized_dimension (first: {fixes[0]}); read as per-channel along axis 0",
                ConversionWarning,
                stacklevel=3,
            )
        return TFLiteModel(
            version=version,
            description=description,
            subgraphs=subgraphs,
            opcodes=opcodes,
            signature_defs=signature_defs,
            metadata=metadata,
            source_name=self.name,
        )

    def read_opcode(self, i: int) -> OpCode:
        self.loc = f"opcode {i}"
        oc = self.model.OperatorCodes(i)
        # The schema keeps the old int8 field for codes < 127 and says to take the max.
        code = max(int(oc.DeprecatedBuiltinCode()), int(oc.BuiltinCode()))
        builtin = _enum_name(_BUILTIN_OPERATOR_NAMES, code)
        custom_code = self.text(oc.CustomCode(), "custom_code")
        if builtin == "CUSTOM" and not custom_code:
            raise self.fail("CUSTOM operator code without a custom_code")
        return OpCode(builtin=builtin, custom_code=custom_code, version=int(oc.Version()))

    # -- buffers --------------------------------------------------------------------------

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

    def read_metadata(self) -> dict[str, bytes]:
        metadata: dict[str, bytes] = {}
        for i in range(self.count(self.model, "Metadata")):
            self.loc = f"metadata {i}"
            md = self.model.Metadata(i)
            key = self.text(md.Name(), "name") or ""
            index = int(md.Buffer())
            if index >= self.n_buffers:
                raise self.fail(
                    f"metadata {_q(key)} buffer index {index} out of range "
                    f"(model has {self.n_buffers} buffers)"
                )
            # TensorFlow's own converter writes min_runtime_version twice: the first one wins,
            # as in the TFLite runtime's lookup.
            if key not in metadata:
                metadata[key] = self.buffer_bytes(index).tobytes()
        return metadata

    # -- subgraphs ------------------------------------------------------------------------

    def read_subgraph(self, sg_index: int, opcodes: list[OpCode]) -> Subgraph:
        self.loc = f"subgraph {sg_index}"
        sg = self.model.Subgraphs(sg_index)
        sg_name = self.text(sg.Name(), "name") or ""
        n_tensors = self.count(sg, "Tensors")
        tensors = [self.read_tensor(sg_index, sg.Tensors(t), t) for t in range(n_tensors)]

        self.loc = f"subgraph {sg_index}"
        self.count(sg, "Inputs")
        self.count(sg, "Outputs")
        inputs = _as_tuple(sg.InputsAsNumpy())
        outputs = _as_tuple(sg.OutputsAsNumpy())
        self.check_indices(inputs, n_tensors, "input", allow_omitted=False)
        self.check_indices(outputs, n_tensors, "output", allow_omitted=False)

        operators = []
        for o in range(self.count(sg, "Operators")):
            self.loc = f"subgraph {sg_index} operator {o}"
            operator = self.read_operator(sg.Operators(o), o, opcodes, n_tensors)
            self.check_operands(operator, tensors)
            operators.append(operator)
        return Subgraph(
            index=sg_index,
            name=sg_name,
            tensors=tensors,
            operators=operators,
            inputs=inputs,
            outputs=outputs,
        )

    def check_operands(self, op: Operator, tensors: list[Tensor]) -> None:
        """The operand shapes TFLite's kernel for ``op`` requires (see _OPERAND_RANKS and
        _OPERAND_RULES); the converters rely on them."""
        kind = op.opcode.builtin
        ranks = _OPERAND_RANKS.get(kind)
        if ranks is not None:
            for what, indices, wanted in (
                ("input", op.inputs, ranks[0]),
                ("output", op.outputs, ranks[1]),
            ):
                for pos, (t, rank) in enumerate(zip(indices, wanted, strict=False)):
                    if rank is not None and t >= 0 and len(tensors[t].shape) != rank:
                        shape = list(tensors[t].shape)
                        raise self.fail(
                            f"{what} {pos} (tensor {t}) has shape {shape}; {kind} needs rank {rank}"
                        )
        rule = _OPERAND_RULES.get(kind)
        problem = None if rule is None else rule(_OperandView(op, tensors))
        if problem is not None:
            raise self.fail(f"{kind}: {problem}")

    def check_indices(
        self, indices: tuple[int, ...], n_tensors: int, what: str, allow_omitted: bool
    ) -> None:
        for pos, t in enumerate(indices):
            if allow_omitted and t == -1:
                continue
            if not 0 <= t < n_tensors:
                raise self.fail(
                    f"{what} {pos} refers to tensor {t}, out of range "
                    f"(subgraph has {n_tensors} tensors)"
                )

    def read_operator(self, op: Any, index: int, opcodes: list[OpCode], n_tensors: int) -> Operator:
        opcode_index = int(op.OpcodeIndex())
        if opcode_index >= len(opcodes):
            raise self.fail(
                f"opcode index {opcode_index} out of range (model has {len(opcodes)} opcodes)"
            )
        for field in ("Inputs", "Outputs", "Intermediates"):
            self.count(op, field)
        inputs = _as_tuple(op.InputsAsNumpy())
        outputs = _as_tuple(op.OutputsAsNumpy())
        intermediates = _as_tuple(op.IntermediatesAsNumpy())
        self.check_indices(inputs, n_tensors, "input", allow_omitted=True)
        self.check_indices(outputs, n_tensors, "output", allow_omitted=False)
        self.check_indices(intermediates, n_tensors, "intermediate", allow_omitted=False)

        options_type, options = self.read_builtin_options(op)

        custom_options: bytes | None = None
        if not op.CustomOptionsIsNone():
            self.count(op, "CustomOptions", 1)
            raw = op.CustomOptionsAsNumpy()
            custom_options = raw.tobytes() if isinstance(raw, np.ndarray) else b""
        large_offset = int(op.LargeCustomOptionsOffset())
        if large_offset > 1:  # custom options stored after the flatbuffer (large models)
            size = int(op.LargeCustomOptionsSize())
            if large_offset + size > len(self.data):
                raise self.fail(
                    f"custom options [{large_offset}, {large_offset + size}) lie beyond the end "
                    f"of the file ({len(self.data)} bytes)"
                )
            custom_options = self.data[large_offset : large_offset + size]

        opcode = opcodes[opcode_index]
        name = opcode.custom_code if opcode.builtin == "CUSTOM" else opcode.builtin
        where = f"operator {index} ({name})"  # as Operator.where says it
        return Operator(
            index=index,
            opcode=opcode,
            inputs=_Operands(inputs, where, "input"),
            outputs=_Operands(outputs, where, "output"),
            intermediates=_Operands(intermediates, where, "intermediate"),
            options=_Options(options, where, options_type),
            options_type=options_type,
            custom_options=custom_options,
        )

    def read_builtin_options(self, op: Any) -> tuple[str, dict[str, Any]]:
        unions = [(_OPTIONS_UNION, op.BuiltinOptionsType, op.BuiltinOptions, "")]
        if _OPTIONS2_UNION and hasattr(op, "BuiltinOptions2Type"):
            unions.append((_OPTIONS2_UNION, op.BuiltinOptions2Type, op.BuiltinOptions2, "_2"))
        found: list[tuple[str, dict[str, Any]]] = []
        for union, type_getter, table_getter, suffix in unions:
            type_code = int(type_getter())
            if type_code == 0:  # NONE
                continue
            class_name = union.get(type_code)
            layout = None if class_name is None else _options_layout(class_name)
            if layout is None:
                raise self.fail(f"unknown builtin_options{suffix} type {type_code}")
            table = table_getter()
            options = {} if table is None else _read_options(table, layout, self.text)
            for key in _POSITIVE_OPTIONS:
                value = options.get(key)
                if value is not None and value < 1:
                    raise self.fail(f"{class_name} {key} is {value}, must be positive")
            found.append((class_name, options))
        if len(found) > 1:
            raise self.fail(
                f"operator has both builtin_options ({found[0][0]}) and "
                f"builtin_options_2 ({found[1][0]})"
            )
        return found[0] if found else ("", {})

    # -- tensors --------------------------------------------------------------------------

    def read_tensor(self, sg_index: int, t: Any, index: int) -> Tensor:
        self.loc = f"subgraph {sg_index} tensor {index}"
        name = self.text(t.Name(), "name") or ""
        self.loc = f"subgraph {sg_index} tensor {index} {_q(name)}"

        type_code = int(t.Type())
        type_name = _TENSOR_TYPE_NAMES.get(type_code)
        if type_name is None or type_name not in _NUMPY_DTYPES:
            raise self.fail(f"unknown tensor type {type_code}")
        dtype = type_name.lower()

        self.count(t, "Shape")
        self.count(t, "ShapeSignature")
        shape = _as_tuple(t.ShapeAsNumpy())
        shape_signature = (
            _as_tuple(t.ShapeSignatureAsNumpy()) if t.ShapeSignatureLength() else shape
        )
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
            spec = _NUMPY_DTYPES[type_name]
            itemsize = 1 if spec in (None, "int4") else np.dtype(_numpy_dtype(type_name)).itemsize
            if n_elements * itemsize > _MAX_TENSOR_BYTES:
                raise self.fail(f"shape {list(shape)} is absurdly large ({n_elements} elements)")

        buffer_index = int(t.Buffer())
        if buffer_index != 0 and buffer_index >= self.n_buffers:
            raise self.fail(
                f"buffer index {buffer_index} out of range (model has {self.n_buffers} buffers)"
            )

        sparsity = self.read_sparsity(t.Sparsity(), len(shape))
        quantization = self.read_quantization(t.Quantization(), shape, shape_signature)
        if quantization is not None and dtype.startswith(("int", "uint")):
            scale = quantization.scale
            if not (np.all(np.isfinite(scale)) and np.all(scale > 0)):
                bad = next(float(s) for s in scale if not (np.isfinite(s) and s > 0))
                raise self.fail(f"quantization scale {bad} is not a positive finite number")

        raw = self.buffer_bytes(buffer_index)
        data = None
        if raw.size:
            data = self.tensor_data(raw, type_name, shape, static, sparse=sparsity is not None)

        where = f"tensor {index} {_q(name)}"
        return Tensor(
            index=index,
            name=name,
            shape=_Shape(shape, where),
            shape_signature=_Shape(shape_signature, where),
            dtype=dtype,
            buffer=buffer_index,
            data=data,
            quantization=quantization,
            is_variable=bool(t.IsVariable()),
            sparsity=sparsity,
        )

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
        if type_name == "INT4":
            values = _unpack_int4(raw)
            if sparse:
                return values
            if raw.size != (n_elements + 1) // 2:
                raise self.fail(
                    f"buffer holds {raw.size} bytes but shape {list(shape)} of int4 needs "
                    f"{(n_elements + 1) // 2}"
                )
            return values[:n_elements].reshape(shape)
        dtype = np.dtype(_numpy_dtype(type_name))
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

    def read_sparsity(self, sp: Any, rank: int) -> Sparsity | None:
        if sp is None:
            return None
        self.count(sp, "TraversalOrder")
        self.count(sp, "BlockMap")
        traversal_order = _as_tuple(sp.TraversalOrderAsNumpy())
        block_map = _as_tuple(sp.BlockMapAsNumpy())
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
            fmt = _enum_name(_DIMENSION_TYPES, int(dm.Format()))
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
        class_name = _SPARSE_INDEX_VECTORS.get(int(type_code))
        if class_name is None:
            raise self.fail(f"unknown sparse index vector type {type_code}")
        vec = getattr(tflite, class_name)()
        vec.Init(table.Bytes, table.Pos)
        values = vec.ValuesAsNumpy()
        out = np.array(values if isinstance(values, np.ndarray) else [], dtype=np.int64)
        out.flags.writeable = False
        return out

    def read_signature(self, i: int, subgraphs: list[Subgraph]) -> SignatureDef:
        self.loc = f"signature_def {i}"
        sig = self.model.SignatureDefs(i)
        key = self.text(sig.SignatureKey(), "signature_key") or ""
        self.loc = f"signature_def {i} {_q(key)}"
        sg_index = int(sig.SubgraphIndex())
        if sg_index >= len(subgraphs):
            raise self.fail(
                f"subgraph index {sg_index} out of range (model has {len(subgraphs)} subgraphs)"
            )
        n_tensors = len(subgraphs[sg_index].tensors)
        maps = []
        for field in ("Inputs", "Outputs"):
            mapping: dict[str, int] = {}
            for k in range(self.count(sig, field)):
                tm = getattr(sig, field)(k)
                sig_name = self.text(tm.Name(), f"{field.lower()[:-1]} {k} name") or ""
                t = int(tm.TensorIndex())
                what = field.lower()[:-1]
                if t >= n_tensors:
                    raise self.fail(
                        f"{what} {_q(sig_name)} refers to tensor {t}, out of range "
                        f"(subgraph {sg_index} has {n_tensors} tensors)"
                    )
                if sig_name in mapping:
                    raise self.fail(f"duplicate {what} name {_q(sig_name)}")
                mapping[sig_name] = t
            maps.append(mapping)
        return SignatureDef(key=key, subgraph_index=sg_index, inputs=maps[0], outputs=maps[1])


def _numpy_dtype(type_name: str) -> Any:
    spec = _NUMPY_DTYPES[type_name]
    if spec == "bfloat16":
        try:
            import ml_dtypes  # optional; ships with onnx
        except ImportError:  # pragma: no cover - fall back to the raw bit pattern
            return np.dtype("<u2")
        return np.dtype(ml_dtypes.bfloat16)
    return spec


def _unpack_int4(raw: np.ndarray) -> np.ndarray:
    """Two signed 4-bit values per byte, low nibble first (TFLite's packing)."""
    out = np.empty(raw.size * 2, np.int8)
    out[0::2] = (raw & 0x0F).astype(np.int8)
    out[1::2] = (raw >> 4).astype(np.int8)
    out = (out ^ 8) - 8  # sign-extend the nibbles
    out.flags.writeable = False
    return out
