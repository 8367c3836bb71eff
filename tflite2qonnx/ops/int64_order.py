"""int64 maximum, minimum, clamp and max / min reductions in forms onnxruntime computes right.

onnxruntime 1.31's int64 ``Max``, ``Min``, ``Clip``, ``ReduceMax`` and ``ReduceMin`` (and
``Sign``) order two values wrongly when their high 32-bit words are equal and their low words
differ in bit 31, i.e. they compare the low words as signed: ``Max(2**31, 2)`` is 2,
``Min(-2**31 - 1, -1)`` is -1. ``Greater``, ``Less``, ``Where``, ``ArgMax``, ``ArgMin`` and
``GatherElements`` are right on every int64, so on int64 these helpers select with them instead;
any other type keeps the plain op (and the graphs it always had). Values inside the int32 range
are never affected, so graphs clamping indices or sizes of int32 origin need no helper.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.ops.common import reduce_axes

_PICK = {"Max": "Greater", "Min": "Less"}
_ARG = {"ReduceMax": "ArgMax", "ReduceMin": "ArgMin"}


def extreme(b: GraphBuilder, onnx_op: str, x: str, y: str, elem_type: int) -> str:
    """``onnx_op`` ("Max" or "Min") of ``x`` and ``y`` (broadcasting) of ONNX type ``elem_type``."""
    if elem_type != TensorProto.INT64:
        return b.emit(onnx_op, [x, y])[0]
    pick_x = b.emit(_PICK[onnx_op], [x, y])[0]
    return b.emit("Where", [pick_x, x, y])[0]


def clamp(b: GraphBuilder, x: str, lo: str, hi: str, elem_type: int) -> str:
    """Clip(x, lo, hi) of ONNX type ``elem_type``; on int64 min(max(x, lo), hi), as Clip."""
    if elem_type != TensorProto.INT64:
        return b.emit("Clip", [x, lo, hi])[0]
    return extreme(b, "Min", extreme(b, "Max", x, lo, elem_type), hi, elem_type)


def reduce_extreme(
    b: GraphBuilder, onnx_op: str, x: str, axes: list[int], keepdims: int, elem_type: int
) -> str:
    """``onnx_op`` ("ReduceMax" or "ReduceMin") over non-negative constant ``axes``; on int64
    the first extreme's index per axis (ArgMax / ArgMin) gathers it, one axis at a time."""
    if elem_type != TensorProto.INT64:
        return reduce_axes(b, onnx_op, x, axes, keepdims)
    for axis in axes:
        where = b.emit(_ARG[onnx_op], [x], axis=axis, keepdims=1)[0]
        x = b.emit("GatherElements", [x, where], axis=axis)[0]
    if keepdims or not axes:
        return x
    if b.opset >= 13:
        return b.emit("Squeeze", [x, b.const(np.array(axes, np.int64), "axes")])[0]
    return b.emit("Squeeze", [x], axes=list(axes))[0]
