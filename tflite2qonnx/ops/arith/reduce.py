"""Reductions over constant axes: MEAN, SUM, REDUCE_MAX / MIN / PROD, ARG_MAX / ARG_MIN, CUMSUM,
L2_NORMALIZATION. Axes are in TFLite's (source) order; the layout pass renumbers them."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.common import reduce_axes
from tflite2qonnx.ops.geometry import keep_dims
from tflite2qonnx.ops.geometry import reduction_axes as _axes
from tflite2qonnx.ops.int64_order import reduce_extreme


def _reduce(onnx_op: str):
    """The integer kernels (MEAN, SUM, REDUCE_PROD under --bit-exact; int16 MEAN and
    REDUCE_PROD always) are their records' ``kernel``."""

    def convert(b: GraphBuilder, op: Operator) -> None:
        x = b.input(op.inputs[0])
        y = reduce_axes(b, onnx_op, x, _axes(b, op), keep_dims(op))
        b.set_output(op.outputs[0], y)

    return convert


# int8 / uint8 on two grids: rounded twice by default where the kernel's multiplier shifts
# right, its record's default kernel (``ops.arith.rounding``); ``keep_dims`` is ONNX's
# ``keepdims``
mean = _reduce("ReduceMean")
reduce_sum = _reduce("ReduceSum")


def _reduce_extreme(onnx_op: str):
    """REDUCE_MAX / REDUCE_MIN: raw integers on int8 (``GraphBuilder.reinterpret``); int64
    through ``int64_order`` (onnxruntime's int64 ReduceMax / ReduceMin misorder values)."""

    def convert(b: GraphBuilder, op: Operator) -> None:
        x = b.raw_input(op.inputs[0], op.outputs[0])
        elem = b.elem_type(op.outputs[0])
        y = reduce_extreme(b, onnx_op, x, _axes(b, op), keep_dims(op), elem)
        b.set_output(op.outputs[0], y)

    return convert


reduce_max = _reduce_extreme("ReduceMax")
reduce_min = _reduce_extreme("ReduceMin")
reduce_prod = _reduce("ReduceProd")

_INDEX_TYPES = {"int32": TensorProto.INT32, "int64": TensorProto.INT64}


def _arg(onnx_op: str):
    def convert(b: GraphBuilder, op: Operator) -> None:
        """The first extreme along one axis; ONNX returns int64, cast to the output's type."""
        (axis,) = _axes(b, op)
        y = b.emit(onnx_op, [b.input(op.inputs[0])], axis=axis, keepdims=0)[0]
        dtype = b.tensor(op.outputs[0]).dtype
        if dtype not in _INDEX_TYPES:
            raise ConversionError(f"output type {dtype} unsupported", op.where)
        if dtype != "int64":
            y = b.emit("Cast", [y], to=_INDEX_TYPES[dtype])[0]
        b.set_output(op.outputs[0], y)

    return convert


arg_max = _arg("ArgMax")
arg_min = _arg("ArgMin")


def cumsum(b: GraphBuilder, op: Operator) -> None:
    (axis,) = _axes(b, op)
    attrs = {
        "exclusive": int(bool(op.options.get("exclusive", False))),
        "reverse": int(bool(op.options.get("reverse", False))),
    }
    axis_name = b.const(np.array(axis, np.int64), "cumsum_axis")
    b.set_output(op.outputs[0], b.emit("CumSum", [b.input(op.inputs[0]), axis_name], **attrs)[0])


def l2_normalization(b: GraphBuilder, op: Operator) -> None:
    """x / max(sqrt(sum(x^2)), 1e-6) over the last axis (TFLite's epsilon)."""
    x = b.input(op.inputs[0])
    rank = len(b.tensor(op.inputs[0]).shape)
    sq = b.emit("Mul", [x, x])[0]
    norm = b.emit("Sqrt", [reduce_axes(b, "ReduceSum", sq, [rank - 1], 1)])[0]
    norm = b.emit("Max", [norm, b.const(np.array(1e-6, np.float32), "l2_epsilon")])[0]
    y = b.emit("Div", [x, norm])[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))
