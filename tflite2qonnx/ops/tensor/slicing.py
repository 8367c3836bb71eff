"""Ops that cut, join and index tensors: SLICE, SPLIT, SPLIT_V, PACK, UNPACK,
GATHER, GATHER_ND, TILE, MIRROR_PAD, REVERSE_V2.

Axes are in TFLite's (source) order; the layout pass renumbers them for the attribute ops
(Slice, Split, Concat, Gather, Tile, Pad) and shows the terminate ones (Squeeze, Unsqueeze,
Reshape, GatherND) source order.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.common import rank_of
from tflite2qonnx.ops.tensor.operand_values import (
    dim_sizes,
    int64_value,
    known,
    onnx_pads,
    required_constant,
)

BIG = np.iinfo(np.int64).max
SMALL = np.iinfo(np.int64).min


def _int64(b: GraphBuilder, values, hint: str) -> str:
    return b.const(np.asarray(values, np.int64), hint)


def _slice(b: GraphBuilder, x: str, starts, ends, axes, steps=None) -> str:
    inputs = [x, _int64(b, starts, "starts"), _int64(b, ends, "ends"), _int64(b, axes, "axes")]
    if steps is not None:
        inputs.append(_int64(b, steps, "steps"))
    return b.emit("Slice", inputs)[0]


def slice_(b: GraphBuilder, op: Operator) -> None:
    """Constant begin / size fold into the Slice; computed ones (TensorListSetItem in a
    WHILE body slices at the loop counter) give ``ends = begin + size``, or the end where
    size is -1 (TFLite's begin is never negative)."""
    x = b.raw_input(op.inputs[0], op.outputs[0])
    rank = rank_of(b, op.inputs[0])
    begin, size = known(b, op, op.inputs[1]), known(b, op, op.inputs[2])
    if begin is not None and size is not None:
        ends = [BIG if s < 0 else int(a + s) for a, s in zip(begin, size, strict=True)]
        b.set_output(op.outputs[0], _slice(b, x, begin, ends, list(range(len(begin)))))
        return
    starts = int64_value(b, op.inputs[1], begin)
    sizes = int64_value(b, op.inputs[2], size)
    ends = b.emit("Where", [
        b.emit("Less", [sizes, _int64(b, 0, "zero")])[0],
        _int64(b, BIG, "big"),
        b.emit("Add", [starts, sizes])[0],
    ])[0]  # fmt: skip
    axes = _int64(b, list(range(rank)), "axes")
    b.set_output(op.outputs[0], b.emit("Slice", [x, starts, ends, axes])[0])


def _split(b: GraphBuilder, op: Operator, x_idx: int, axis: int, sizes: str | None) -> None:
    """ONNX Split along ``axis`` into ``sizes`` (an int64 value), or equal parts if None."""
    inputs = [b.input(x_idx)] if sizes is None else [b.input(x_idx), sizes]
    outs = b.emit("Split", inputs, len(op.outputs), axis=axis)
    for idx, value in zip(op.outputs, outs, strict=True):
        b.set_output(idx, b.reinterpret(value, x_idx, idx))


def _axis(b: GraphBuilder, op: Operator, pos: int, x_idx: int) -> int:
    why = "ONNX Split takes the axis as an attribute"
    return int(required_constant(b, op, pos, "axis", why)[0]) % rank_of(b, x_idx)


def split(b: GraphBuilder, op: Operator) -> None:
    """SPLIT(axis, input): equal parts (the kernel requires the dim to divide; a dynamic dim
    is divided at run time)."""
    x_idx = op.inputs[1]
    axis = _axis(b, op, 0, x_idx)
    dim = b.tensor(x_idx).shape_signature[axis]
    n = len(op.outputs)
    _split(b, op, x_idx, axis, None if dim < 0 else _int64(b, [dim // n] * n, "split"))


def split_v(b: GraphBuilder, op: Operator) -> None:
    """SPLIT_V(input, size_splits, axis): one size may be -1 (the rest of the dim); sizes
    and the dim may be known only at run time."""
    x_idx = op.inputs[0]
    axis = _axis(b, op, 2, x_idx)
    sizes = known(b, op, op.inputs[1])
    dim = b.tensor(x_idx).shape_signature[axis]
    if sizes is not None and (dim >= 0 or -1 not in sizes.tolist()):
        sizes = [int(s) for s in sizes]
        if -1 in sizes:
            sizes[sizes.index(-1)] = dim - sum(s for s in sizes if s >= 0)
        _split(b, op, x_idx, axis, _int64(b, sizes, "split"))
        return
    values = int64_value(b, op.inputs[1], sizes)
    rest = b.emit("Less", [values, _int64(b, 0, "zero")])[0]
    given = b.emit("Where", [rest, _int64(b, 0, "zero"), values])[0]
    total = b.emit("ReduceSum", [given, _int64(b, [0], "axes")], keepdims=1)[0]
    left = b.emit("Sub", [dim_sizes(b, x_idx, [axis]), total])[0]
    _split(b, op, x_idx, axis, b.emit("Where", [rest, left, values])[0])


def pack(b: GraphBuilder, op: Operator) -> None:
    """Stack along a new axis: Unsqueeze each value, then Concat."""
    axis = int(op.options.get("axis", 0)) % (rank_of(b, op.inputs[0]) + 1)
    axes = _int64(b, [axis], "pack_axis")
    parts = [b.emit("Unsqueeze", [b.raw_input(i, op.outputs[0]), axes])[0] for i in op.inputs]
    b.set_output(op.outputs[0], b.emit("Concat", parts, axis=axis)[0])


def unpack(b: GraphBuilder, op: Operator) -> None:
    """Split into size-1 slices along ``axis``, then Squeeze each."""
    x_idx = op.inputs[0]
    axis = int(op.options.get("axis", 0)) % rank_of(b, x_idx)
    n = len(op.outputs)
    parts = b.emit("Split", [b.input(x_idx), _int64(b, [1] * n, "split")], n, axis=axis)
    axes = _int64(b, [axis], "unpack_axis")
    for idx, part in zip(op.outputs, parts, strict=True):
        b.set_output(idx, b.reinterpret(b.emit("Squeeze", [part, axes])[0], x_idx, idx))


def _indices(b: GraphBuilder, idx: int) -> str:
    """Integer indices as int64 (GatherND requires it; constants fold)."""
    if b.tensor(idx).data is not None:
        return _int64(b, np.asarray(b.tensor(idx).data), "indices")
    return b.emit("Cast", [b.input(idx)], to=TensorProto.INT64)[0]


def gather(b: GraphBuilder, op: Operator) -> None:
    """Gather; with ``batch_dims`` (which ONNX Gather lacks) see ``_batched_gather``."""
    rank = rank_of(b, op.inputs[0])
    axis = int(op.options.get("axis", 0))
    if not -rank <= axis < rank:  # the kernel refuses it; a modulo would pick another axis
        raise ConversionError(
            f"GATHER axis {axis} is out of range for input tensor {op.inputs[0]} "
            f"'{b.tensor(op.inputs[0]).name}' of rank {rank}",
            op.where,
        )
    axis %= rank
    batch_dims = int(op.options.get("batch_dims", 0))
    if batch_dims < 0:
        batch_dims += rank_of(b, op.inputs[1])
    if batch_dims == 0:
        x = b.raw_input(op.inputs[0], op.outputs[0])
        y = b.emit("Gather", [x, _indices(b, op.inputs[1])], axis=axis)[0]
    elif not 0 < batch_dims <= axis:
        raise ConversionError(f"batch_dims {batch_dims} must be in 1..axis ({axis})", op.where)
    else:
        y = _batched_gather(b, op, axis, batch_dims)
    b.set_output(op.outputs[0], y)


def _batched_gather(b: GraphBuilder, op: Operator, axis: int, batch_dims: int) -> str:
    """GatherND with ``batch_dims`` on params whose ``axis`` is moved right after the batch
    dims, with the indices as 1-tuples; a second Transpose puts the dims between the batch
    dims and ``axis`` back in front of the gathered ones: B + A + I + rest, as TFLite's."""
    rank = rank_of(b, op.inputs[0])
    before = list(range(batch_dims, axis))  # A: the dims between the batch dims and axis
    x = b.raw_input(op.inputs[0], op.outputs[0])
    if before:
        perm = [*range(batch_dims), axis, *before, *range(axis + 1, rank)]
        x = b.emit("Transpose", [x], perm=perm)[0]
    t = b.tensor(op.inputs[1])
    if t.data is not None:
        indices = _int64(b, np.asarray(t.data)[..., None], "indices")
    else:
        indices = b.emit("Unsqueeze", [_indices(b, op.inputs[1]), _int64(b, [-1], "axes")])[0]
    y = b.emit("GatherND", [x, indices], batch_dims=batch_dims)[0]
    if before:
        n_gathered = len(t.shape) - batch_dims
        gathered = list(range(batch_dims, batch_dims + n_gathered))
        moved = list(range(batch_dims + n_gathered, batch_dims + n_gathered + len(before)))
        out_rank = rank - 1 + n_gathered
        rest = list(range(batch_dims + n_gathered + len(before), out_rank))
        y = b.emit("Transpose", [y], perm=[*range(batch_dims), *moved, *gathered, *rest])[0]
    return y


def gather_nd(b: GraphBuilder, op: Operator) -> None:
    x = b.raw_input(op.inputs[0], op.outputs[0])
    y = b.emit("GatherND", [x, _indices(b, op.inputs[1])])[0]
    b.set_output(op.outputs[0], y)


def tile(b: GraphBuilder, op: Operator) -> None:
    y = b.emit("Tile", [b.raw_input(op.inputs[0], op.outputs[0]), _indices(b, op.inputs[1])])[0]
    b.set_output(op.outputs[0], y)


def reverse_v2(b: GraphBuilder, op: Operator) -> None:
    rank = rank_of(b, op.inputs[0])
    why = "the reversed axes are written into the graph"
    axes = sorted({int(a) % rank for a in required_constant(b, op, 1, "axis", why)})
    n = len(axes)
    y = _slice(b, b.raw_input(op.inputs[0], op.outputs[0]), [BIG] * n, [SMALL] * n, axes, [-1] * n)
    b.set_output(op.outputs[0], y)


def mirror_pad(b: GraphBuilder, op: Operator) -> None:
    """REFLECT is ONNX Pad's reflect mode (paddings may be computed); SYMMETRIC (the edge
    repeated) is built from reversed Slices concatenated on each padded axis, counted from the
    end so that a dynamic dim needs no size."""
    x = b.raw_input(op.inputs[0], op.outputs[0])
    mode = op.options.get("mode", "REFLECT")
    if mode == "REFLECT":
        pads = onnx_pads(b, op, op.inputs[1])
        b.set_output(op.outputs[0], b.emit("Pad", [x, pads], mode="reflect")[0])
        return
    if mode != "SYMMETRIC":
        raise ConversionError(f"mode {mode} unsupported", op.where)
    why = "SYMMETRIC padding is written per padded axis"
    paddings = required_constant(b, op, 1, "paddings", why).reshape(-1, 2)
    for axis, (before, after) in enumerate(paddings.tolist()):
        if not before and not after:
            continue
        parts = []
        if before:
            parts.append(_slice(b, x, [before - 1], [SMALL], [axis], [-1]))
        parts.append(x)
        if after:  # the last ``after`` elements, reversed: -1 down to -after
            parts.append(_slice(b, x, [-1], [-after - 1], [axis], [-1]))
        x = b.emit("Concat", parts, axis=axis)[0]
    b.set_output(op.outputs[0], x)
