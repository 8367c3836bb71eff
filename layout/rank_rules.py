"""Rank rules of the op table: the rank of a terminate or rank-changing node's output,
from its inputs' ranks and constant operands (None where it cannot be known)."""

from __future__ import annotations

from collections.abc import Callable

import onnx

from layout.graph import GraphIndex, get_attr

RankRule = Callable[[onnx.NodeProto, GraphIndex], int | None]


def reduce_axes(node: onnx.NodeProto, g: GraphIndex) -> tuple[list[int] | None, bool]:
    """(axes or None for all, usable): attribute or (opset 13 ReduceSum, 18 others) input."""
    axes = get_attr(node, "axes")
    if axes is not None:
        return list(axes), True
    if not g.has_input(node, 1):
        return None, True
    value = g.ints(node, 1)
    return (value or None), value is not None


def rank_of(g: GraphIndex, node: onnx.NodeProto, slot: int) -> int | None:
    return g.rank.get(node.input[slot]) if g.has_input(node, slot) else None


def minus(node: onnx.NodeProto, g: GraphIndex, removed: int | None) -> int | None:
    r = rank_of(g, node, 0)
    return None if r is None or removed is None else r - removed


def reduce_rank(node: onnx.NodeProto, g: GraphIndex) -> int | None:
    if get_attr(node, "keepdims", 1):
        return rank_of(g, node, 0)
    axes, ok = reduce_axes(node, g)
    if not ok:
        return None
    if axes is None:
        return rank_of(g, node, 0) if get_attr(node, "noop_with_empty_axes", 0) else 0
    return minus(node, g, len({a % (rank_of(g, node, 0) or 1) for a in axes}))


def arg_rank(node: onnx.NodeProto, g: GraphIndex) -> int | None:
    return minus(node, g, 0 if get_attr(node, "keepdims", 1) else 1)


def gather_rank(node: onnx.NodeProto, g: GraphIndex) -> int | None:
    r, q = rank_of(g, node, 0), rank_of(g, node, 1)
    return None if r is None or q is None else r + q - 1


def shape_input_rank(slot: int) -> RankRule:
    """Reshape / Expand / ConstantOfShape: as many dims as the shape input has entries."""

    def rank(node: onnx.NodeProto, g: GraphIndex) -> int | None:
        if not g.has_input(node, slot):
            return None
        n = g.dims.get(node.input[slot], (None,))
        n = n[0] if len(n) == 1 else None
        if node.op_type == "Expand":
            r = rank_of(g, node, 0)
            return None if r is None or n is None else max(r, n)
        return n if isinstance(n, int) else None

    return rank


def axes_count(node: onnx.NodeProto, g: GraphIndex) -> int | None:
    axes = get_attr(node, "axes")
    if axes is None and g.has_input(node, 1):
        axes = g.ints(node, 1)
    return None if axes is None else len(axes)


def squeeze_rank(node: onnx.NodeProto, g: GraphIndex) -> int | None:
    return minus(node, g, axes_count(node, g))


def unsqueeze_rank(node: onnx.NodeProto, g: GraphIndex) -> int | None:
    n = axes_count(node, g)
    return minus(node, g, None if n is None else -n)


def matmul_rank(node: onnx.NodeProto, g: GraphIndex) -> int | None:
    a, b = rank_of(g, node, 0), rank_of(g, node, 1)
    if a is None or b is None:
        return None
    return max(a, b) - (a == 1) - (b == 1)


def fixed_rank(value: int) -> RankRule:
    return lambda node, g: value


def input_rank(node: onnx.NodeProto, g: GraphIndex) -> int | None:
    return rank_of(g, node, 0)
