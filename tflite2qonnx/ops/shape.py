"""RESHAPE: the target shape from the output tensor's signature (NHWC element order)."""

from __future__ import annotations

import numpy as np

from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.reader import Operator


def reshape(b: GraphBuilder, op: Operator) -> None:
    target = list(b.tensor(op.outputs[0]).shape_signature)
    if target.count(-1) > 1:  # several dynamic dims: the new_shape the op was given
        target = list(b.constant(op.inputs[1]).astype(np.int64)) if len(op.inputs) > 1 else target
    shape = b.const(np.array(target, np.int64), "reshape_shape")
    b.set_output(op.outputs[0], b.emit("Reshape", [b.input(op.inputs[0]), shape])[0])
