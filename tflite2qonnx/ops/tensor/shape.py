"""Shape ops: RESHAPE (the target shape from the output tensor's signature, NHWC element
order), SQUEEZE, EXPAND_DIMS, SHAPE, FILL, BROADCAST_TO, ZEROS_LIKE.

Squeeze, Unsqueeze, Reshape, Shape and Expand with a computed shape are terminate ops for the
layout pass: they see the source order."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.common import rank_of
from tflite2qonnx.ops.tensor.operand_values import required_constant


def reshape(b: GraphBuilder, op: Operator) -> None:
    """The output's signature is the target shape; with several dynamic dims it cannot be,
    and the new_shape operand (constant, or computed: SHAPE -> PACK in a detector head) is."""
    target = list(b.tensor(op.outputs[0]).shape_signature)
    if target.count(-1) > 1 and len(op.inputs) > 1 and op.inputs[1] >= 0:
        shape = _dims(b, op.inputs[1])
    else:
        shape = b.const(np.array(target, np.int64), "reshape_shape")
    b.set_output(
        op.outputs[0], b.emit("Reshape", [b.raw_input(op.inputs[0], op.outputs[0]), shape])[0]
    )


def _int64(b: GraphBuilder, values, hint: str) -> str:
    return b.const(np.asarray(values, np.int64), hint)


def squeeze_axes(b: GraphBuilder, op: Operator) -> list[int]:
    """squeeze_dims, or every dim of size 1 when empty: known only for static dims (the
    kernel then squeezes what is 1 at run time)."""
    signature = b.tensor(op.inputs[0]).shape_signature
    dims = [int(d) % len(signature) for d in op.options.get("squeeze_dims", []) or []]
    if dims:
        return sorted(set(dims))
    if -1 in signature:
        raise ConversionError(
            f"{op.name} without squeeze_dims of tensor {op.inputs[0]} "
            f"'{b.tensor(op.inputs[0]).name}' with dynamic dims {list(signature)}: which dims "
            "are 1 is known only at run time",
            op.where,
        )
    return [k for k, d in enumerate(signature) if d == 1]


def squeeze(b: GraphBuilder, op: Operator) -> None:
    x = b.raw_input(op.inputs[0], op.outputs[0])
    y = b.emit("Squeeze", [x, _int64(b, squeeze_axes(b, op), "squeeze_axes")])[0]
    b.set_output(op.outputs[0], y)


def expand_axis(b: GraphBuilder, op: Operator) -> int:
    """A negative axis counts from the end of the output (rank + 1 dims)."""
    why = "the output's rank and layout depend on it"
    (axis,) = required_constant(b, op, 1, "axis", why)
    return int(axis) % (rank_of(b, op.inputs[0]) + 1)


def expand_dims(b: GraphBuilder, op: Operator) -> None:
    x = b.raw_input(op.inputs[0], op.outputs[0])
    y = b.emit("Unsqueeze", [x, _int64(b, [expand_axis(b, op)], "unsqueeze_axes")])[0]
    b.set_output(op.outputs[0], y)


def shape(b: GraphBuilder, op: Operator) -> None:
    y = b.emit("Shape", [b.input(op.inputs[0])])[0]
    if b.tensor(op.outputs[0]).dtype == "int32":
        y = b.emit("Cast", [y], to=TensorProto.INT32)[0]
    b.set_output(op.outputs[0], y)


def _dims(b: GraphBuilder, idx: int) -> str:
    """A shape operand as int64 (a constant folds; a computed one is cast)."""
    if b.tensor(idx).data is not None:
        return _int64(b, b.int_constant(idx, "shape operand"), "dims")
    return b.emit("Cast", [b.input(idx)], to=TensorProto.INT64)[0]


def fill(b: GraphBuilder, op: Operator) -> None:
    """FILL(dims, value) = Expand(value, dims): dims may be computed (from SHAPE); a quantized
    value is its real value, the output's Quant keeps it on the grid."""
    value = b.input(op.inputs[1])
    b.set_output(op.outputs[0], b.emit("Expand", [value, _dims(b, op.inputs[0])])[0])


def broadcast_to(b: GraphBuilder, op: Operator) -> None:
    x = b.raw_input(op.inputs[0], op.outputs[0])
    b.set_output(op.outputs[0], b.emit("Expand", [x, _dims(b, op.inputs[1])])[0])


def _like(value: float):
    def convert(b: GraphBuilder, op: Operator) -> None:
        dtype = b.tensor(op.outputs[0]).dtype
        np_type = np.float32 if dtype in ("float32", "float16") else np.dtype(dtype)
        c = b.const(np.array(value, np_type), "like_value")
        dims = b.emit("Shape", [b.input(op.inputs[0])])[0]
        b.set_output(op.outputs[0], b.emit("Expand", [c, dims])[0])

    return convert


zeros_like = _like(0.0)
