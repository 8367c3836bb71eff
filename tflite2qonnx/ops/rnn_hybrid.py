"""Hybrid (dynamic-range) UNIDIRECTIONAL_SEQUENCE_RNN: float activations, int8 weights.

TFLite has no full-integer RNN kernel; its int8 RNN is this one (kernel_utils RnnBatchStep).
Each step quantizes its input rows and its hidden-state rows on the fly, symmetrically
(SymmetricQuantizeFloats): with r = max |row|, q = clamp(round_half_away(x * (127 / r)),
-127, 127) and scaling factor (r / 127) * weight scale, all in float32; the int8 dot products
are exact integers, and the output is bias + dot_x * s_x + dot_h * s_h, then the activation.
The graph reproduces those float32 steps op for op. ``asymmetric_quantize_inputs`` (zero
points and row sums) and per-channel weight scales are refused by name.
"""

from __future__ import annotations

import numpy as np

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.common import reduce_axes
from tflite2qonnx.ops.lstm import initial_state, sequence_shape, stack

_K = 127.0


def is_hybrid(b: GraphBuilder, op: Operator) -> bool:
    """Float input with int8 weights."""
    return b.tensor(op.inputs[0]).dtype == "float32" and b.tensor(op.inputs[1]).dtype == "int8"


def int8_weights(b: GraphBuilder, op: Operator, idx: int) -> tuple[str, float]:
    """The raw int8 weights, transposed for MatMul, and their scale."""
    t = b.tensor(idx)
    q = t.quantization
    if t.dtype != "int8" or t.data is None or q is None or len(q.scale) != 1:
        raise ConversionError(
            f"hybrid {op.name} needs constant per-tensor int8 weights",
            f"{op.where}, tensor {idx} '{t.name}'",
        )
    raw = np.ascontiguousarray(np.asarray(t.data, np.float32).T)
    return b.const(raw, f"{b.tensor_name(idx)}_int8"), float(np.float32(q.scale[0]))


def symmetric_product(b: GraphBuilder, x: str, w: str, w_scale: float) -> str:
    """dot(SymmetricQuantizeFloats(x rows), w) * (scaling factor * w_scale), float32."""
    r = reduce_axes(b, "ReduceMax", b.emit("Abs", [x])[0], [-1], keepdims=1)
    zero = b.emit("Equal", [r, b.const(np.array(0.0, np.float32), "zero")])[0]
    safe = b.emit("Where", [zero, b.const(np.array(1.0, np.float32), "one"), r])[0]
    inv = b.emit("Div", [b.const(np.array(_K, np.float32), "k127"), safe])[0]
    v = b.emit("Mul", [x, inv])[0]
    half = b.const(np.array(0.5, np.float32), "half")
    mag = b.emit("Floor", [b.emit("Add", [b.emit("Abs", [v])[0], half])[0]])[0]
    q = b.emit("Mul", [b.emit("Sign", [v])[0], mag])[0]
    lo, hi = (b.const(np.array(v, np.float32), n) for v, n in ((-_K, "qmin"), (_K, "qmax")))
    q = b.emit("Clip", [q, lo, hi])[0]
    dot = b.emit("MatMul", [q, w])[0]
    factor = b.emit("Div", [r, b.const(np.array(_K, np.float32), "k127")])[0]
    factor = b.emit("Mul", [factor, b.const(np.array(w_scale, np.float32), "w_scale")])[0]
    return b.emit("Mul", [dot, factor])[0]


def hybrid_sequence_rnn(b: GraphBuilder, op: Operator) -> None:
    x_idx, w_idx, r_idx, bias_idx, h_idx = (op.inputs[k] for k in range(5))
    if op.options.get("asymmetric_quantize_inputs", False):
        raise ConversionError(
            f"hybrid {op.name} with asymmetric_quantize_inputs is not supported", op.where
        )
    if b.tensor(bias_idx).dtype != "float32":
        raise ConversionError(f"hybrid {op.name} needs a float bias", op.where)
    w, w_scale = int8_weights(b, op, w_idx)
    r, r_scale = int8_weights(b, op, r_idx)
    time_major = bool(op.options.get("time_major", False))
    shape = sequence_shape(b, op, x_idx)
    steps = shape[0] if time_major else shape[1]
    units = b.tensor(w_idx).shape[0]
    x_part = b.emit("Add", [b.input(bias_idx), symmetric_product(b, b.input(x_idx), w, w_scale)])
    x_part = x_part[0]
    h = initial_state(b, h_idx, units)
    outputs = []
    for t in range(steps):
        index = b.const(np.array(t, np.int64), "step")
        pre = b.emit("Gather", [x_part, index], axis=0 if time_major else 1)[0]
        # a zero state (the first step's) adds exactly 0, as the kernel's skipping it does
        pre = b.emit("Add", [pre, symmetric_product(b, h, r, r_scale)])[0]
        h = fused_activation(b, op, pre)
        outputs.append(h)
    b.set_output(op.outputs[0], stack(b, outputs, time_major))
