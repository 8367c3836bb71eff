"""The graph queries and in-place edits of its repeated fields that several rewrites share."""

from __future__ import annotations

from collections.abc import Collection, Iterable

import onnx


def set_nodes(
    graph: onnx.GraphProto, nodes: Iterable[onnx.NodeProto], stale: Collection[str]
) -> None:
    """Make ``nodes`` the graph's node list and drop the value_info of the ``stale`` tensor
    names, whose shapes the rewrite changed (finishing infers them again)."""
    replace_nodes(graph, nodes)
    infos = [v for v in graph.value_info if v.name not in stale]
    del graph.value_info[:]
    graph.value_info.extend(infos)


def replace_nodes(graph: onnx.GraphProto, nodes: Iterable[onnx.NodeProto]) -> None:
    """Make ``nodes`` the graph's node list. They are copied first: they may be the graph's own
    nodes, which clearing the list would otherwise take with it."""
    copies = []
    for node in nodes:
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        copies.append(copy)
    del graph.node[:]
    graph.node.extend(copies)


def readers_of(graph: onnx.GraphProto) -> dict[str, list[onnx.NodeProto]]:
    """Each tensor name's reading nodes, in graph order (a node reading it twice, twice)."""
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    return readers


def ensure_opset(model: onnx.ModelProto, domain: str, version: int = 1) -> None:
    """Import ``domain`` (a rewrite that adds its first node, e.g. a Quant or MultiThreshold)
    unless the model already does."""
    if domain not in {o.domain for o in model.opset_import}:
        model.opset_import.append(onnx.helper.make_opsetid(domain, version))
