"""STRIDED_SLICE, with constant or run-time begin / end / strides.

TF's sparse slice spec: begin / end masks take the whole dim, the ellipsis stands for the dims
no entry names, new axes are inserted (Unsqueeze) and shrunk dims removed (Squeeze) after one
Slice over the named dims, ``offset`` makes end relative to the start.

The kernel (``StridedSliceStartForAxis`` / ``EndForAxis`` of TFLite's strided_slice_logic.h)
normalizes a negative index by adding the dim, then clamps to [0, n] for a positive stride and
to [-1, n - 1] for a negative one. ONNX Slice does the same except that it clamps a backward
start to [0, n - 1]: constant operands fold into the Slice where that difference cannot show;
otherwise the kernel's arithmetic is written out with the dim sizes read at run time.
With ``offset`` the kernel is only consistent for a slice inside the tensor (beyond it the
output it sizes and the elements it writes differ), where the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.int64_order import extreme
from tflite2qonnx.ops.tensor.operand_values import dim_sizes, int64_value, known

BIG = np.iinfo(np.int64).max
SMALL = np.iinfo(np.int64).min
MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


@dataclass
class _Plan:
    """Which spec entry slices which input dim, and the rank changes after the Slice."""

    entries: list[int] = field(default_factory=list)  # spec entry of each sliced dim
    axes: list[int] = field(default_factory=list)  # its input dim
    shrunk: list[int] = field(default_factory=list)  # input dims squeezed away
    new_axes: list[int] = field(default_factory=list)  # output positions of new axes


def _plan(masks: dict[str, int], n_spec: int, rank: int) -> _Plan:
    def bit(key: str, i: int) -> bool:
        return bool((masks[key] >> i) & 1)

    named = sum(not bit("new_axis_mask", i) and not bit("ellipsis_mask", i) for i in range(n_spec))
    plan, dim, out = _Plan(), 0, 0
    for i in range(n_spec):
        if bit("ellipsis_mask", i):
            dim += rank - named
            out += rank - named
        elif bit("new_axis_mask", i):
            plan.new_axes.append(out)
            out += 1
        else:
            plan.entries.append(i)
            plan.axes.append(dim)
            if bit("shrink_axis_mask", i):
                plan.shrunk.append(dim)
            else:
                out += 1
            dim += 1
    return plan


def strided_slice(b: GraphBuilder, op: Operator) -> None:
    """One Slice over the named dims (bounds folded or computed), then Squeeze / Unsqueeze."""
    x_idx = op.inputs[0]
    begin, end = known(b, op, op.inputs[1]), known(b, op, op.inputs[2])
    has_strides = len(op.inputs) > 3 and op.inputs[3] >= 0
    strides = known(b, op, op.inputs[3]) if has_strides else None
    masks = {k: int(op.options.get(k, 0)) for k in MASKS}
    offset = bool(op.options.get("offset", False))
    spec_shape = b.tensor(op.inputs[1]).shape_signature
    if spec_shape and spec_shape[0] < 0:  # the masks name entries: their count must be known
        raise ConversionError(f"{op.name}'s begin (input 1) has a dynamic length", op.where)
    n_spec = int(spec_shape[0]) if spec_shape else 1
    if strides is None and not has_strides:
        strides = np.ones(n_spec, np.int64)
    shape = b.tensor(x_idx).shape_signature
    plan = _plan(masks, n_spec, len(shape))
    if strides is not None and any(int(strides[i]) == 0 for i in plan.entries):
        raise ConversionError(f"{op.name}: stride 0 (the kernel refuses it)", op.where)
    if offset and any((masks["end_mask"] >> i) & 1 for i in plan.entries):
        raise ConversionError(
            f"{op.name} with offset and end_mask: TFLite's kernel sizes the output ignoring "
            "end_mask but fills it honouring it",
            op.where,
        )
    y = b.raw_input(x_idx, op.outputs[0])
    if plan.axes:
        values = (begin, end, strides)
        folded = None
        if all(v is not None for v in values) and not offset:
            folded = _fold(masks, plan, shape, begin, end, strides)
        if folded is not None:
            starts, ends, steps = (b.const(np.asarray(v, np.int64), "bounds") for v in folded)
        else:
            starts, ends, steps = _run_time_bounds(b, op, plan, masks, offset, values)
        axes = b.const(np.asarray(plan.axes, np.int64), "axes")
        y = b.emit("Slice", [y, starts, ends, axes, steps])[0]
    if plan.shrunk:
        y = b.emit("Squeeze", [y, b.const(np.asarray(plan.shrunk, np.int64), "shrunk")])[0]
    if plan.new_axes:
        y = b.emit("Unsqueeze", [y, b.const(np.asarray(plan.new_axes, np.int64), "new_axes")])[0]
    b.set_output(op.outputs[0], y)


def _fold(masks, plan: _Plan, shape, begin, end, strides) -> tuple[list, list, list] | None:
    """Constant Slice bounds giving the kernel's result, or None where ONNX's clamping could
    differ from it on a dim whose size is only known at run time."""
    starts, ends, steps = [], [], []
    for i, dim in zip(plan.entries, plan.axes, strict=True):
        n, s = shape[dim], int(strides[i])
        lo, hi = int(begin[i]), int(end[i])
        masked_end = bool((masks["end_mask"] >> i) & 1)
        if (masks["shrink_axis_mask"] >> i) & 1:
            if (masks["begin_mask"] >> i) & 1 or s < 0:
                return None
            if lo < 0:
                if n < 0:
                    return None
                lo = max(lo + n, 0)  # the kernel clamps an index below -n to 0
            hi, s = lo + 1, 1
        else:
            if (masks["begin_mask"] >> i) & 1:
                lo = 0 if s > 0 else BIG
            elif s < 0 and lo < 0:
                if n < 0:
                    return None
                if lo + n < 0:  # the kernel's start -1 takes nothing; ONNX would start at 0
                    lo = hi = 0
                    masked_end = False
            if masked_end:
                hi = BIG if s > 0 else SMALL
        starts.append(lo)
        ends.append(hi)
        steps.append(s)
    return starts, ends, steps


def _run_time_bounds(b: GraphBuilder, op: Operator, plan: _Plan, masks, offset, values):
    """The kernel's start and end per sliced dim, computed in the graph from the operands and
    the dim sizes, then put in ONNX Slice's terms: a backward start of -1 (nothing to take)
    becomes the empty range 0..0, a backward end of -1 (through index 0) INT64_MIN."""
    picked = []
    for pos, value in zip((1, 2, 3), values, strict=True):
        if value is not None:
            picked.append(b.const(np.asarray(value, np.int64)[plan.entries], "spec"))
        else:
            entries = b.const(np.asarray(plan.entries, np.int64), "entries")
            picked.append(b.emit("Gather", [int64_value(b, op.inputs[pos]), entries], axis=0)[0])
    begin, end, stride = picked
    n = dim_sizes(b, op.inputs[0], plan.axes)

    def emit(kind: str, *inputs: str) -> str:
        return b.emit(kind, list(inputs))[0]

    def const(v) -> str:
        return b.const(np.asarray(v, np.int64), "c")

    def flag(key: str) -> str:
        return b.const(np.array([(masks[key] >> i) & 1 == 1 for i in plan.entries]), key)

    # int64 begin / end past 2**31: ``int64_order`` (onnxruntime's int64 Max / Min)
    wide = any(b.tensor(op.inputs[i]).dtype == "int64" for i in (1, 2))
    elem = TensorProto.INT64 if wide else TensorProto.INT32
    zero, one = const(0), const(1)
    n_1 = emit("Sub", n, one)
    forward = emit("Greater", stride, zero)
    lo = emit("Where", forward, zero, const(-1))
    hi = emit("Where", forward, n, n_1)

    def normalized(v: str) -> str:
        v = emit("Where", emit("Less", v, zero), emit("Add", v, n), v)
        return extreme(b, "Max", extreme(b, "Min", v, hi, elem), lo, elem)

    start = normalized(begin)
    start = emit("Where", flag("begin_mask"), emit("Where", forward, zero, n_1), start)
    stop = normalized(emit("Add", end, start) if offset else end)
    stop = emit("Where", flag("end_mask"), emit("Where", forward, n, const(-1)), stop)
    one_past = emit("Where", emit("GreaterOrEqual", start, n), start, emit("Add", start, one))
    stop = emit("Where", flag("shrink_axis_mask"), one_past, stop)
    backward = emit("Not", forward)
    empty = emit("And", backward, emit("Less", start, zero))
    through_first = emit("And", backward, emit("Less", stop, zero))
    start = emit("Where", empty, zero, start)
    stop = emit("Where", empty, zero, emit("Where", through_first, const(SMALL), stop))
    return start, stop, stride
