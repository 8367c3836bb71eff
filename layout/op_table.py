"""The op table: each ONNX op type's layout class and, for attribute ops, its rewrite.

``layout.classes`` is the engine that reads it (classify a node, infer ranks, a node's rule).

Four classes (after tflite2onnx): *implicit* ops (Conv, pools, ...) are emitted with ONNX
semantics and are where channels-first comes from; *transparent* ops (elementwise, Quant)
compute the same in any layout, so their tensors share one layout; *attribute* ops share it too
but name axes, which their rewrite renumbers; *terminate* ops (Reshape, MatMul, anything
unknown) see source order. Op types not in the table are terminate, which is always correct.
A few terminate ops can *absorb* the layout instead (Transpose composes its perm), so they need
no Transpose either side.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

import numpy as np
import onnx

from layout.graph import GraphIndex, get_attr, set_attr
from layout.orders import PERMUTABLE_RANKS, Order, channels_first, full, norm
from layout.rank_rules import (
    RankRule,
    arg_rank,
    fixed_rank,
    gather_rank,
    input_rank,
    matmul_rank,
    reduce_axes,
    reduce_rank,
    shape_input_rank,
    squeeze_rank,
    unsqueeze_rank,
)
from qonnx_ingest.errors import ConversionError

QONNX_DOMAINS = ("qonnx.custom_op.general", "finn.custom_op.general")
Params = dict[int, np.ndarray]


class Kind(Enum):
    IMPLICIT = "implicit"
    TRANSPARENT = "transparent"
    ATTRIBUTE = "attribute"
    TERMINATE = "terminate"


@dataclass(frozen=True, slots=True)
class AttrRule:
    """How one attribute node relates its tensors, decided before propagation.

    ``data`` inputs follow the node's layout (activations of the node's rank are linked to
    it; constants and lower-rank operands are transformed to match); ``outs`` are produced in
    it; ``fixed`` outputs (rank-changing reductions) come out in a known order when the node
    runs channels-first. Every other input is read in source order and left alone.
    """

    data: tuple[int, ...] = (0,)
    outs: tuple[int, ...] = (0,)
    fixed: tuple[tuple[int, Order | None], ...] = ()


class AbsorbIO(Protocol):
    """What an absorbing terminate op may ask of the rewriter."""

    def source(self, tensor: str) -> tuple[str, Order | None]: ...
    def wanted(self, tensor: str) -> Order | None: ...
    def produce(self, tensor: str, order: Order | None) -> str: ...
    def param(self, node: onnx.NodeProto, slot: int, value: np.ndarray) -> None: ...


Prepare = Callable[[onnx.NodeProto, GraphIndex, int], AttrRule | None]
Rewrite = Callable[[onnx.NodeProto, GraphIndex, Order], Params]
Absorb = Callable[[onnx.NodeProto, GraphIndex, AbsorbIO], bool]


@dataclass(frozen=True)
class OpClass:
    """One row of the table. ``prepare`` returning None demotes that node to terminate."""

    kind: Kind
    ports_in: tuple[int, ...] = ()
    ports_out: tuple[int, ...] = ()
    prepare: Prepare | None = None
    rewrite: Rewrite | None = None
    absorb: Absorb | None = None
    rank: RankRule | None = None
    scoped: bool = False  # subgraphs read outer values by name: in source order, as inputs


@dataclass(slots=True)
class NodeRule:
    """A node's effective class with the tensors propagation links through it."""

    op: OpClass
    kind: Kind
    rank: int = 0
    data: tuple[int, ...] = ()
    outs: tuple[int, ...] = ()
    fixed: tuple[tuple[int, Order | None], ...] = ()
    links: tuple[str, ...] = ()


# ---------------------------------------------------------------------- attribute helpers
def _axis(name: str, default: int | None) -> Rewrite:
    """Rewrite of a single-axis attribute: source axis a -> its channels-first position."""

    def rewrite(node: onnx.NodeProto, g: GraphIndex, p: Order) -> Params:
        axis = get_attr(node, name, default)
        if axis is None:
            raise ConversionError(f"{node.op_type} has no '{name}' attribute", node.name)
        set_attr(node, name, p.index(axis % len(p)))
        return {}

    return rewrite


def _axes(axes: list[int], p: Order) -> list[int]:
    return sorted(p.index(a % len(p)) for a in axes)


def _dropped(rank: int, axes: list[int]) -> AttrRule:
    """keepdims=0: the output order is the channels-first order with the reduced axes removed.

    Reducing spatial axes leaves a channels-first tensor (linked), reducing C or N leaves
    source order or another order (fixed; the rewriter transposes only if a consumer needs to).
    """
    removed = {a % rank for a in axes}
    order = tuple(a - sum(x < a for x in removed) for a in channels_first(rank) if a not in removed)
    if len(order) in PERMUTABLE_RANKS and order == channels_first(len(order)):
        return AttrRule()
    return AttrRule(outs=(), fixed=((0, norm(order)),))


