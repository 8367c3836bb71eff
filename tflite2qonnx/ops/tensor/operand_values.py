"""Shape-like integer operands (slice bounds, paddings, split sizes, axes) read either as
constants at conversion time or as int64 ONNX values computed at run time: TF's converter
keeps ``tf.shape`` arithmetic on a dynamic batch in the graph, so begin / end / paddings may
only exist when the model runs."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator


def known(b: GraphBuilder, op: Operator, idx: int) -> np.ndarray | None:
    """A constant integer operand's values (flattened), else None (computed at run time)."""
    if idx < 0:
        raise ConversionError(f"{op.name}: a required operand is missing", op.where)
    if b.tensor(idx).data is None and b.constant(idx) is None:
        return None
    return b.int_constant(idx, op.where).reshape(-1)


def int64_value(b: GraphBuilder, idx: int, values: np.ndarray | None = None) -> str:
    """Operand ``idx`` as a flat int64 ONNX value: ``values`` (its constant) folded, else the
    run-time tensor cast."""
    if values is not None:
        return b.const(np.asarray(values, np.int64).reshape(-1), b.tensor_name(idx))
    flat = b.emit("Reshape", [b.input(idx), b.const(np.array([-1], np.int64), "flat")])[0]
    return b.emit("Cast", [flat], to=TensorProto.INT64)[0]


def required_constant(b: GraphBuilder, op: Operator, pos: int, role: str, why: str) -> np.ndarray:
    """Input ``pos`` of ``op`` as constant integers, or a ConversionError naming the operator
    and operand when it is computed at run time (``why``: what needs it constant)."""
    idx = op.inputs[pos] if pos < len(op.inputs) else -1
    values = known(b, op, idx)
    if values is None:
        raise ConversionError(
            f"{op.name}'s {role} (input {pos}, tensor {idx} '{b.tensor(idx).name}') is computed "
            f"at run time; {why}",
            op.where,
        )
    return values


def dim_sizes(b: GraphBuilder, x_idx: int, axes: list[int]) -> str:
    """The run-time sizes of tensor ``x_idx``'s ``axes`` (source order), int64 [len(axes)]."""
    shape = b.emit("Shape", [b.input(x_idx)])[0]
    return b.emit("Gather", [shape, b.const(np.asarray(axes, np.int64), "axes")], axis=0)[0]


def onnx_pads(b: GraphBuilder, op: Operator, idx: int) -> str:
    """TFLite's [rank, 2] paddings as ONNX Pad's int64 begins-then-ends list; computed ones
    are transposed in the graph."""
    values = known(b, op, idx)
    if values is not None:
        paddings = values.reshape(-1, 2)
        return b.const(np.concatenate([paddings[:, 0], paddings[:, 1]]), "pads")
    pairs = b.emit("Cast", [b.input(idx)], to=TensorProto.INT64)[0]
    flat = b.const(np.array([-1], np.int64), "flat")
    return b.emit("Reshape", [b.emit("Transpose", [pairs], perm=[1, 0])[0], flat])[0]
