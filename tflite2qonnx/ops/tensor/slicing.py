"""Ops that cut, join and index tensors: SLICE, STRIDED_SLICE, SPLIT, SPLIT_V, PACK, UNPACK,
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

BIG = np.iinfo(np.int64).max
SMALL = np.iinfo(np.int64).min


def _int64(b: GraphBuilder, values, hint: str) -> str:
    return b.const(np.asarray(values, np.int64), hint)


def _slice(b: GraphBuilder, x: str, starts, ends, axes, steps=None) -> str:
    inputs = [x, _int64(b, starts, "starts"), _int64(b, ends, "ends"), _int64(b, axes, "axes")]
    if steps is not None:
        inputs.append(_int64(b, steps, "steps"))
    return b.emit("Slice", inputs)[0]


def _reshape_to_output(b: GraphBuilder, op: Operator, y: str) -> str:
    """A Reshape to the output's shape when slicing alone does not give it."""
    out = list(b.tensor(op.outputs[0]).shape_signature)
    return b.emit("Reshape", [y, _int64(b, out, "shape")])[0]


def slice_(b: GraphBuilder, op: Operator) -> None:
    """Constant begin / size fold into the Slice; computed ones (TensorListSetItem in a
    WHILE body slices at the loop counter) give ``ends = begin + size``, or the end where
    size is -1 (TFLite's begin is never negative)."""
    x = b.raw_input(op.inputs[0], op.outputs[0])
    rank = rank_of(b, op.inputs[0])
    begin, size = _known(b, op, op.inputs[1]), _known(b, op, op.inputs[2])
    if begin is not None and size is not None:
        ends = [BIG if s < 0 else int(a + s) for a, s in zip(begin, size, strict=True)]
        b.set_output(op.outputs[0], _slice(b, x, begin, ends, list(range(len(begin)))))
        return
    starts = _int64_value(b, op.inputs[1], begin)
    sizes = _int64_value(b, op.inputs[2], size)
    ends = b.emit("Where", [
        b.emit("Less", [sizes, _int64(b, 0, "zero")])[0],
        _int64(b, BIG, "big"),
        b.emit("Add", [starts, sizes])[0],
    ])[0]  # fmt: skip
    axes = _int64(b, list(range(rank)), "axes")
    b.set_output(op.outputs[0], b.emit("Slice", [x, starts, ends, axes])[0])


def _known(b: GraphBuilder, op: Operator, idx: int) -> np.ndarray | None:
    """A constant integer operand's values, else None (computed at run time)."""
    if idx < 0:
        raise ConversionError(f"{op.name}: a required operand is missing", op.where)
    if b.tensor(idx).data is None and b.constant(idx) is None:
        return None
    return b.int_constant(idx, op.where).reshape(-1)


def _int64_value(b: GraphBuilder, idx: int, known: np.ndarray | None) -> str:
    if known is not None:
        return _int64(b, known, b.tensor_name(idx))
    return b.emit("Cast", [b.emit("Reshape", [b.input(idx), _int64(b, [-1], "flat")])[0]],
                  to=TensorProto.INT64)[0]  # fmt: skip


def strided_slice(b: GraphBuilder, op: Operator) -> None:
    """TF's sparse slice spec: begin/end masks take the whole dim, the ellipsis stands for the
    dims no entry names, new axes and shrunk dims are reshaped in at the end, ``offset`` makes
    end relative to begin. One Slice over the named dims, then a Reshape if the rank changes.
    """
    begin = b.int_constant(op.inputs[1], op.where).reshape(-1)
    end = b.int_constant(op.inputs[2], op.where).reshape(-1)
    strides = (
        b.int_constant(op.inputs[3], op.where).reshape(-1)
        if len(op.inputs) > 3 and op.inputs[3] >= 0
        else np.ones_like(begin)
    )
    opt = op.options
    masks = {k: int(opt.get(k, 0)) for k in ("begin_mask", "end_mask", "ellipsis_mask",
                                            "new_axis_mask", "shrink_axis_mask")}  # fmt: skip
    shape = b.tensor(op.inputs[0]).shape_signature
    rank = len(shape)
    n_spec = len(begin)
    named = sum(1 for i in range(n_spec) if not (masks["new_axis_mask"] >> i) & 1
                and not (masks["ellipsis_mask"] >> i) & 1)  # fmt: skip
    starts, ends, axes, steps = [], [], [], []
    dim = 0
    for i in range(n_spec):
        bit = 1 << i
        if masks["ellipsis_mask"] & bit:
            dim += rank - named
            continue
        if masks["new_axis_mask"] & bit:
            continue
        s = int(strides[i])
        if s == 0:
            raise ConversionError("stride 0", op.where)
        lo = int(begin[i])
        hi = int(end[i]) + (lo if opt.get("offset", False) else 0)
        if masks["shrink_axis_mask"] & bit:
            if lo < 0:
                if shape[dim] < 0:
                    raise ConversionError("negative index into a dynamic dim", op.where)
                lo += shape[dim]
            hi, s = lo + 1, 1
        else:
            if masks["begin_mask"] & bit:
                lo = 0 if s > 0 else BIG
            if masks["end_mask"] & bit:
                hi = BIG if s > 0 else SMALL
        starts.append(lo)
        ends.append(hi)
        axes.append(dim)
        steps.append(s)
        dim += 1
    y = b.raw_input(op.inputs[0], op.outputs[0])
    if axes:
        y = _slice(b, y, starts, ends, axes, steps)
    if masks["new_axis_mask"] or masks["shrink_axis_mask"]:
        y = _reshape_to_output(b, op, y)
    b.set_output(op.outputs[0], y)


