"""--bit-exact for a uint8 CONCATENATION whose inputs lie on grids other than its output's.

The uint8 kernel (ConcatenationWithScaling) copies such an input's integers through the
float32 map ``round(q * scale + bias) + zp_out`` (scale = s_in * (1 / s_out), bias = -zp_in *
scale): a 256-entry table per input (``exact_tables.concat_rescale_table``), a Gather on it.
The int8 kernel requires every input on the output's grid, where the default graph is exact.
"""

from __future__ import annotations

import numpy as np

from tflite2qonnx.fixed_point import grid, raw_integers
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.exact import int8_tables as tables
from tflite2qonnx.ops.exact.table_gather import lookup, storage_range


def rescales(b: GraphBuilder, op: Operator) -> bool:
    """Whether ``op`` is a uint8 CONCATENATION with an input on a grid other than its output's
    (elsewhere the default graph copies the integers, exactly)."""
    if b.tensor(op.outputs[0]).dtype != "uint8":
        return False
    if not all(b.tensor(i).dtype == "uint8" for i in op.inputs):
        return False
    return not all(_same_grids(b, op))


def _same_grids(b: GraphBuilder, op: Operator) -> list[bool]:
    g_out = grid(b, op.outputs[0], op.where)
    grids = [grid(b, i, op.where) for i in op.inputs]
    return [(g.scale, g.zero_point) == (g_out.scale, g_out.zero_point) for g in grids]


def concatenation(b: GraphBuilder, op: Operator) -> None:
    """uint8 CONCATENATION of inputs on differing grids (ConcatenationWithScaling, where
    ``rescales``): each such input's integers mapped by ``round(q * scale + bias) + zp_out`` in
    float32 (scale = s_in * (1 / s_out), bias = -zp_in * scale), a table per input; int8
    requires one grid."""
    g_out = grid(b, op.outputs[0], op.where)
    grids = [grid(b, i, op.where) for i in op.inputs]
    same = _same_grids(b, op)
    values = []
    for idx, g, keep in zip(op.inputs, grids, same, strict=True):
        if keep:
            values.append(b.input(idx))
            continue
        x_raw, _ = raw_integers(b, idx, op.where)
        q = storage_range(g)
        q_out = tables.concat_rescale_table(q, g, g_out)
        real = np.float32(g_out.scale) * (q_out - g_out.zero_point).astype(np.float32)
        values.append(lookup(b, x_raw, 0, real, "concat_rescale"))
    axis = int(op.options.get("axis", 0)) % len(b.tensor(op.outputs[0]).shape)
    y = b.emit("Concat", values, axis=axis)[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))
