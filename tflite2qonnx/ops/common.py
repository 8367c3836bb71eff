"""Small graph helpers several converters share (the kernels of ``ops.exact.int8`` too)."""

from __future__ import annotations

import numpy as np

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder

COMPLEX = "complex64"


def is_complex(b: GraphBuilder, idx: int) -> bool:
    """Whether tensor ``idx`` is complex64 (held as [..., 2] float pairs, ``ops.signal``)."""
    return idx >= 0 and b.tensor(idx).dtype == COMPLEX


def rank_of(b: GraphBuilder, idx: int) -> int:
    """The rank of tensor ``idx`` as the file declares it."""
    return len(b.tensor(idx).shape)


def clip_bounds(b: GraphBuilder, lo: float, hi: float, dtype=np.float32) -> tuple[str, str]:
    """The min and max inputs of a Clip node, of the clipped value's type (float32 unless
    given; an int32 ADD's fused RELU clips int32)."""
    lo_name = b.const(np.array(lo, dtype), "clip_min")
    return lo_name, b.const(np.array(hi, dtype), "clip_max")


def reduce_axes(b: GraphBuilder, onnx_op: str, x: str, axes: list[int], keepdims: int) -> str:
    """ReduceSum takes axes as an input from opset 13, the other reductions from opset 18."""
    if onnx_op == "ReduceSum" or b.opset >= 18:
        axes_name = b.const(np.array(axes, np.int64), "axes")
        return b.emit(onnx_op, [x, axes_name], keepdims=keepdims)[0]
    return b.emit(onnx_op, [x], axes=axes, keepdims=keepdims)[0]


# the most elements a converter materializes as a constant (a mask, a class or offset table)
MAX_TABLE = 1 << 24


def table_size(n: int, what: str, where: str) -> int:
    """``n`` if a constant of ``n`` elements is reasonable to write, else a ConversionError."""
    if n > MAX_TABLE:
        raise ConversionError(f"{what} would need {n} elements (more than {MAX_TABLE})", where)
    return n


def one_int(b: GraphBuilder, idx: int, what: str, where: str) -> int:
    """A constant operand holding exactly one integer."""
    value = b.int_constant(idx, where).reshape(-1)
    if value.size != 1:
        raise ConversionError(f"{what} must be one value, got {value.size}", where)
    return int(value[0])
