"""Blockwise (LiteRT BlockwiseQuantization) FULLY_CONNECTED: float input, constant int4 / int2
weights [units, depth] with one scale per block of ``block_size`` values along depth
(ai-edge-quantizer's dynamic_wi4b32 / wi4b64).

The builtin optimized kernel (measured on LiteRT 2.3: the reference kernel returns the bias
alone for these weights) quantizes each input row asymmetrically to int8 on the fly, as the
hybrid kernels do with ``asymmetric_quantize_inputs`` (``ops.hybrid.quant``), takes one
integer dot product per block, and sums the blocks in float32 in block order:
acc = sum_b float(dot_b) * block_scale[unit, b]; y = acc * factor + bias, then the fused
activation. Integer products run as int32 MatMul (exact); the block sum is a chain of Adds,
so its order is the kernel's.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.geometry import fc_rows
from tflite2qonnx.ops.hybrid.quant import quantize_rows


def is_blockwise_fc(b: GraphBuilder, op: Operator) -> bool:
    """Float input with blockwise-quantized weights."""
    w = b.tensor(op.inputs[1])
    blockwise = w.quantization is not None and w.quantization.block_size > 0
    return blockwise and b.tensor(op.inputs[0]).dtype == "float32"


def _c(b: GraphBuilder, value: np.ndarray, hint: str) -> str:
    return b.const(np.asarray(value), hint)


def fully_connected(b: GraphBuilder, op: Operator) -> None:
    """The blockwise kernel: its record's ``hybrid`` kernel where ``is_blockwise_fc``."""
    x, bias_idx = fc_rows(b, op)
    w_idx = op.inputs[1]
    t = b.tensor(w_idx)
    q = t.quantization
    where = f"{op.where}, tensor {w_idx} '{t.name}'"
    if t.data is None or len(t.shape) != 2 or q.quantized_dimension != 1:
        raise ConversionError("blockwise FULLY_CONNECTED needs constant [units, depth] weights "
                              "with blocks along depth", where)  # fmt: skip
    if np.any(q.zero_point != 0):
        raise ConversionError("blockwise FULLY_CONNECTED with weight zero points", where)
    if bias_idx >= 0 and b.tensor(bias_idx).dtype != "float32":
        raise ConversionError("blockwise FULLY_CONNECTED needs a float bias", op.where)
    units, depth = t.shape
    block = q.block_size
    n_blocks = depth // block
    # the weights keep their Quant (full-shape scale), recovered exactly as integers
    args = t.quant
    real = b.input(w_idx)
    w_int = b.emit("Round", [b.emit("Div", [real, _c(b, args.scale.astype(np.float32),
                                                     "w_scale")])[0]])[0]  # fmt: skip
    w_int = b.emit("Reshape", [w_int, _c(b, np.array([units, n_blocks, block]), "w_blocks")])[0]
    w_int = b.emit("Transpose", [w_int], perm=[1, 2, 0])[0]  # [blocks, block, units]
    w_int = b.emit("Cast", [w_int], to=TensorProto.INT32)[0]
    q_x, factor = quantize_rows(b, x, (depth,), True)  # q - zp, per row factor
    q_x = b.emit("Reshape", [q_x, _c(b, np.array([-1, n_blocks, block]), "x_blocks")])[0]
    q_x = b.emit("Transpose", [q_x], perm=[1, 0, 2])[0]  # [blocks, rows, block]
    dots = b.emit("MatMul", [b.emit("Cast", [q_x], to=TensorProto.INT32)[0], w_int])[0]
    dots = b.emit("Cast", [dots], to=TensorProto.FLOAT)[0]  # [blocks, rows, units]
    scales = np.asarray(q.scale, np.float32).T.reshape(n_blocks, 1, units)
    terms = b.emit("Mul", [dots, _c(b, scales, "block_scales")])[0]
    sizes = _c(b, np.ones(n_blocks, np.int64), "block_split")
    parts = b.emit("Split", [terms, sizes], n_blocks, axis=0) if n_blocks > 1 else [terms]
    acc = parts[0]
    for part in parts[1:]:
        acc = b.emit("Add", [acc, part])[0]
    acc = b.emit("Squeeze", [acc, _c(b, np.array([0]), "block_axis")])[0]
    y = b.emit("Mul", [acc, factor])[0]
    if bias_idx >= 0:
        y = b.emit("Add", [y, b.input(bias_idx)])[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))
