"""Data movement between batch, space and matrix dims: SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND,
MATRIX_DIAG, MATRIX_SET_DIAG, REVERSE_SEQUENCE; and L2_POOL_2D.

The integer kernels copy raw integers (``GraphBuilder.raw_input``); padding and off-diagonal
cells hold what the kernel writes, read on the output's grid.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.common import table_size
from tflite2qonnx.ops.padding import spatial_attrs


def _i64(b: GraphBuilder, values, hint: str) -> str:
    return b.const(np.asarray(values, np.int64), hint)


def _static_shape(b: GraphBuilder, op: Operator, idx: int) -> list[int]:
    """The tensor's shape; only the batch dim (0) may be dynamic (-1)."""
    shape = list(b.tensor(idx).shape_signature)
    if any(d < 0 for d in shape[1:]):
        raise ConversionError(f"{op.name} needs static non-batch dims, got {shape}", op.where)
    return shape


def _block(b: GraphBuilder, op: Operator) -> tuple[list[int], np.ndarray | None]:
    """block_shape [M] (a constant) and paddings / crops [M, 2]: None when computed at run time
    (TF's dilated convolution on dynamic height and width derives them from SHAPE)."""
    block = [int(v) for v in b.int_constant(op.inputs[1], op.where).reshape(-1)]
    if min(block, default=1) < 1:
        raise ConversionError(f"block_shape {block} must be positive", op.where)
    if b.constant(op.inputs[2]) is None:
        count = int(np.prod(b.tensor(op.inputs[2]).shape))
        if count != 2 * len(block):
            raise ConversionError(f"{count} padding values for {len(block)} block dims", op.where)
        return block, None
    pads = b.int_constant(op.inputs[2], op.where).reshape(-1)
    if pads.size != 2 * len(block):
        raise ConversionError(f"{pads.size} padding values for {len(block)} block dims", op.where)
    pads = pads.reshape(-1, 2)
    if (pads < 0).any():
        raise ConversionError(
            f"block_shape {block} and paddings {pads.tolist()} do not fit", op.where
        )
    return block, pads


def _is_static(b: GraphBuilder, idx: int, pads: np.ndarray | None) -> bool:
    return pads is not None and all(d >= 0 for d in b.tensor(idx).shape_signature[1:])


