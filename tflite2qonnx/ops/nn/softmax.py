"""SOFTMAX over the last axis, with TFLite's beta folded in as a scale of the logits."""

from __future__ import annotations

import numpy as np

from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator


def softmax(b: GraphBuilder, op: Operator) -> None:
    """Integer kernels (int16 always, int8 under --bit-exact): its record's ``kernel``."""
    x = b.input(op.inputs[0])
    beta = float(op.options.get("beta", 1.0))
    if beta != 1.0:
        x = b.emit("Mul", [x, b.const(np.array(beta, np.float32), "softmax_beta")])[0]
    b.set_output(op.outputs[0], b.emit("Softmax", [x], axis=-1)[0])


def log_softmax(b: GraphBuilder, op: Operator) -> None:
    """Under --bit-exact: its record's ``kernel``."""
    b.set_output(op.outputs[0], b.emit("LogSoftmax", [b.input(op.inputs[0])], axis=-1)[0])
