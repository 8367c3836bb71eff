"""SOFTMAX (int8 / uint8 input) as TFLite's builtin kernel computes it under --bit-exact.

The builtin kernel (activations.cc, SoftmaxPrepare / SoftmaxQuantized; the reference resolver
registers the same kernel) does not use the fixed-point reference_ops::Softmax: Prepare fills a
float table ``table[255 - d] = expf(-s_in * beta * d)`` (PopulateSoftmaxLookupTable) and
optimized_ops::Softmax, per row of the last axis, computes in float32

    e_j = table[255 - (max - q_j)];   sum = ((0 + e_0) + e_1) + ...   (in order)
    inv = 1 / (sum * s_out);          q_out_j = round(e_j * inv) + zp_out, clamped

with round = std::round for int8 / int16 outputs and ``(int)(p + 0.5f)`` for uint8 (x86-64
builds; aarch64 builds with clang use a uint16 table instead, not emulated here).

In ONNX: the exponentials are a Gather on that table (made with the C library's expf, which the
kernel calls), the in-order float32 sum is the last element of a float32 CumSum (onnxruntime
accumulates it in order; a ReduceSum may reassociate), taken as the row's ReduceMax since every
term is positive; the divisions and products are single float32 operations as in the kernel.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from tflite2qonnx.fixed_point import cast, f64, grid, raw_integers
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.common import rank_of, reduce_axes
from tflite2qonnx.ops.exact.table_gather import c_float_fn, lookup


def exp_table(s_in: float, beta: float) -> np.ndarray:
    """``expf(-s_in * beta * d)`` for d = 0..255 (the kernel's table, reversed), float32."""
    scale = np.float32(-np.float32(s_in) * np.float32(beta))
    return c_float_fn("expf", scale * np.arange(256, dtype=np.float32))


def softmax(b: GraphBuilder, op: Operator) -> None:
    where = op.where
    x_raw, g_in = raw_integers(b, op.inputs[0], where)
    g_out = grid(b, op.outputs[0], where)
    axis = rank_of(b, op.inputs[0]) - 1
    row_max = reduce_axes(b, "ReduceMax", x_raw, [axis], 1)
    below_max = b.emit("Sub", [row_max, x_raw])[0]
    e = lookup(b, below_max, 0, exp_table(g_in.scale, op.options.get("beta", 1.0)), "exp")
    running = b.emit("CumSum", [e, b.const(np.array(axis, np.int64), "axis")])[0]
    total = reduce_axes(b, "ReduceMax", running, [axis], 1)
    scaled = b.emit("Mul", [total, b.const(np.array(g_out.scale, np.float32), "s_out")])[0]
    inv = b.emit("Div", [b.const(np.array(1.0, np.float32), "one"), scaled])[0]
    p = b.emit("Mul", [e, inv])[0]
    if b.tensor(op.outputs[0]).dtype == "uint8":  # (int)(p + 0.5f): a float32 sum, truncated
        k = b.emit("Floor", [b.emit("Add", [p, b.const(np.array(0.5, np.float32), "half")])[0]])[0]
    else:  # std::round of a non-negative float: floor(p + 1/2) in float64 is exact
        p64 = cast(b, p, TensorProto.DOUBLE)
        k = b.emit("Floor", [b.emit("Add", [p64, f64(b, 0.5, "half")])[0]])[0]
        k = cast(b, k, TensorProto.FLOAT)
    y = b.emit("Mul", [k, b.const(np.array(g_out.scale, np.float32), "output_scale")])[0]
    b.set_output(op.outputs[0], y)