def space_to_batch_nd(b: GraphBuilder, op: Operator) -> None:
    """TF's definition: pad the M spatial dims, split each into (dim / block, block), move the
    block factors in front of the batch, merge them into it."""
    block, pads = _block(b, op)
    if not _is_static(b, op.inputs[0], pads):
        _space_to_batch_dynamic(b, op, block)
        return
    shape = _static_shape(b, op, op.inputs[0])
    m, rank = len(block), len(shape)
    x = b.raw_input(op.inputs[0], op.outputs[0])
    if pads.any():
        onnx_pads = [0, *pads[:, 0], *[0] * (rank - 1 - m), 0, *pads[:, 1], *[0] * (rank - 1 - m)]
        x = b.emit("Pad", [x, _i64(b, onnx_pads, "s2b_pads")])[0]
    padded = [d + int(p.sum()) for d, p in zip(shape[1 : 1 + m], pads, strict=True)]
    if any(d % k for d, k in zip(padded, block, strict=True)):
        raise ConversionError(f"padded dims {padded} are not multiples of {block}", op.where)
    split = [-1]
    for d, k in zip(padded, block, strict=True):
        split += [d // k, k]
    rest = shape[1 + m :]
    x = b.emit("Reshape", [x, _i64(b, split + rest, "s2b_split")])[0]
    x = b.emit("Transpose", [x], perm=_s2b_perm(m, len(rest)))[0]
    merged = [-1, *[d // k for d, k in zip(padded, block, strict=True)], *rest]
    b.set_output(op.outputs[0], b.emit("Reshape", [x, _i64(b, merged, "s2b_merge")])[0])


def _s2b_perm(m: int, rest: int) -> list[int]:
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)]
    return perm + list(range(1 + 2 * m, 1 + 2 * m + rest))


def _b2s_perm(m: int, rest: int) -> list[int]:
    perm = [m]
    for i in range(m):
        perm += [m + 1 + i, i]
    return perm + list(range(1 + 2 * m, 1 + 2 * m + rest))


def _dims(b: GraphBuilder, shape: str, start: int, end: int) -> str:
    """``shape[start:end]`` of an int64 Shape value."""
    return b.emit("Slice", [shape, _i64(b, [start], "begin"), _i64(b, [end], "end")])[0]


def _pair_column(b: GraphBuilder, pairs: str, column: int) -> str:
    """Column ``column`` of a run-time [M, 2] paddings / crops operand, as int64 [M]."""
    pairs = b.emit("Reshape", [pairs, _i64(b, [-1, 2], "pairs")])[0]
    col = b.emit(
        "Slice",
        [
            pairs,
            *(_i64(b, [v], h) for v, h in ((column, "begin"), (column + 1, "end"), (1, "axis"))),
        ],
    )[0]
    col = b.emit("Reshape", [col, _i64(b, [-1], "flat")])[0]
    return b.emit("Cast", [col], to=TensorProto.INT64)[0]


def _space_to_batch_dynamic(b: GraphBuilder, op: Operator, block: list[int]) -> None:
    """The same with the shapes read at run time. The split keeps the real batch (not -1),
    so padded dims that are not multiples of the block fail in the Reshape, as the kernel
    refuses them, instead of folding the remainder into the batch."""
    m, rank = len(block), len(b.tensor(op.inputs[0]).shape)
    x = b.raw_input(op.inputs[0], op.outputs[0])
    pairs = b.input(op.inputs[2])
    zeros = [_i64(b, [0] * (rank - 1 - m), "zeros")] if rank - 1 > m else []
    begin, end = (_pair_column(b, pairs, c) for c in (0, 1))
    first = _i64(b, [0], "zero")
    onnx_pads = b.emit("Concat", [first, begin, *zeros, first, end, *zeros], axis=0)[0]
    x = b.emit("Pad", [x, onnx_pads])[0]
    shape = b.emit("Shape", [x])[0]
    blocks = _i64(b, block, "block")
    outer = b.emit("Div", [_dims(b, shape, 1, 1 + m), blocks])[0]
    split = [_dims(b, shape, 0, 1)]
    for i in range(m):
        split += [_dims(b, outer, i, i + 1), _i64(b, [block[i]], "block_dim")]
    rest = _dims(b, shape, 1 + m, rank)
    split_shape = b.emit("Concat", [*split, rest], axis=0)[0]
    x = b.emit("Reshape", [x, split_shape])[0]
    x = b.emit("Transpose", [x], perm=_s2b_perm(m, rank - 1 - m))[0]
    merged = b.emit("Concat", [_i64(b, [-1], "batch"), outer, rest], axis=0)[0]
    b.set_output(op.outputs[0], b.emit("Reshape", [x, merged])[0])


def batch_to_space_nd(b: GraphBuilder, op: Operator) -> None:
    """The inverse: split the batch into (block..., batch), interleave, merge, crop."""
    block, crops = _block(b, op)
    if not _is_static(b, op.inputs[0], crops):
        _batch_to_space_dynamic(b, op, block)
        return
    shape = _static_shape(b, op, op.inputs[0])
    m = len(block)
    spatial, rest = shape[1 : 1 + m], shape[1 + m :]
    x = b.raw_input(op.inputs[0], op.outputs[0])
    x = b.emit("Reshape", [x, _i64(b, [*block, -1, *spatial, *rest], "b2s_split")])[0]
    x = b.emit("Transpose", [x], perm=_b2s_perm(m, len(rest)))[0]
    full = [d * k for d, k in zip(spatial, block, strict=True)]
    x = b.emit("Reshape", [x, _i64(b, [-1, *full, *rest], "b2s_merge")])[0]
    if crops.any():
        ends = [d - int(c[1]) for d, c in zip(full, crops, strict=True)]
        axes = list(range(1, 1 + m))
        x = b.emit(
            "Slice",
            [x, _i64(b, crops[:, 0], "b2s_begin"), _i64(b, ends, "b2s_end"), _i64(b, axes, "ax")],
        )[0]
    b.set_output(op.outputs[0], x)


def _batch_to_space_dynamic(b: GraphBuilder, op: Operator, block: list[int]) -> None:
    """The inverse with run-time shapes and crops."""
    m, rank = len(block), len(b.tensor(op.inputs[0]).shape)
    x = b.raw_input(op.inputs[0], op.outputs[0])
    shape = b.emit("Shape", [x])[0]
    spatial, rest = _dims(b, shape, 1, 1 + m), _dims(b, shape, 1 + m, rank)
    parts = [_i64(b, block, "block"), _i64(b, [-1], "batch"), spatial, rest]
    x = b.emit("Reshape", [x, b.emit("Concat", parts, axis=0)[0]])[0]
    x = b.emit("Transpose", [x], perm=_b2s_perm(m, rank - 1 - m))[0]
    full = b.emit("Mul", [spatial, _i64(b, block, "block")])[0]
    merged = b.emit("Concat", [_i64(b, [-1], "batch"), full, rest], axis=0)[0]
    x = b.emit("Reshape", [x, merged])[0]
    pairs = b.input(op.inputs[2])
    begin, end_crop = (_pair_column(b, pairs, c) for c in (0, 1))
    end = b.emit("Sub", [full, end_crop])[0]
    axes = _i64(b, list(range(1, 1 + m)), "axes")
    b.set_output(op.outputs[0], b.emit("Slice", [x, begin, end, axes])[0])


def _raw_zero(b: GraphBuilder, out_idx: int) -> str:
    """The value the kernel's ``T(0)`` cell holds: real 0, or raw 0 on a quantized grid."""
    q = b.tensor(out_idx).quant
    value = 0.0 if q is None or q.axis is not None else -float(q.scale) * float(q.zero_point)
    dtype = b.tensor(out_idx).dtype
    if q is None and dtype not in ("float32", "float16"):
        return b.const(np.array(0, dtype), "zero")
    return b.const(np.array(value, np.float32), "zero")


def matrix_diag(b: GraphBuilder, op: Operator) -> None:
    """(..., n) -> (..., n, n): the input on the diagonal, zeros elsewhere."""
    n = _static_shape(b, op, op.inputs[0])[-1]
    x = b.raw_input(op.inputs[0], op.outputs[0])
    row = b.emit("Unsqueeze", [x, _i64(b, [-2], "axis")])[0]  # (..., 1, n): column j holds x_j
    table_size(n * n, "MATRIX_DIAG's mask", op.where)
    eye = b.const(np.eye(n, dtype=bool), "diag_mask")
    b.set_output(op.outputs[0], b.emit("Where", [eye, row, _raw_zero(b, op.outputs[0])])[0])


def matrix_set_diag(b: GraphBuilder, op: Operator) -> None:
    """(..., m, n) with its main diagonal replaced by (..., min(m, n))."""
    m, n = _static_shape(b, op, op.inputs[0])[-2:]
    x = b.raw_input(op.inputs[0], op.outputs[0])
    diag = b.raw_input(op.inputs[1], op.outputs[0])
    # cell (i, i) must read diag[i]: along rows (m <= n) or along columns
    diag = b.emit("Unsqueeze", [diag, _i64(b, [-1 if m <= n else -2], "axis")])[0]
    table_size(m * n, "MATRIX_SET_DIAG's mask", op.where)
    eye = b.const(np.eye(m, n, dtype=bool), "diag_mask")
    b.set_output(op.outputs[0], b.emit("Where", [eye, diag, x])[0])


def reverse_sequence(b: GraphBuilder, op: Operator) -> None:
    """ONNX ReverseSequence wants batch and time on axes 0 and 1: other axes are moved there
    and back."""
    rank = len(b.tensor(op.inputs[0]).shape)
    seq, batch = (int(op.options.get(k, 0)) % rank for k in ("seq_dim", "batch_dim"))
    if seq == batch:
        raise ConversionError(f"seq_dim and batch_dim are both {seq}", op.where)
    x = b.raw_input(op.inputs[0], op.outputs[0])
    lengths = b.emit("Cast", [b.input(op.inputs[1])], to=TensorProto.INT64)[0]
    if {seq, batch} == {0, 1}:
        y = b.emit("ReverseSequence", [x, lengths], batch_axis=batch, time_axis=seq)[0]
        b.set_output(op.outputs[0], y)
        return
    perm = [batch, seq] + [a for a in range(rank) if a not in (batch, seq)]
    x = b.emit("Transpose", [x], perm=perm)[0]
    y = b.emit("ReverseSequence", [x, lengths], batch_axis=0, time_axis=1)[0]
    y = b.emit("Transpose", [y], perm=[int(a) for a in np.argsort(perm)])[0]
    b.set_output(op.outputs[0], y)


def l2_pool_2d(b: GraphBuilder, op: Operator) -> None:
    """sqrt(mean of x^2 over the window's cells inside the input), TFLite's float kernel."""
    if b.tensor(op.inputs[0]).quant is not None:
        raise ConversionError("L2_POOL_2D has a float kernel only", op.where)
    kernel = [op.options["filter_height"], op.options["filter_width"]]
    attrs = spatial_attrs(b, op, kernel)
    x = b.input(op.inputs[0])
    sq = b.emit("Mul", [x, x])[0]
    mean = b.emit("AveragePool", [sq], kernel_shape=kernel, count_include_pad=0, **attrs)[0]
    y = b.emit("Sqrt", [mean])[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))