def _split(b: GraphBuilder, op: Operator, x_idx: int, axis: int, sizes: list[int]) -> None:
    outs = b.emit("Split", [b.input(x_idx), _int64(b, sizes, "split")], len(sizes), axis=axis)
    for idx, value in zip(op.outputs, outs, strict=True):
        b.set_output(idx, b.reinterpret(value, x_idx, idx))


def split(b: GraphBuilder, op: Operator) -> None:
    """SPLIT(axis, input): equal parts."""
    x_idx = op.inputs[1]
    axis = int(b.int_constant(op.inputs[0], op.where).reshape(-1)[0]) % rank_of(b, x_idx)
    n = int(op.options.get("num_splits", len(op.outputs)))
    dim = b.tensor(x_idx).shape[axis]
    _split(b, op, x_idx, axis, [dim // n] * n)


def split_v(b: GraphBuilder, op: Operator) -> None:
    """SPLIT_V(input, size_splits, axis): one size may be -1 (the rest)."""
    x_idx = op.inputs[0]
    axis = int(b.int_constant(op.inputs[2], op.where).reshape(-1)[0]) % rank_of(b, x_idx)
    sizes = [int(s) for s in b.int_constant(op.inputs[1], op.where).reshape(-1)]
    if -1 in sizes:
        sizes[sizes.index(-1)] = b.tensor(x_idx).shape[axis] - sum(s for s in sizes if s >= 0)
    _split(b, op, x_idx, axis, sizes)


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
    axes = sorted({int(a) % rank for a in b.int_constant(op.inputs[1], op.where).reshape(-1)})
    n = len(axes)
    y = _slice(b, b.raw_input(op.inputs[0], op.outputs[0]), [BIG] * n, [SMALL] * n, axes, [-1] * n)
    b.set_output(op.outputs[0], y)


def mirror_pad(b: GraphBuilder, op: Operator) -> None:
    """REFLECT is ONNX Pad's reflect mode; SYMMETRIC (the edge repeated) is built from
    reversed Slices concatenated on each padded axis."""
    paddings = b.int_constant(op.inputs[1], op.where).reshape(-1, 2)
    x = b.raw_input(op.inputs[0], op.outputs[0])
    mode = op.options.get("mode", "REFLECT")
    if mode == "REFLECT":
        pads = _int64(b, np.concatenate([paddings[:, 0], paddings[:, 1]]), "pads")
        b.set_output(op.outputs[0], b.emit("Pad", [x, pads], mode="reflect")[0])
        return
    if mode != "SYMMETRIC":
        raise ConversionError(f"mode {mode} unsupported", op.where)
    shape = list(b.tensor(op.inputs[0]).shape)
    for axis, (before, after) in enumerate(paddings.tolist()):
        if not before and not after:
            continue
        parts = []
        if before:
            parts.append(_slice(b, x, [before - 1], [SMALL], [axis], [-1]))
        parts.append(x)
        if after:
            d = shape[axis]
            stop = d - 1 - after if d - 1 - after >= 0 else SMALL  # -1 would mean d - 1
            parts.append(_slice(b, x, [d - 1], [stop], [axis], [-1]))
        x = b.emit("Concat", parts, axis=axis)[0]
        shape[axis] += before + after
    b.set_output(op.outputs[0], x)
