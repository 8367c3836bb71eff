"""DYNAMIC_UPDATE_SLICE (a block written into a tensor at run-time offsets, as LLM KV caches
do) and EMBEDDING_LOOKUP (rows of a table, float or hybrid int8 / uint8)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.common import table_size
from tflite2qonnx.ops.int64_order import extreme


def dynamic_update_slice(b: GraphBuilder, op: Operator) -> None:
    """ScatterND of the update at start + every offset of its block: each cell is written once.
    The kernel clamps the start so the block fits (XLA's rule), and copies raw integers."""
    operand_idx, update_idx, start_idx = (op.inputs[i] for i in range(3))
    shape = list(b.tensor(operand_idx).shape_signature)
    block = list(b.tensor(update_idx).shape_signature)
    if min(shape + block, default=0) < 0 or len(shape) != len(block):
        raise ConversionError(f"needs static shapes, got {shape} and {block}", op.where)
    if any(u > d for u, d in zip(block, shape, strict=True)):
        raise ConversionError(f"update {block} does not fit into {shape}", op.where)
    start = b.emit("Cast", [b.input(start_idx)], to=TensorProto.INT64)[0]
    high = b.const(np.array(shape, np.int64) - np.array(block, np.int64), "dus_high")
    elem = b.elem_type(start_idx)  # int64 start: ``int64_order`` (onnxruntime's Max / Min)
    start = extreme(b, "Min", start, high, elem)
    start = extreme(b, "Max", start, b.const(np.zeros(1, np.int64), "z"), elem)
    table_size(int(np.prod(block)) * len(block), "update offsets", op.where)
    offsets = np.stack(np.indices(block), axis=-1).astype(np.int64)  # [*block, rank]
    indices = b.emit("Add", [b.const(offsets, "dus_offsets"), start])[0]
    x = b.raw_input(operand_idx, op.outputs[0])
    update = b.raw_input(update_idx, op.outputs[0])
    b.set_output(op.outputs[0], b.emit("ScatterND", [x, indices, update])[0])


def embedding_lookup(b: GraphBuilder, op: Operator) -> None:
    """Rows ``ids`` of ``value``. A quantized table with a float output is the hybrid kernel:
    q * scale of the row, zero point ignored, so only zero points of 0 are read as such."""
    ids_idx, value_idx = op.inputs[0], op.inputs[1]
    value, out = b.tensor(value_idx), b.tensor(op.outputs[0])
    if value.quant is not None and out.quant is None:
        if any(int(z) != 0 for z in value.quantization.zero_point):
            raise ConversionError("hybrid lookup of a table with a non-zero zero point", op.where)
        table = b.input(value_idx)
    else:
        table = b.raw_input(value_idx, op.outputs[0])
    ids = b.emit("Cast", [b.input(ids_idx)], to=TensorProto.INT64)[0]
    b.set_output(op.outputs[0], b.emit("Gather", [table, ids], axis=0)[0])
