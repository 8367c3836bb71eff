"""The layout engine's per-node reading of the op table (``layout.op_table``): a node's class,
the ranks value_info does not give, and each node's effective rule for propagation.
"""

from __future__ import annotations

import numpy as np
import onnx

from layout.graph import GraphIndex, get_attr, is_default_domain
from layout.op_table import (
    OP_CLASSES,
    QONNX_CLASSES,
    QONNX_DOMAINS,
    TERMINATE,
    AttrRule,
    Kind,
    NodeRule,
    OpClass,
)
from layout.orders import PERMUTABLE_RANKS
from layout.rank_rules import rank_of
from qonnx_ingest.errors import ConversionError


def classify(node: onnx.NodeProto) -> OpClass:
    if is_default_domain(node):
        return OP_CLASSES.get(node.op_type, TERMINATE)
    if node.domain in QONNX_DOMAINS:
        return QONNX_CLASSES.get(node.op_type, TERMINATE)
    return TERMINATE


# ---------------------------------------------------------------------- per-node rules
def output_rank(node: onnx.NodeProto, op: OpClass, g: GraphIndex) -> int | None:
    """The rank of the node's (first) output when value_info does not give it."""
    if op.rank is not None:
        return op.rank(node, g)
    if op.kind is Kind.TRANSPARENT:
        ranks = [g.rank.get(t) for t in node.input if t]
        return None if not ranks or None in ranks else max(ranks)
    if op.kind in (Kind.IMPLICIT, Kind.ATTRIBUTE):
        return rank_of(g, node, 0)
    return None


def infer_ranks(g: GraphIndex) -> None:
    """Fill in ranks value_info does not give, in one topological sweep."""
    rank = g.rank
    for node in g.nodes:
        if all(not t or t in rank for t in node.output):
            continue
        op = classify(node)
        r = output_rank(node, op, g)
        if r is None:
            continue
        if op.kind is Kind.TRANSPARENT or node.op_type in ("Split", "TopK"):
            targets = list(node.output)
        elif op.kind is Kind.IMPLICIT:
            targets = [node.output[k] for k in op.ports_out if k < len(node.output)]
        else:
            targets = [node.output[0]]
        for t in targets:
            if t and t not in rank:
                rank[t] = r
        if node.op_type == "Reshape" and is_default_domain(node) and node.output[0] not in g.dims:
            dims = reshape_dims(node, g)
            if dims is not None:
                g.dims[node.output[0]] = dims


def reshape_dims(node: onnx.NodeProto, g: GraphIndex) -> tuple | None:
    """A Reshape's output dims from its constant shape (None where only run time knows).

    Converters leave them out; the rewriter needs them to see which axes have size 1 (moving
    those is a Reshape, not a Transpose).
    """
    shape = g.ints(node, 1)
    if shape is None:
        return None
    d_in = g.dims.get(node.input[0])
    allowzero = get_attr(node, "allowzero", 0)
    dims: list = []
    for i, s in enumerate(shape):
        if s > 0 or (s == 0 and allowzero):
            dims.append(s)
        elif s == 0:
            known = d_in is not None and i < len(d_in) and isinstance(d_in[i], int)
            dims.append(d_in[i] if known else None)
        else:
            dims.append(None)
    if None in dims and d_in is not None and all(isinstance(d, int) for d in d_in):
        rest = [d for d in dims if d is not None]
        if dims.count(None) == 1 and 0 not in rest:
            dims[dims.index(None)] = int(np.prod(d_in)) // int(np.prod(rest))
    return tuple(dims)


def node_rule(node: onnx.NodeProto, g: GraphIndex) -> NodeRule:
    """The node's effective class: attribute/transparent ops it cannot rewrite terminate."""
    op = classify(node)
    if op.kind is Kind.IMPLICIT:
        return _implicit_rule(node, op, g)
    if op.kind is Kind.TERMINATE:
        return NodeRule(op, Kind.TERMINATE)
    # transparent ops (and Expand) broadcast up to their output's rank; the others keep their
    # data input's rank or reduce it
    by_output = op.kind is Kind.TRANSPARENT or node.op_type == "Expand"
    rank = g.rank.get(node.output[0] if by_output else node.input[0])
    if rank not in PERMUTABLE_RANKS:
        return NodeRule(op, Kind.TERMINATE)
    if op.kind is Kind.TRANSPARENT:
        rule: AttrRule | None = AttrRule(
            data=tuple(k for k, t in enumerate(node.input) if t),
            outs=tuple(k for k, t in enumerate(node.output) if t),
        )
    else:
        rule = op.prepare(node, g, rank) if op.prepare else AttrRule()
    if rule is None:
        return NodeRule(op, Kind.TERMINATE)
    links = []
    for slot in rule.data:
        if not g.has_input(node, slot) or g.is_const(node.input[slot]):
            continue
        r = g.rank.get(node.input[slot])
        if r is None or r > rank:
            return NodeRule(op, Kind.TERMINATE)  # cannot tell how it broadcasts
        if r == rank:
            links.append(node.input[slot])
    for slot in rule.outs:
        t = node.output[slot] if slot < len(node.output) else ""
        if t:
            if g.rank.get(t) not in PERMUTABLE_RANKS:
                return NodeRule(op, Kind.TERMINATE)
            links.append(t)
    return NodeRule(op, op.kind, rank, rule.data, rule.outs, rule.fixed, tuple(links))


def _implicit_rule(node: onnx.NodeProto, op: OpClass, g: GraphIndex) -> NodeRule:
    rank = g.rank.get(node.input[0])
    links = []
    for names, slots in ((node.input, op.ports_in), (node.output, op.ports_out)):
        for slot in slots:
            if slot >= len(names) or not names[slot]:
                continue
            t = names[slot]
            r = g.rank.get(t)
            if r is None:
                raise ConversionError(
                    f"the rank of this {node.op_type} ({node.name or 'unnamed'}) port is "
                    "unknown; give its shape in value_info",
                    t,
                )
            if r not in PERMUTABLE_RANKS:
                raise ConversionError(
                    f"{node.op_type} ({node.name or 'unnamed'}) port has rank {r}; only ranks "
                    "3, 4 and 5 have a channels-first layout",
                    t,
                )
            if not g.is_const(t):
                links.append(t)
    return NodeRule(op, Kind.IMPLICIT, rank or 0, op.ports_in, op.ports_out, (), tuple(links))


def table_summary() -> dict[str, int]:
    """How many op types each class has (the QONNX quantizers count as transparent)."""
    counts: dict[str, int] = {}
    for op in (*OP_CLASSES.values(), *QONNX_CLASSES.values()):
        counts[op.kind.value] = counts.get(op.kind.value, 0) + 1
    return counts