def _const_inputs(*slots: int) -> Prepare:
    """Data input 0; the given parameter inputs must be constants (else terminate)."""

    def prepare(node: onnx.NodeProto, g: GraphIndex, rank: int) -> AttrRule | None:
        ok = all(g.has_input(node, s) and g.is_const(node.input[s]) for s in slots)
        return AttrRule() if ok else None

    return prepare


def _all_inputs(node: onnx.NodeProto, g: GraphIndex, rank: int) -> AttrRule:
    return AttrRule(data=tuple(range(len(node.input))))


def _all_outputs(node: onnx.NodeProto, g: GraphIndex, rank: int) -> AttrRule:
    return AttrRule(outs=tuple(range(len(node.output))))


def _same_rank_inputs(*slots: int) -> Prepare:
    def prepare(node: onnx.NodeProto, g: GraphIndex, rank: int) -> AttrRule | None:
        ok = all(g.rank.get(node.input[s]) == rank for s in slots)
        return AttrRule(data=slots) if ok else None

    return prepare


def _softmax(node: onnx.NodeProto, g: GraphIndex, rank: int) -> AttrRule | None:
    # Before opset 13 Softmax flattens to 2D at `axis` (one softmax over all trailing axes):
    # with C at position 1 no axis value means "C alone", so the node reads source order.
    return AttrRule() if g.opset >= 13 else None


def _gather(node: onnx.NodeProto, g: GraphIndex, rank: int) -> AttrRule | None:
    return AttrRule() if g.rank.get(node.input[1]) == 1 else None


def _compress(node: onnx.NodeProto, g: GraphIndex, rank: int) -> AttrRule | None:
    return AttrRule() if get_attr(node, "axis") is not None else None


def _qdq(node: onnx.NodeProto, g: GraphIndex, rank: int) -> AttrRule | None:
    # blocked scales have the input's rank; an unknown scale shape might be per-axis
    unknown = node.input[1] not in g.dims
    return None if get_attr(node, "block_size", 0) or unknown else AttrRule()


def _qdq_rewrite(node: onnx.NodeProto, g: GraphIndex, p: Order) -> Params:
    dims = g.dims.get(node.input[1], ())
    if g.opset >= 13 and any(d != 1 for d in dims):  # a 1-D per-axis scale
        return _axis("axis", 1)(node, g, p)
    return {}


def _reduce(node: onnx.NodeProto, g: GraphIndex, rank: int) -> AttrRule | None:
    axes, ok = reduce_axes(node, g)
    if not ok:
        return None
    if get_attr(node, "keepdims", 1):
        return AttrRule()
    if axes is None:  # reduce everything to a scalar, or nothing
        noop = get_attr(node, "noop_with_empty_axes", 0)
        return AttrRule() if noop else AttrRule(outs=(), fixed=((0, None),))
    return _dropped(rank, axes)


def _reduce_rewrite(node: onnx.NodeProto, g: GraphIndex, p: Order) -> Params:
    axes, _ = reduce_axes(node, g)
    if axes is None:
        return {}
    if get_attr(node, "axes") is not None:
        set_attr(node, "axes", _axes(axes, p))
        return {}
    return {1: np.array(_axes(axes, p), dtype=np.int64)}


def _arg(node: onnx.NodeProto, g: GraphIndex, rank: int) -> AttrRule:
    if get_attr(node, "keepdims", 1):
        return AttrRule()
    return _dropped(rank, [get_attr(node, "axis", 0)])


def _pad(node: onnx.NodeProto, g: GraphIndex, rank: int) -> AttrRule | None:
    if g.opset < 11:
        return AttrRule()
    axes_ok = not g.has_input(node, 3) or g.is_const(node.input[3])
    return AttrRule() if axes_ok and g.is_const(node.input[1]) else None


def _pad_rewrite(node: onnx.NodeProto, g: GraphIndex, p: Order) -> Params:
    if g.opset < 11:
        pads = get_attr(node, "pads")
        set_attr(node, "pads", [pads[a] for a in p] + [pads[len(p) + a] for a in p])
        return {}
    if g.has_input(node, 3):  # opset 18: pads refer to the listed axes
        axes = g.array(node.input[3])
        return {3: np.array([p.index(int(a) % len(p)) for a in axes], dtype=axes.dtype)}
    pads = g.array(node.input[1])
    order = [*p, *(len(p) + a for a in p)]
    return {1: pads[order]}


