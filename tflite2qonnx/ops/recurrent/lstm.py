"""UNIDIRECTIONAL_SEQUENCE_LSTM and BIDIRECTIONAL_SEQUENCE_LSTM, unrolled over the static
sequence length with MatMul / Add / Sigmoid / Tanh.

Unrolling (rather than ONNX's LSTM) follows TFLite's step exactly, variants included: gate
order (input, forget, cell, output), CIFG (no input gate: i = 1 - f), peepholes (the output
gate's reads the updated cell state), layer normalization (bias added after it), cell and
projection clips, projection, the fused activation on the cell gate and the cell output, and
time_major. The integer 8x8_16 kernel is the same step with its quantizers (``lstm_int``),
the hybrid kernel (int8 weights on float activations) with its products (``lstm_hybrid``);
``sequence`` picks the kernel.

State: TFLite keeps the output and cell states in variable tensors that the interpreter
carries from one invocation to the next until ``reset_all_variables``. By default the
converted graph starts every run from the variables' initial value (zero), i.e. it computes
what the interpreter computes on a fresh or reset state; with state I/O (``tflite2qonnx.state``)
they are graph inputs and the last step's h and c graph outputs. A state tensor that is a
graph input or a constant is read as such.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.common import reduce_axes
from tflite2qonnx.ops.recurrent.lstm_operands import Direction
from tflite2qonnx.state import state_after, state_before


class FloatLstm:
    """The float step's arithmetic: each stage is the plain float function."""

    hybrid = False

    def __init__(self, b: GraphBuilder, op: Operator, d: Direction):
        self.b, self.op, self.d = b, op, d

    def x_part(self, x: str, wx: str, gates: tuple[int, ...]) -> str:
        """x @ W for the whole sequence, plus the biases unless layer norm adds them later."""
        b, d = self.b, self.d
        y = b.emit("MatMul", [x, wx])[0]
        if d.normalized:
            return y
        bias = b.emit("Concat", [b.input(d.biases[g]) for g in gates], axis=0)[0]
        return b.emit("Add", [y, bias])[0]

    def h_part(self, h_part: str) -> str:
        return h_part

    def gate_sum(self, x_part: str, h_part: str) -> str:
        return self.b.emit("Add", [x_part, h_part])[0]

    def peephole(self, pre: str, weight: int, c: str, gate: int) -> str:
        term = self.b.emit("Mul", [self.b.input(weight), c])[0]
        return self.b.emit("Add", [pre, term])[0]

    def layer_norm(self, pre: str, gate: int) -> str:
        d = self.d
        return _layer_norm(self.b, pre, d.layer_norm[gate], d.biases[gate])

    def activation(self, pre: str, gate: int) -> str:
        if gate == 2:
            return fused_activation(self.b, self.op, pre)
        return self.b.emit("Sigmoid", [pre])[0]

    def one_minus(self, f: str) -> str:
        one = self.b.const(np.array(1.0, np.float32), "one")
        return self.b.emit("Sub", [one, f])[0]

    def cell(self, f: str, c: str, i: str, g: str) -> str:
        b = self.b
        c = b.emit("Add", [b.emit("Mul", [f, c])[0], b.emit("Mul", [i, g])[0]])[0]
        clip = float(self.op.options.get("cell_clip", 0.0))
        return _clip(b, c, clip) if clip > 0 else c

    def hidden(self, o: str, c: str) -> str:
        return self.b.emit("Mul", [o, fused_activation(self.b, self.op, c)])[0]

    def project(self, h: str) -> str:
        b, (w, bias) = self.b, self.d.projection
        h = b.emit("MatMul", [h, b.input(w, perm=(1, 0))])[0]
        if bias >= 0:
            h = b.emit("Add", [h, b.input(bias)])[0]
        clip = float(self.op.options.get("proj_clip", 0.0))
        return _clip(b, h, clip) if clip > 0 else h


def _clip(b: GraphBuilder, x: str, bound: float) -> str:
    lo = b.const(np.array(-bound, np.float32), "clip_min")
    return b.emit("Clip", [x, lo, b.const(np.array(bound, np.float32), "clip_max")])[0]


def _layer_norm(b: GraphBuilder, x: str, coefficients: int, bias: int) -> str:
    """TFLite's MeanStddevNormalization (variance + 1e-8) times the coefficients, plus bias."""
    mean = reduce_axes(b, "ReduceMean", x, [-1], keepdims=1)
    centred = b.emit("Sub", [x, mean])[0]
    variance = reduce_axes(b, "ReduceMean", b.emit("Mul", [centred, centred])[0], [-1], 1)
    eps = b.const(np.array(1e-8, np.float32), "ln_eps")
    std = b.emit("Sqrt", [b.emit("Add", [variance, eps])[0]])[0]
    y = b.emit("Mul", [b.emit("Div", [centred, std])[0], b.input(coefficients)])[0]
    return b.emit("Add", [y, b.input(bias)])[0]


