"""Operand rules: the shape facts that TFLite's kernels check in Prepare() beyond the rank.

Each rule sees one operator through an ``OperandView`` and returns the problem or None; the
operator records (``tflite2qonnx.ops``) name the rule of each kind, and the reader applies it
while it reads the file, so converters can rely on what TFLite itself requires.
"""

from __future__ import annotations

import math

import numpy as np

from tflite2qonnx.model import Operator, Tensor


class OperandView:
    """What an operand rule sees of one operator: its kind, options, operand shapes and
    constant operands (None for an absent or omitted operand)."""

    def __init__(self, op: Operator, tensors: list[Tensor]):
        self.op, self.kind, self.options = op, op.opcode.builtin, op.options
        self.n_inputs, self.n_outputs = len(op.inputs), len(op.outputs)
        self._tensors = tensors

    def _tensor(self, operands: tuple[int, ...], pos: int) -> Tensor | None:
        if pos < len(operands) and operands[pos] >= 0:
            return self._tensors[operands[pos]]
        return None

    def shape(self, pos: int) -> tuple[int, ...] | None:
        t = self._tensor(self.op.inputs, pos)
        return None if t is None else tuple(t.shape)

    def out(self, pos: int) -> tuple[int, ...] | None:
        t = self._tensor(self.op.outputs, pos)
        return None if t is None else tuple(t.shape)

    def data(self, pos: int) -> np.ndarray | None:
        t = self._tensor(self.op.inputs, pos)
        return None if t is None or t.sparsity is not None else t.data


def conv_filter(v: OperandView) -> str | None:
    """A filter without empty dimensions whose channels fit the input's (ranks are checked
    before: CONV_2D [O, H, W, I], DEPTHWISE_CONV_2D [1, H, W, I*M], CONV_3D [D, H, W, I, O])."""
    x, w = v.shape(0), v.shape(1)
    if w is None:
        return None
    if 0 in w:
        return f"filter (input 1) has shape {list(w)}, with a zero-size dimension"
    if x is None or x[-1] <= 0:
        return None
    channels = x[-1]
    if v.kind == "DEPTHWISE_CONV_2D":
        if w[-1] % channels:
            return f"filter (input 1) of shape {list(w)} is not a multiple of {channels} channels"
        return None
    per_group = w[-1] if v.kind == "CONV_2D" else w[3]
    if channels % per_group:
        return f"{channels} input channels do not split into groups of the filter's {per_group}"
    return None


def pad(v: OperandView) -> str | None:
    x, paddings = v.shape(0), v.shape(1)
    if paddings is not None:
        if len(paddings) != 2 or paddings[1] != 2:
            return f"paddings (input 1) have shape {list(paddings)}, expected [rank, 2]"
        if x and paddings[0] != len(x):
            return f"paddings (input 1) have {paddings[0]} rows for an input of rank {len(x)}"
    value = v.shape(2)
    if value is not None and math.prod(value) != 1:
        return f"constant_values (input 2) has shape {list(value)}, expected one value"
    return None


def per_dimension(*positions: int):
    """Inputs ``positions`` hold one value per dimension of input 0 (perm, multiples, begin)."""

    def rule(v: OperandView) -> str | None:
        x = v.shape(0)
        for pos in positions:
            s = v.shape(pos)
            if x is not None and s is not None and s != (len(x),):
                return (
                    f"input {pos} has shape {list(s)}, expected [{len(x)}] "
                    f"(one value per dimension of the rank-{len(x)} input)"
                )
        return None

    return rule


def one_axis(v: OperandView) -> str | None:
    axis = v.shape(1)
    if axis is not None and math.prod(axis) != 1:
        return f"axis (input 1) has shape {list(axis)}, expected a single axis"
    return None


def reduction(v: OperandView) -> str | None:
    """Axes: a scalar or a vector of axes of the input; the output keeps what they leave."""
    x, axes_shape, y = v.shape(0), v.shape(1), v.out(0)
    if x is None or axes_shape is None:
        return None
    if len(axes_shape) > 1:
        return f"axes (input 1) have shape {list(axes_shape)}, expected a vector"
    rank, keep = len(x), bool(v.options.get("keep_dims", False))
    axes = v.data(1)
    if axes is not None and axes.dtype.kind in "iuf":
        with np.errstate(invalid="ignore"):  # NaN and inf become out-of-range integers
            values = [int(a) for a in np.rint(np.asarray(axes, np.float64)).reshape(-1)]
        if any(not -rank <= a < rank for a in values):
            return f"axes {values} out of range for an input of rank {rank}"
        low = high = rank if keep else rank - len({a % rank for a in values})
    else:  # computed at conversion time (e.g. behind a DEQUANTIZE): bounds only
        n = math.prod(axes_shape)
        low, high = (rank, rank) if keep else (max(rank - n, 0), rank if n == 0 else rank - 1)
    if y is not None and not low <= len(y) <= high:
        kept = low if low == high else f"{low} to {high}"
        return f"output has shape {list(y)}, but the reduction leaves rank {kept}"
    return None


def strided_slice(v: OperandView) -> str | None:
    specs = [v.shape(pos) for pos in (1, 2, 3)]
    lengths = {s for s in specs if s is not None}
    if any(len(s) != 1 for s in lengths) or len(lengths) > 1:
        shown = ", ".join(str(list(s)) for s in specs if s is not None)
        return f"begin, end and strides (inputs 1-3) have shapes {shown}, expected equal [n]"
    return None


def split(v: OperandView) -> str | None:
    n = v.options.get("num_splits")
    if n is not None and n != v.n_outputs:
        return f"num_splits is {n} but the operator has {v.n_outputs} outputs"
    return None


def split_v(v: OperandView) -> str | None:
    sizes = v.shape(1)
    if sizes is not None and (len(sizes) != 1 or sizes[0] != v.n_outputs):
        return (
            f"size_splits (input 1) has shape {list(sizes)} for {v.n_outputs} outputs, "
            f"expected [{v.n_outputs}]"
        )
    return None


def resize(v: OperandView) -> str | None:
    size = v.shape(1)
    if size is not None and size != (2,):
        return f"size (input 1) has shape {list(size)}, expected [2] (new height and width)"
    return None


def variadic(v: OperandView) -> str | None:
    return None if v.n_inputs else "has no inputs"


def binary(v: OperandView) -> str | None:
    """Two operands, as the kernel reads them (ONNX's Max and Min would take one)."""
    return None if v.n_inputs == 2 else f"has {v.n_inputs} inputs, needs 2"


def concatenation(v: OperandView) -> str | None:
    y = v.out(0)
    if not v.n_inputs or y is None:
        return variadic(v)
    rank, axis = len(y), v.options.get("axis", 0)
    if not -rank <= axis < rank:
        return f"axis {axis} is not an axis of the rank-{rank} output"
    for pos in range(v.n_inputs):
        x = v.shape(pos)
        if x is not None and len(x) != rank:
            return f"input {pos} has shape {list(x)}, the output has rank {rank}"
    return None
