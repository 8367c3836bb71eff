"""The sequence operators, unrolled by ``lstm``: UNIDIRECTIONAL_SEQUENCE_LSTM and
BIDIRECTIONAL_SEQUENCE_LSTM (float; the entries of the kernels their records name: hybrid --
int8 weights on float activations, ``lstm_hybrid`` -- and, unidirectional only, integer) and
UNIDIRECTIONAL_SEQUENCE_RNN (float; its record's hybrid kernel: ``rnn_hybrid``, TFLite's only
int8 one).

BIDIRECTIONAL_SEQUENCE_LSTM runs two ``lstm`` directions over the sequence, the backward
one from the last step to the first, each output at its own step; ``merge_outputs`` concatenates
them on the last axis. On a batch-major input of batch > 1 TFLite's float and hybrid kernels
offset row b's output state by b times the merged width (lstm_eval.cc), past the state tensor
for b >= batch / 2: the float op converts as defined and warns, the hybrid one is refused.
The auxiliary input (stacked bidirectional layers) is not converted.
UNIDIRECTIONAL_SEQUENCE_RNN is h_t = act(x_t W^T + h_{t-1} R^T + b), with the state starting
from its variable's initial value (zero) as in ``lstm``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

from qonnx_ingest.errors import ConversionError, ConversionWarning
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.recurrent.lstm import (
    FloatLstm,
    initial_state,
    run_sequence,
    sequence_shape,
    stack,
)
from tflite2qonnx.ops.recurrent.lstm_hybrid import HybridLstm, is_hybrid_lstm
from tflite2qonnx.ops.recurrent.lstm_operands import Direction, operand, unidirectional_direction
from tflite2qonnx.state import state_after


def _float_only(b: GraphBuilder, op: Operator, weights: list[int]) -> None:
    if b.tensor(op.inputs[0]).dtype != "float32":
        raise ConversionError(
            f"{b.tensor(op.inputs[0]).dtype} {op.name} is not supported", op.where
        )
    for idx in weights:
        if idx >= 0 and b.tensor(idx).dtype != "float32":
            raise ConversionError(
                f"hybrid (dynamic-range) {op.name} with {b.tensor(idx).dtype} weights on float "
                "activations is not supported",
                op.where,
            )


def check_float(b: GraphBuilder, op: Operator, d: Direction) -> None:
    """A float LSTM has float weights throughout (int8 input-to-output weights make it the
    hybrid kernel, ``lstm_hybrid``)."""
    for idx in (*d.x_weights, *d.h_weights, d.projection[0]):
        if idx >= 0 and b.tensor(idx).dtype not in ("float32", "float16"):
            raise ConversionError(
                f"{op.name} with float input-to-output weights and {b.tensor(idx).dtype} "
                f"weights '{b.tensor(idx).name}' is not supported",
                op.where,
            )


def _float_direction(b: GraphBuilder, op: Operator, d: Direction) -> FloatLstm:
    check_float(b, op, d)
    return FloatLstm(b, op, d)


def _unidirectional(b: GraphBuilder, op: Operator, kernel: type) -> None:
    """A unidirectional LSTM run with ``kernel``'s arithmetic (float, hybrid or integer)."""
    d = unidirectional_direction(op)
    x_idx = op.inputs[0]
    time_major = bool(op.options.get("time_major", False))
    shape = sequence_shape(b, op, x_idx)
    arith = _float_direction(b, op, d) if kernel is FloatLstm else kernel(b, op, d)
    outputs = run_sequence(b, op, d, arith, b.input(x_idx), shape, time_major)
    y = stack(b, outputs, time_major)
    b.set_output(op.outputs[0], arith.output(y, op.outputs[0]) if hasattr(arith, "output") else y)


def unidirectional_sequence_lstm(b: GraphBuilder, op: Operator) -> None:
    """Float weights throughout; its record's kernels take int8 weights on float activations
    (hybrid) and integer activations."""
    _unidirectional(b, op, FloatLstm)


def hybrid_unidirectional(b: GraphBuilder, op: Operator) -> bool:
    """Whether the hybrid kernel runs: float input, int8 input-to-output weights."""
    return is_hybrid_lstm(b, op, unidirectional_direction(op))


def hybrid_unidirectional_lstm(b: GraphBuilder, op: Operator) -> None:
    _unidirectional(b, op, HybridLstm)


def integer_unidirectional_lstm(b: GraphBuilder, op: Operator) -> None:
    """The 8x8_16 kernel on any integer-quantized input (``IntegerLstm`` refuses all but int8)."""
    from tflite2qonnx.ops.recurrent.lstm_int import IntegerLstm

    _unidirectional(b, op, IntegerLstm)


