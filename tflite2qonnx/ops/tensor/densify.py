"""DENSIFY: a sparse constant (TFLite's sparsity format) expanded at conversion time.

The stored values are visited in ``traversal_order`` over the expanded dims (the tensor's dims,
those named in ``block_map`` counted in blocks, then one dim per block axis); each level is
DENSE (``dense_size`` children per parent) or SPARSE_CSR (children ``array_indices[seg[p]:
seg[p + 1]]`` of parent p). Element ``k`` of a dim in blocks sits at ``block * size + k``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator, Tensor
from tflite2qonnx.quantization import dequantize


def densify_tensor(tensor: Tensor) -> np.ndarray:
    """The dense array of a sparse constant, in its storage dtype."""
    sp = tensor.sparsity
    rank, n = len(tensor.shape), len(sp.traversal_order)
    # one row per stored value so far: its index in each expanded dim, and its position
    idx = np.zeros((1, n), np.int64)
    pos = np.zeros(1, np.int64)
    for level, meta in enumerate(sp.dim_metadata):
        dim = sp.traversal_order[level]
        if meta.format == "DENSE":
            size = meta.dense_size
            idx = np.repeat(idx, size, axis=0)
            child = np.tile(np.arange(size, dtype=np.int64), len(pos))
            pos = np.repeat(pos, size) * size + child
        else:
            seg, ind = meta.array_segments, meta.array_indices
            counts = seg[pos + 1] - seg[pos]
            starts = np.repeat(seg[pos], counts)
            offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
            pos = starts + offsets
            idx = np.repeat(idx, counts, axis=0)
            child = ind[pos]
        idx[:, dim] = child
    values = np.asarray(tensor.data).reshape(-1)
    if len(pos) and pos.max() >= values.size:
        raise ConversionError("sparsity metadata addresses more values than stored", tensor.name)
    coords = idx[:, :rank].copy()
    for b, dim in enumerate(sp.block_map):
        level = sp.traversal_order.index(rank + b)
        coords[:, dim] = coords[:, dim] * sp.dim_metadata[level].dense_size + idx[:, rank + b]
    dense = np.zeros(tensor.shape, values.dtype)
    dense[tuple(coords.T)] = values[pos]
    return dense


def densify(b: GraphBuilder, op: Operator) -> None:
    """The output is a constant: real values (dequantized or float16 widened) folded."""
    tensor = b.tensor(op.inputs[0])
    if tensor.data is None or tensor.sparsity is None:
        raise ConversionError("DENSIFY needs a sparse constant input", op.where)
    dense = dataclasses.replace(tensor, data=densify_tensor(tensor), sparsity=None)
    b.set_constant(op.outputs[0], dequantize(dense))
