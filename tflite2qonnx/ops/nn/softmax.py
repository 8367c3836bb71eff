"""SOFTMAX over the last axis, with TFLite's beta folded in as a scale of the logits."""

from __future__ import annotations

import numpy as np

from tflite2qonnx.fixed_point import is_int16
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.exact import log_softmax as exact_log_softmax
from tflite2qonnx.ops.exact import softmax as exact_softmax
from tflite2qonnx.ops.exact import softmax16 as exact_softmax16
from tflite2qonnx.ops.exact import softmax_int16_out as exact_softmax_int16_out
from tflite2qonnx.ops.treatment import emulates


def softmax(b: GraphBuilder, op: Operator) -> None:
    if emulates(b, op):
        if is_int16(b, op.inputs[0]):
            return exact_softmax16.softmax(b, op)
        if is_int16(b, op.outputs[0]):  # gemmlowp's fixed point, not the float table
            return exact_softmax_int16_out.softmax(b, op)
        return exact_softmax.softmax(b, op)
    x = b.input(op.inputs[0])
    beta = float(op.options.get("beta", 1.0))
    if beta != 1.0:
        x = b.emit("Mul", [x, b.const(np.array(beta, np.float32), "softmax_beta")])[0]
    b.set_output(op.outputs[0], b.emit("Softmax", [x], axis=-1)[0])


def log_softmax(b: GraphBuilder, op: Operator) -> None:
    if emulates(b, op):
        return exact_log_softmax.log_softmax(b, op)
    b.set_output(op.outputs[0], b.emit("LogSoftmax", [b.input(op.inputs[0])], axis=-1)[0])