def _directions(op: Operator) -> tuple[Direction, Direction]:
    g = [operand(op, k) for k in range(48)]
    forward = Direction(
        tuple(g[1:5]), tuple(g[5:9]), tuple(g[9:12]), tuple(g[12:16]), (g[16], g[17]),
        (g[35], g[36]),
    )  # fmt: skip
    backward = Direction(
        tuple(g[18:22]), tuple(g[22:26]), tuple(g[26:29]), tuple(g[29:33]), (g[33], g[34]),
        (g[37], g[38]),
    )  # fmt: skip
    return forward, backward


def hybrid_bidirectional(b: GraphBuilder, op: Operator) -> bool:
    """Whether the hybrid kernel runs: float input, int8 input-to-output weights in a direction
    (``hybrid_bidirectional_lstm`` refuses them in one only)."""
    return any(is_hybrid_lstm(b, op, d) for d in _directions(op))


def bidirectional_sequence_lstm(b: GraphBuilder, op: Operator) -> None:
    """Float weights throughout; its record's hybrid kernel takes int8 weights."""
    _bidirectional(b, op, lambda d: _float_direction(b, op, d))


def hybrid_bidirectional_lstm(b: GraphBuilder, op: Operator) -> None:
    def direction(d: Direction) -> FloatLstm:
        return HybridLstm(b, op, d) if is_hybrid_lstm(b, op, d) else _float_direction(b, op, d)

    _bidirectional(b, op, direction)


def _bidirectional(b: GraphBuilder, op: Operator, direction: Callable) -> None:
    """Both directions, each's arithmetic made by ``direction``."""
    g = [operand(op, k) for k in range(48)]
    if g[39] >= 0 or any(k >= 0 for k in g[40:48]):
        raise ConversionError(f"{op.name} with an auxiliary input is not supported", op.where)
    forward, backward = _directions(op)
    x_idx = op.inputs[0]
    if b.tensor(x_idx).dtype != "float32":
        raise ConversionError(f"{b.tensor(x_idx).dtype} {op.name} is not supported", op.where)
    time_major = bool(op.options.get("time_major", False))
    shape = sequence_shape(b, op, x_idx)
    x = b.input(x_idx)
    kernels = [direction(d) for d in (forward, backward)]
    if type(kernels[0]) is not type(kernels[1]):
        raise ConversionError(f"{op.name} with int8 weights in one direction only", op.where)
    merged = bool(op.options.get("merge_outputs", False))
    if merged and not time_major and shape[0] > 1 and kernels[0].hybrid:
        # lstm_eval.cc EvalHybrid offsets batch row b's output state by b * the merged width
        raise ConversionError(
            f"hybrid {op.name} with merge_outputs on a batch-major input of batch {shape[0]}: "
            "TFLite's kernel reads the output state of rows after the first past the state "
            "tensor (offset by the merged output width), so its result is undefined",
            op.where,
        )
    if merged and not time_major and shape[0] > 1:
        warnings.warn(
            f"{op.where}: {op.name} with merge_outputs on a batch-major input of batch "
            f"{shape[0]}: converted as defined (each direction's outputs concatenated); "
            "TFLite's kernel reads the state of rows b >= batch / 2 past its state tensor "
            "(offset by the merged width), so the interpreter differs there",
            ConversionWarning,
            stacklevel=2,
        )
    results = []
    for d, arith, reverse in ((forward, kernels[0], False), (backward, kernels[1], True)):
        outputs = run_sequence(b, op, d, arith, x, shape, time_major, reverse)
        results.append(stack(b, outputs, time_major))
    if merged:
        b.set_output(op.outputs[0], b.emit("Concat", results, axis=-1)[0])
    else:
        for idx, y in zip(op.outputs, results, strict=False):
            b.set_output(idx, y)


def unidirectional_sequence_rnn(b: GraphBuilder, op: Operator) -> None:
    """Float; its record's hybrid kernel (``rnn_hybrid``) takes int8 weights."""
    x_idx, w_idx, r_idx, bias_idx, h_idx = (operand(op, k) for k in range(5))
    _float_only(b, op, [w_idx, r_idx])
    time_major = bool(op.options.get("time_major", False))
    shape = sequence_shape(b, op, x_idx)
    steps = shape[0] if time_major else shape[1]
    units = b.tensor(w_idx).shape[0]
    x_part = b.emit("MatMul", [b.input(x_idx), b.input(w_idx, perm=(1, 0))])[0]
    x_part = b.emit("Add", [x_part, b.input(bias_idx)])[0]
    recurrent = b.input(r_idx, perm=(1, 0))
    h = initial_state(b, h_idx, units)
    outputs = []
    for t in range(steps):
        index = b.const(np.array(t, np.int64), "step")
        x_t = b.emit("Gather", [x_part, index], axis=0 if time_major else 1)[0]
        pre = b.emit("Add", [x_t, b.emit("MatMul", [h, recurrent])[0]])[0]
        h = fused_activation(b, op, pre)
        outputs.append(h)
    state_after(b, h_idx, h)
    b.set_output(op.outputs[0], stack(b, outputs, time_major))
