"""What the TFLite flatbuffer schema's enums and options tables mean, read from its bindings.

Enum values become member names, an options table becomes a dict with snake_case keys (enum
fields as names), discovered once per options class from the generated ``tflite`` package.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import tflite


def enum_names(enum_cls: type) -> dict[int, str]:
    """value -> member name of a generated flatbuffers enum class."""
    return {
        v: k
        for k, v in vars(enum_cls).items()
        if not k.startswith("_") and isinstance(v, int) and not isinstance(v, bool)
    }


def enum_name(names: dict[int, str], value: int) -> str:
    return names.get(value, f"UNKNOWN_{value}")


BUILTIN_OPERATOR_NAMES = enum_names(tflite.BuiltinOperator)
# LiteRT's schema has types the tflite 2.18 bindings lack; named explicitly, by their codes
TENSOR_TYPE_NAMES = {
    **enum_names(tflite.TensorType),
    19: "INT2",
    20: "UINT4",
    21: "FLOAT8_E4M3FN",
    22: "FLOAT8_E5M2",
}
OPTIONS_UNION = enum_names(tflite.BuiltinOptions)
# Newer schemas put StableHLO op options in a second union (Operator.builtin_options_2).
OPTIONS2_UNION = enum_names(tflite.BuiltinOptions2) if hasattr(tflite, "BuiltinOptions2") else {}
DIMENSION_TYPES = enum_names(tflite.DimensionType)
SPARSE_INDEX_VECTORS = enum_names(tflite.SparseIndexVector)


# Options fields whose integer value is a schema enum.  Explicit on purpose: a field name alone
# does not say which enum it uses, and a wrong guess would silently mislabel a value.
ENUM_FIELDS: dict[str, dict[int, str]] = {
    "FusedActivationFunction": enum_names(tflite.ActivationFunctionType),
    "Padding": enum_names(tflite.Padding),
    "Mode": enum_names(tflite.MirrorPadMode),
    "Type": enum_names(tflite.LSHProjectionType),
    "Combiner": enum_names(tflite.CombinerType),
    "WeightsFormat": enum_names(tflite.FullyConnectedOptionsWeightsFormat),
    "KernelType": enum_names(tflite.LSTMKernelType),
    "Algorithm": enum_names(tflite.RngAlgorithm),
    "ReduceFunction": enum_names(tflite.ReduceWindowFunction),
    "ComparisonDirection": enum_names(tflite.StablehloComparisonDirection),
    "CompareType": enum_names(tflite.StablehloComparisonType),
    "PrecisionConfig": enum_names(tflite.StablehloPrecisionConfig),
    "CompositeAttributesFormat": enum_names(tflite.CustomOptionsFormat),
    # TensorType-valued fields (CastOptions, ArgMax/ArgMin, Shape, Unique, Hashtable, bias type)
    "InDataType": TENSOR_TYPE_NAMES,
    "OutDataType": TENSOR_TYPE_NAMES,
    "OutType": TENSOR_TYPE_NAMES,
    "OutputType": TENSOR_TYPE_NAMES,
    "IdxOutType": TENSOR_TYPE_NAMES,
    "KeyDtype": TENSOR_TYPE_NAMES,
    "ValueDtype": TENSOR_TYPE_NAMES,
    "QuantizedBiasType": TENSOR_TYPE_NAMES,
}

_SKIP_SUFFIXES = ("AsNumpy", "Length", "IsNone", "Init", "BufferHasIdentifier")

# Options that are a size or a step: the runtime divides by them or loops over them, so zero or
# a negative value (e.g. a stride the writer left out: flatbuffers then reads the default 0) is
# a malformed operator, not a model to convert.
POSITIVE_OPTIONS = (
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


def quote(name: str) -> str:
    """Quote a file-provided name for a one-line message (escapes control characters)."""
    if len(name) > 80:
        name = name[:77] + "..."
    return f"'{name}'" if name.isprintable() else repr(name)


def snake(camel: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()


def as_tuple(arr: Any) -> tuple[int | float, ...]:
    """AsNumpy() result (array, or 0 when the vector is absent) -> tuple of Python numbers:
    ints, or floats for a float vector (BUCKETIZE's boundaries; int() truncated them)."""
    if isinstance(arr, np.ndarray):
        if arr.dtype.kind == "f":
            return tuple(float(v) for v in arr.tolist())
        return tuple(int(v) for v in arr.tolist())
    return ()


@dataclass(frozen=True)
class _Field:
    key: str  # snake_case dict key
    getter: str
    vector: bool  # read via <getter>AsNumpy
    enum: dict[int, str] | None


_OPTIONS_FIELDS: dict[str, tuple[type, tuple[_Field, ...]]] = {}


def options_layout(class_name: str) -> tuple[type, tuple[_Field, ...]] | None:
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
        fields.append(_Field(snake(attr), attr, vector, ENUM_FIELDS.get(attr)))
    layout = (cls, tuple(fields))
    _OPTIONS_FIELDS[class_name] = layout
    return layout


def read_options(
    table: Any, layout: tuple[type, tuple[_Field, ...]], decode: Any
) -> dict[str, Any]:
    """Every getter of the options table, snake_case keys, enums as member names."""
    cls, fields = layout
    obj = cls()
    obj.Init(table.Bytes, table.Pos)
    out: dict[str, Any] = {}
    for f in fields:
        if f.vector:
            values = as_tuple(getattr(obj, f.getter + "AsNumpy")())
            if f.enum is not None:
                values = tuple(enum_name(f.enum, v) for v in values)
            out[f.key] = values
            continue
        value = getattr(obj, f.getter)()
        if isinstance(value, bytes):
            value = decode(value, f.key)
        elif f.enum is not None:
            value = enum_name(f.enum, int(value))
        out[f.key] = value
    return out