def initial_state(b: GraphBuilder, idx: int, width: int) -> str:
    """A state operand's value at the start of a run: zero for a variable tensor unless it is
    a graph input (state I/O)."""
    if idx < 0:
        raise ConversionError("the LSTM's state operands are required", b.current.where)
    value = state_before(b, idx)
    if value is None:
        return b.const(np.zeros((1, width), np.float32), f"{b.tensor_name(idx)}_initial")
    return value


def stacked_weights(b: GraphBuilder, indices: tuple[int, ...], gates: tuple[int, ...]) -> str:
    """The gates' weights [n_cell, depth] transposed and side by side: [depth, gates * n_cell]."""
    return b.emit("Concat", [b.input(indices[g], perm=(1, 0)) for g in gates], axis=1)[0]


def run_sequence(
    b: GraphBuilder,
    op: Operator,
    d: Direction,
    arith,
    x: str,
    x_shape: tuple[int, ...],
    time_major: bool,
    reverse: bool = False,
) -> list[str]:
    """Unroll one direction over the sequence ``x``; returns each step's output [batch, out]
    in time order."""
    steps, n_input = (x_shape[0] if time_major else x_shape[1]), x_shape[2]
    gates = d.gates
    n_cell = b.tensor(d.h_weights[1]).shape[0]
    n_out = b.tensor(d.h_weights[1]).shape[1]
    if b.tensor(d.x_weights[1]).shape[-1] != n_input:
        raise ConversionError("input-to-forget weights do not match the input depth", op.where)
    # all gates in one MatMul over the whole sequence: x @ [W_i W_f W_c W_o]^T (+ biases);
    # an arithmetic with its own products (the hybrid and integer kernels') stacks and applies
    # them itself
    stacked = getattr(arith, "stacked", None) or partial(stacked_weights, b)
    recurrent = getattr(arith, "recurrent", None)
    wx, wh = stacked(d.x_weights, gates), stacked(d.h_weights, gates)
    x_part = arith.x_part(x, wx, gates)
    split = b.const(np.array([n_cell] * len(gates), np.int64), "gate_split")
    h = initial_state(b, d.states[0], n_out)
    c = initial_state(b, d.states[1], n_cell)
    outputs: list[str | None] = [None] * steps
    order = range(steps - 1, -1, -1) if reverse else range(steps)
    for t in order:
        index = b.const(np.array(t, np.int64), "step")
        x_t = b.emit("Gather", [x_part, index], axis=0 if time_major else 1)[0]
        h_part = recurrent(h, wh) if recurrent else arith.h_part(b.emit("MatMul", [h, wh])[0])
        pre = dict(zip(gates, b.emit("Split", [arith.gate_sum(x_t, h_part), split], len(gates),
                                     axis=-1), strict=True))  # fmt: skip
        act = {}
        for g in (0, 1, 2):
            if g not in pre:
                continue
            if d.peephole and g != 2:
                pre[g] = arith.peephole(pre[g], d.peepholes[0 if g == 0 else 1], c, g)
            if d.normalized:
                pre[g] = arith.layer_norm(pre[g], g)
            act[g] = arith.activation(pre[g], g)
        i = arith.one_minus(act[1]) if d.cifg else act[0]
        c = arith.cell(act[1], c, i, act[2])
        if d.peephole:
            pre[3] = arith.peephole(pre[3], d.peepholes[2], c, 3)
        if d.normalized:
            pre[3] = arith.layer_norm(pre[3], 3)
        h = arith.hidden(arith.activation(pre[3], 3), c)
        if d.projection[0] >= 0:
            h = arith.project(h)
        outputs[t] = h
    state_after(b, d.states[0], h)
    state_after(b, d.states[1], c)
    return outputs


def stack(b: GraphBuilder, outputs: list[str], time_major: bool) -> str:
    """Each step's [batch, out] stacked along the time axis."""
    axis = 0 if time_major else 1
    axes = b.const(np.array([axis], np.int64), "time_axis")
    parts = [b.emit("Unsqueeze", [h, axes])[0] for h in outputs]
    return parts[0] if len(parts) == 1 else b.emit("Concat", parts, axis=axis)[0]


def sequence_shape(b: GraphBuilder, op: Operator, idx: int) -> tuple[int, ...]:
    """The rank-3 input's shape; the time axis must be static to unroll."""
    t = b.tensor(idx)
    time_axis = 0 if op.options.get("time_major", False) else 1
    if len(t.shape) != 3:
        raise ConversionError(f"{op.name} needs a rank-3 input, got {list(t.shape)}", op.where)
    if t.shape_signature[time_axis] < 0:
        raise ConversionError(
            f"{op.name} with a dynamic sequence length cannot be unrolled", op.where
        )
    return tuple(t.shape)
