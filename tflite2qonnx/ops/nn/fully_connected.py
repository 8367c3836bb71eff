"""FULLY_CONNECTED: y = x @ W^T + b with W stored [units, depth], as MatMul + Add."""

from __future__ import annotations

from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.geometry import fc_rows
from tflite2qonnx.ops.nn.kernel_bias import kernel_bias


def fully_connected(b: GraphBuilder, op: Operator) -> None:
    """Float FULLY_CONNECTED; its record's kernels take integer activations (int8, 16x8) and
    int8 or blockwise weights on float ones (hybrid)."""
    w_idx = op.inputs[1]
    x, bias_idx = fc_rows(b, op)
    # W^T is folded at conversion time; per-axis weight scales move from axis 0 to axis 1.
    y = b.emit("MatMul", [x, b.input(w_idx, perm=(1, 0))])[0]
    if bias_idx >= 0:
        y = b.emit("Add", [y, kernel_bias(b, op, bias_idx, w_idx)])[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))


def batch_matmul(b: GraphBuilder, op: Operator) -> None:
    """x @ y over the last two axes, batch axes broadcast (as MatMul's); adj_x / adj_y
    transpose those two axes first."""
    operands = []
    for idx, key in ((op.inputs[0], "adj_x"), (op.inputs[1], "adj_y")):
        rank = len(b.tensor(idx).shape)
        perm = [*range(rank - 2), rank - 1, rank - 2]
        operands.append(b.input(idx, perm=perm) if op.options.get(key, False) else b.input(idx))
    b.set_output(op.outputs[0], b.emit("MatMul", operands)[0])