def _slice(node: onnx.NodeProto, g: GraphIndex, rank: int) -> AttrRule | None:
    if g.opset < 10:
        return AttrRule()
    if g.has_input(node, 3):
        return AttrRule() if g.is_const(node.input[3]) else None
    starts = g.dims.get(node.input[1], ())  # no axes: the first len(starts) axes
    return AttrRule() if len(starts) == 1 and isinstance(starts[0], int) else None


def _slice_rewrite(node: onnx.NodeProto, g: GraphIndex, p: Order) -> Params:
    if g.opset < 10:
        axes = get_attr(node, "axes") or list(range(len(get_attr(node, "starts"))))
        set_attr(node, "axes", [p.index(a % len(p)) for a in axes])
        return {}
    if g.has_input(node, 3):
        axes = g.array(node.input[3])
        dtype = axes.dtype
    else:
        axes, dtype = np.arange(g.dims[node.input[1]][0]), np.int64
    return {3: np.array([p.index(int(a) % len(p)) for a in axes], dtype=dtype)}


def _cumsum_rewrite(node: onnx.NodeProto, g: GraphIndex, p: Order) -> Params:
    axis = g.array(node.input[1])
    return {1: np.array(p.index(int(axis.reshape(-1)[0]) % len(p)), axis.dtype).reshape(axis.shape)}


def _tile_rewrite(node: onnx.NodeProto, g: GraphIndex, p: Order) -> Params:
    return {1: g.array(node.input[1])[list(p)]}


def _expand_rewrite(node: onnx.NodeProto, g: GraphIndex, p: Order) -> Params:
    shape = g.array(node.input[1])
    padded = np.concatenate([np.ones(len(p) - shape.size, shape.dtype), shape])
    return {1: padded[list(p)]}


def _mvn_rewrite(node: onnx.NodeProto, g: GraphIndex, p: Order) -> Params:
    set_attr(node, "axes", _axes(list(get_attr(node, "axes", [0, 2, 3])), p))
    return {}


def _no_rewrite(node: onnx.NodeProto, g: GraphIndex, p: Order) -> Params:
    return {}


# ---------------------------------------------------------------------- absorbing terminates
def _compose_transpose(node: onnx.NodeProto, g: GraphIndex, io: AbsorbIO) -> bool:
    """Fold the layout into the perm: input read as stored, output written as wanted."""
    x, y = node.input[0], node.output[0]
    rank = g.rank.get(x)
    if rank is None or g.is_const(x):
        return False
    name, a = io.source(x)
    b = io.wanted(y)
    q = get_attr(node, "perm") or list(reversed(range(rank)))
    a_full = full(a, rank)
    perm = [a_full.index(q[m]) for m in full(b, rank)]
    node.input[0] = name
    if perm == list(range(rank)):
        node.op_type = "Identity"
        del node.attribute[:]
    else:
        set_attr(node, "perm", perm)
    node.output[0] = io.produce(y, b)
    return True


def _constant_of_shape(node: onnx.NodeProto, g: GraphIndex, io: AbsorbIO) -> bool:
    """A generated tensor can be generated in whichever order its consumers want."""
    y = node.output[0]
    order = io.wanted(y)
    shape = g.array(node.input[0])
    if order is None or shape is None or shape.size != len(order):
        return False
    io.param(node, 0, shape[list(order)])
    node.output[0] = io.produce(y, order)
    return True


# ---------------------------------------------------------------------- the table
def _implicit(ports_in: tuple[int, ...] = (0,), ports_out: tuple[int, ...] = (0,)) -> OpClass:
    return OpClass(Kind.IMPLICIT, ports_in, ports_out)


def _attribute(
    rewrite: Rewrite, prepare: Prepare | None = None, rank: RankRule | None = None
) -> OpClass:
    return OpClass(Kind.ATTRIBUTE, prepare=prepare, rewrite=rewrite, rank=rank)


_TRANSPARENT = OpClass(Kind.TRANSPARENT)
TERMINATE = OpClass(Kind.TERMINATE)


def _ops(text: str) -> list[str]:
    return text.split()


_TRANSPARENT_OPS = _ops("""
    Abs Acos Acosh Add And Asin Asinh Atan Atanh BitShift BitwiseAnd BitwiseNot BitwiseOr
    BitwiseXor Cast Ceil Celu Clip Cos Cosh Div Dropout Elu Equal Erf Exp Floor Gelu Greater
    GreaterOrEqual HardSigmoid HardSwish Identity IsInf IsNaN LeakyRelu Less LessOrEqual Log Max
    Mean Min Mish Mod Mul Neg Not Or PRelu Pow Reciprocal Relu Round Selu Shrink Sigmoid Sign Sin
    Sinh Softplus Softsign Sqrt Sub Sum Tan Tanh ThresholdedRelu Where Xor
""")

