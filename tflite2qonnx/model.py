"""The data model of a read TFLite model: what every converter sees, with no flatbuffer in it.

Plain read-only dataclasses, built and validated once by ``tflite2qonnx.flatbuffer``. The
operand and shape tuples and the options dict name the operator or tensor when a converter
asks for something the file lacks. A tensor's QONNX quantization (``Tensor.quant``) is
computed here, once per tensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from qonnx_ingest.errors import ConversionError, InputError
from tflite2qonnx.dtypes import FLOAT_TYPES, INTEGER_TYPES

# TFLite quantizes with std::round (ties away from zero), which qonnx calls HALF_UP.
ROUNDING_MODE = "HALF_UP"


class MissingOperandError(InputError, IndexError):
    """An operator lacks an operand that its kind needs, or a tensor lacks an axis.

    Raised by the operand and shape tuples below when a converter asks for an index the file
    does not provide; it is an ``IndexError`` too, so ``except IndexError`` still works.
    """

    __str__ = Exception.__str__  # not KeyError/IndexError's repr-style message


class ScaleRangeError(InputError):
    """A requantization multiplier derived from an operator's scales is infinite, NaN, zero or
    denormal: each scale may be finite while their product or quotient is not, and no kernel
    computes anything meaningful with it. The operator loop names the operator and its tensors.
    """


class MissingOptionError(InputError, KeyError):
    """An operator's builtin options lack a field that its kind needs (also a ``KeyError``)."""

    __str__ = Exception.__str__


class Operands(tuple):
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


class Shape(tuple):
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


class Options(dict):
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


@dataclass(frozen=True, eq=False)
class Quantization:
    """Affine quantization of a tensor: real = scale * (q - zero_point).

    ``zero_point`` always has the same length as ``scale`` (a missing or single zero point is
    broadcast), so consumers never special-case the file's shorthand.
    """

    scale: np.ndarray  # float32, 1-D (blockwise: the weight's rank, see block_size)
    zero_point: np.ndarray  # int64, 1-D, len == len(scale) (blockwise: scale's shape)
    quantized_dimension: int
    # LiteRT blockwise quantization: one scale per block_size consecutive values along
    # quantized_dimension (scale has the tensor's shape with that axis divided); 0: none
    block_size: int = 0

    @property
    def per_axis(self) -> bool:
        """True when there is one scale per slice along ``quantized_dimension``."""
        return self.block_size == 0 and len(self.scale) > 1


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

    @property
    def integer_quantized(self) -> bool:
        """Quantized and stored as integers, not float32 / float16: TFLite runs an integer
        kernel on it (int16, int32 and int4 included)."""
        return self.quantization is not None and self.dtype not in FLOAT_TYPES

    @cached_property
    def quant(self) -> QuantArgs | None:
        """The Quant parameters of an integer-quantized tensor, None for any other tensor: the
        one test of "is this a quantized integer tensor", computed on first use."""
        q = self.quantization
        if q is None or self.dtype not in INTEGER_TYPES:
            return None
        bits, signed = INTEGER_TYPES[self.dtype]
        if q.block_size:
            return self._blockwise_quant(bits, signed)
        per_axis = q.per_axis
        scale = q.scale.astype(np.float64)
        zero_point = q.zero_point.astype(np.float64)
        if not per_axis:
            scale, zero_point = scale.reshape(()), zero_point.reshape(())
        scale.flags.writeable = zero_point.flags.writeable = False  # shared by every use
        return QuantArgs(
            scale=scale,
            zero_point=zero_point,
            bit_width=bits,
            signed=signed,
            narrow=self._is_narrow(),
            axis=self._quantized_axis() if per_axis else None,
        )

    def _blockwise_quant(self, bits: int, signed: bool) -> QuantArgs:
        """Blockwise scales expanded to the tensor's full shape: a Quant with one scale per
        element, constant along each block. Chosen over a Quant on the weight reshaped to
        (..., blocks, block) between two Reshapes because the weight keeps its own shape:
        the layout passes transpose it (and its scale with it) like any other constant, and
        FINN / hls4ml read one Quant on the weight. The QCDQ lowering folds the repeated
        scale back into DequantizeLinear's block_size (qonnx_ingest.quant_info)."""
        q = self.quantization
        axis, block = q.quantized_dimension, q.block_size
        scale = np.repeat(q.scale.astype(np.float64), block, axis=axis)
        zero_point = np.repeat(q.zero_point.astype(np.float64), block, axis=axis)
        scale.flags.writeable = zero_point.flags.writeable = False
        return QuantArgs(scale, zero_point, bits, signed, narrow=False, axis=None)

    def _is_narrow(self) -> bool:
        """int8 weights use TFLite's symmetric range [-127, 127]; say so when the data agrees."""
        if self.dtype != "int8" or self.data is None or self.quantization is None:
            return False
        return bool(np.all(self.quantization.zero_point == 0) and np.min(self.data) >= -127)

    def _quantized_axis(self) -> int:
        axis = self.quantization.quantized_dimension
        if not 0 <= axis < len(self.shape):
            raise ConversionError(
                f"quantized_dimension {axis} is not an axis of shape {self.shape}",
                f"tensor '{self.name}'",
            )
        return axis


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
