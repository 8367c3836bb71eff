"""FULLY_CONNECTED: y = x @ W^T + b with W stored [units, depth], as MatMul + Add."""

from __future__ import annotations

import numpy as np

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.fixed_point import is_int16
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.exact import int8 as exact
from tflite2qonnx.ops.exact import int16 as exact_int16
from tflite2qonnx.ops.hybrid.fully_connected import hybrid_fully_connected, is_hybrid_fc
from tflite2qonnx.ops.treatment import emulates


def fully_connected(b: GraphBuilder, op: Operator) -> None:
    where = op.where
    if op.options.get("weights_format", "DEFAULT") != "DEFAULT":
        raise ConversionError(f"weights_format {op.options['weights_format']} unsupported", where)
    x_idx, w_idx = op.inputs[0], op.inputs[1]
    bias_idx = op.inputs[2] if len(op.inputs) > 2 else -1
    depth = b.tensor(w_idx).shape[-1]
    in_rank = len(b.tensor(x_idx).shape)

    def flatten(x: str) -> str:
        if in_rank != 2 and not op.options.get("keep_num_dims", False):
            x = b.emit("Reshape", [x, b.const(np.array([-1, depth], np.int64), "fc_shape")])[0]
        return x

    if emulates(b, op):
        kernel_fn = exact_int16.fully_connected if is_int16(b, x_idx) else exact.fully_connected
        return kernel_fn(b, op, flatten)
    if is_hybrid_fc(b, op):
        return hybrid_fully_connected(b, op, flatten(b.input(x_idx)))
    x = flatten(b.input(x_idx))
    # W^T is folded at conversion time; per-axis weight scales move from axis 0 to axis 1.
    y = b.emit("MatMul", [x, b.input(w_idx, perm=(1, 0))])[0]
    if bias_idx >= 0:
        y = b.emit("Add", [y, b.input(bias_idx)])[0]
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