_REDUCE_OPS = _ops("""
    ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceMax ReduceMean ReduceMin ReduceProd
    ReduceSum ReduceSumSquare
""")

_TERMINATE_RANKS: dict[str, RankRule | None] = {
    "Reshape": shape_input_rank(1),
    "Flatten": fixed_rank(2),
    "Squeeze": squeeze_rank,
    "Unsqueeze": unsqueeze_rank,
    "MatMul": matmul_rank,
    "MatMulInteger": matmul_rank,
    "QLinearMatMul": None,
    "Gemm": fixed_rank(2),
    "Shape": fixed_rank(1),
    "Size": fixed_rank(0),
    "Einsum": None,
    "LayerNormalization": input_rank,
    "Trilu": input_rank,
    "NonZero": fixed_rank(2),
    "GatherND": None,
    "ScatterND": input_rank,
    "ReverseSequence": input_rank,  # batch_axis / time_axis may only be 0 or 1
}

OP_CLASSES: dict[str, OpClass] = {
    # implicit: activation input/output ports are channels-first, the rest is in ONNX form
    **{
        op: _implicit()
        for op in _ops("""
        Conv ConvTranspose ConvInteger QLinearConv AveragePool LpPool GlobalAveragePool
        GlobalMaxPool GlobalLpPool Resize Upsample DepthToSpace SpaceToDepth
        InstanceNormalization BatchNormalization LRN GroupNormalization GridSample RoiAlign
        MaxRoiPool
        """)
    },
    "MaxPool": _implicit(ports_out=(0, 1)),  # Indices are positions in the NCHW tensor
    "MaxUnpool": _implicit(ports_in=(0, 1)),
    "DeformConv": _implicit(ports_in=(0, 2, 4)),  # offset and mask are NCHW maps too
    # transparent: every tensor of the node's rank shares one layout; others broadcast
    **{op: _TRANSPARENT for op in _TRANSPARENT_OPS},
    # attribute: like transparent, plus a rewrite of the axes they name
    "Concat": _attribute(_axis("axis", None), _all_inputs),
    "Split": _attribute(_axis("axis", 0), _all_outputs),
    "Pad": _attribute(_pad_rewrite, _pad),
    "Slice": _attribute(_slice_rewrite, _slice),
    **{op: _attribute(_reduce_rewrite, _reduce, reduce_rank) for op in _REDUCE_OPS},
    "Softmax": _attribute(_axis("axis", -1), _softmax),
    "LogSoftmax": _attribute(_axis("axis", -1), _softmax),
    "Hardmax": _attribute(_axis("axis", -1), _softmax),
    "ArgMax": _attribute(_axis("axis", 0), _arg, arg_rank),
    "ArgMin": _attribute(_axis("axis", 0), _arg, arg_rank),
    "Gather": _attribute(_axis("axis", 0), _gather, gather_rank),
    "GatherElements": _attribute(_axis("axis", 0), _same_rank_inputs(0, 1)),
    "ScatterElements": _attribute(_axis("axis", 0), _same_rank_inputs(0, 1, 2)),
    "CumSum": _attribute(_cumsum_rewrite, _const_inputs(1)),
    "Tile": _attribute(_tile_rewrite, _const_inputs(1)),
    "Expand": _attribute(_expand_rewrite, _const_inputs(1), shape_input_rank(1)),
    "TopK": _attribute(_axis("axis", -1), _all_outputs),
    "Compress": _attribute(_axis("axis", None), _compress),
    "LpNormalization": _attribute(_axis("axis", -1)),
    "MeanVarianceNormalization": _attribute(_mvn_rewrite),
    "QuantizeLinear": _attribute(_qdq_rewrite, _qdq),
    "DequantizeLinear": _attribute(_qdq_rewrite, _qdq),
    "CastLike": _attribute(_no_rewrite),
    # terminate that absorbs the layout: no Transpose on either side
    "Transpose": OpClass(Kind.TERMINATE, absorb=_compose_transpose, rank=input_rank),
    "ConstantOfShape": OpClass(Kind.TERMINATE, absorb=_constant_of_shape, rank=shape_input_rank(0)),
    # terminate with subgraphs (control flow): what the subgraphs read by name from the
    # enclosing graph is read in source order too (``GraphIndex.outer_reads``)
    **{op: OpClass(Kind.TERMINATE, scoped=True) for op in ("If", "Loop", "Scan")},
    # terminate: read source order, write source order
    **{op: OpClass(Kind.TERMINATE, rank=rank) for op, rank in _TERMINATE_RANKS.items()},
}

# The QONNX quantizers: elementwise, their parameters broadcast like Add operands.
QONNX_CLASSES: dict[str, OpClass] = {
    op: _TRANSPARENT for op in ("Quant", "IntQuant", "BipolarQuant", "Trunc")
}
