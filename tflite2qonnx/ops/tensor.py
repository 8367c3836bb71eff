"""Ops that move or combine tensors: CONCATENATION, PAD, TRANSPOSE, MEAN.

Axes are written in TFLite's (source) order; the layout pass renumbers them when it stores a
tensor channels-first.
"""

from __future__ import annotations

import numpy as np

from qonnx_ingest.errors import ConversionError
from tflite2qonnx import fixed_point
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.reduce import reduce_axes
from tflite2qonnx.reader import Operator


def _rank(b: GraphBuilder, idx: int) -> int:
    return len(b.tensor(idx).shape)


def concatenation(b: GraphBuilder, op: Operator) -> None:
    axis = int(op.options.get("axis", 0)) % _rank(b, op.outputs[0])
    y = b.emit("Concat", [b.input(i) for i in op.inputs], axis=axis)[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))


def pad(b: GraphBuilder, op: Operator) -> None:
    """PAD / PADV2: [rank, 2] paddings -> ONNX's begins-then-ends list.

    A quantized tensor pads with its zero point, i.e. with real 0 (or PADV2's value, on the
    output's grid: the kernel requires it); the input's integers are copied
    (``GraphBuilder.reinterpret``).
    """
    paddings = b.int_constant(op.inputs[1], op.where).reshape(-1, 2)
    pads = b.const(np.concatenate([paddings[:, 0], paddings[:, 1]]).astype(np.int64), "pads")
    inputs = [b.raw_input(op.inputs[0], op.outputs[0]), pads]
    if len(op.inputs) > 2 and op.inputs[2] >= 0:
        value = b.constant(op.inputs[2])
        if value is None:
            raise ConversionError("PADV2's constant value must be a constant", op.where)
        inputs.append(b.const(np.asarray(value, np.float32).reshape(()), "pad_value"))
    b.set_output(op.outputs[0], b.emit("Pad", inputs, mode="constant")[0])


def transpose(b: GraphBuilder, op: Operator) -> None:
    perm = [int(p) for p in b.int_constant(op.inputs[1], op.where)]
    b.set_output(
        op.outputs[0], b.emit("Transpose", [b.raw_input(op.inputs[0], op.outputs[0])], perm=perm)[0]
    )


def mean(b: GraphBuilder, op: Operator) -> None:
    """MEAN over constant axes; ``keep_dims`` is ONNX's ``keepdims``."""
    rank = _rank(b, op.inputs[0])
    axes = sorted({int(a) % rank for a in b.int_constant(op.inputs[1], op.where).reshape(-1)})
    keepdims = int(bool(op.options.get("keep_dims", False)))
    if b.bit_exact and fixed_point.is_integer_op(b, op):
        return fixed_point.mean(b, op, axes, keepdims)
    y = reduce_axes(b, "ReduceMean", b.input(op.inputs[0]), axes, keepdims)
    b.set_output(op.outputs[0], y)
