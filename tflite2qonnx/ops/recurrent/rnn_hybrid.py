"""Hybrid (dynamic-range) UNIDIRECTIONAL_SEQUENCE_RNN: float activations, int8 weights.

TFLite has no full-integer RNN kernel; its int8 RNN is this one (kernel_utils RnnBatchStep).
Each step quantizes its input rows and its hidden-state rows on the fly (symmetric, or
asymmetric with ``asymmetric_quantize_inputs``) and adds the int8 products scaled back to
float (``ops.hybrid.quant``): the output is bias + x part + h part, then the activation, each
float32 step reproduced op for op.
"""

from __future__ import annotations

import numpy as np

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.hybrid.quant import hybrid_matrix, hybrid_product
from tflite2qonnx.ops.recurrent.lstm import initial_state, sequence_shape, stack
from tflite2qonnx.state import state_after


def is_hybrid(b: GraphBuilder, op: Operator) -> bool:
    """Float input with int8 weights."""
    return b.tensor(op.inputs[0]).dtype == "float32" and b.tensor(op.inputs[1]).dtype == "int8"


def hybrid_sequence_rnn(b: GraphBuilder, op: Operator) -> None:
    x_idx, w_idx, r_idx, bias_idx, h_idx = (op.inputs[k] for k in range(5))
    asymmetric = bool(op.options.get("asymmetric_quantize_inputs", False))
    if b.tensor(bias_idx).dtype != "float32":
        raise ConversionError(f"hybrid {op.name} needs a float bias", op.where)
    time_major = bool(op.options.get("time_major", False))
    shape = sequence_shape(b, op, x_idx)
    steps = shape[0] if time_major else shape[1]
    units = b.tensor(w_idx).shape[0]
    w = hybrid_matrix(b, [w_idx], asymmetric, "rnn_input", op.where)
    r = hybrid_matrix(b, [r_idx], asymmetric, "rnn_recurrent", op.where)
    x_part = hybrid_product(b, b.input(x_idx), w)
    x_part = b.emit("Add", [b.input(bias_idx), x_part])[0]
    h = initial_state(b, h_idx, units)
    outputs = []
    for t in range(steps):
        index = b.const(np.array(t, np.int64), "step")
        pre = b.emit("Gather", [x_part, index], axis=0 if time_major else 1)[0]
        # a zero state (the first step's) adds exactly 0, as the kernel's skipping it does
        pre = b.emit("Add", [pre, hybrid_product(b, h, r)])[0]
        h = fused_activation(b, op, pre)
        outputs.append(h)
    state_after(b, h_idx, h)
    b.set_output(op.outputs[0], stack(b, outputs, time_major))
