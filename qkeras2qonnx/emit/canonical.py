"""tf2onnx's output in one canonical form, so that a model converts to the same bytes every time.

tf2onnx's optimizers walk sets of graph-node objects, which iterate in memory-address order, and
number the nodes they insert from one process-wide counter. So from run to run (and from the
first conversion in a process to the second) the same graph came out with its nodes and
initializers in another order, its inserted nodes numbered differently (``Conv1D__9`` in one
run, ``Conv1D__12`` in the next) and the other of two equal constants kept. Here the order is
derived from the graph itself: nodes topologically, ties broken by their names with tf2onnx's
numbers taken out; inserted nodes renumbered in that order; initializers and value_info in the
order of their first use. Tensor names are left alone: finishing names them after their nodes.
"""

from __future__ import annotations

import heapq
import re

import onnx

from qonnx_ingest.finish import subgraph_reads
from qonnx_ingest.graph_edit import replace_nodes

_NUMBER = re.compile(r"__\d+")  # what tf2onnx's make_name appends, possibly more than once


def canonicalize(graph: onnx.GraphProto) -> None:
    """Reorder and renumber ``graph`` in place (see the module docstring)."""
    order = _canonical_order(graph)
    replace_nodes(graph, [graph.node[k] for k in order])
    _renumber(graph.node)
    first_use = _first_use(graph)
    unused = (len(graph.node), 0)
    graph.initializer.sort(key=lambda t: (first_use.get(t.name, unused), _strip(t.name)))
    graph.value_info.sort(key=lambda v: (first_use.get(v.name, unused), _strip(v.name)))


def _strip(name: str) -> str:
    return _NUMBER.sub("", name)


def _canonical_order(graph: onnx.GraphProto) -> list[int]:
    """Kahn's topological order; among ready nodes the smallest by (name, op type, inputs),
    numbers stripped, then the position tf2onnx gave (a tie there means two nodes alike)."""
    nodes = graph.node
    keys = [
        (_strip(n.name), n.op_type, tuple(_strip(i) for i in n.input), k)
        for k, n in enumerate(nodes)
    ]
    producer = {out: k for k, n in enumerate(nodes) for out in n.output if out}
    consumers: dict[int, list[int]] = {}
    waiting = []
    for k, node in enumerate(nodes):
        reads = [*node.input, *_subgraph_reads(node)]
        deps = {producer[i] for i in reads if i in producer and producer[i] != k}
        waiting.append(len(deps))
        for d in deps:
            consumers.setdefault(d, []).append(k)
    ready = [keys[k] for k, n in enumerate(waiting) if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        k = heapq.heappop(ready)[-1]
        order.append(k)
        for c in consumers.get(k, ()):
            waiting[c] -= 1
            if waiting[c] == 0:
                heapq.heappush(ready, keys[c])
    if len(order) != len(nodes):  # a cycle: leave the order to finishing, which names it
        return list(range(len(nodes)))
    return order


def _subgraph_reads(node: onnx.NodeProto) -> set[str]:
    """What the node's If / Loop bodies read by name: outer tensors it depends on too."""
    if not any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
               for a in node.attribute):  # fmt: skip
        return set()
    alone = onnx.GraphProto()
    alone.node.append(node)
    return subgraph_reads(alone)


def _renumber(nodes) -> None:
    """``Base__93`` -> ``Base__k``, k counting up in node order from 1, skipping taken names."""
    taken = {n.name for n in nodes if not _NUMBER.search(n.name)}
    k = 0
    for node in nodes:
        if not _NUMBER.search(node.name):
            continue
        base = _strip(node.name)
        while True:
            k += 1
            name = f"{base}__{k}"
            if name not in taken:
                break
        node.name = name
        taken.add(name)


def _first_use(graph: onnx.GraphProto) -> dict[str, tuple[int, int]]:
    """Tensor name -> (position of the first node that reads or writes it, slot there)."""
    first: dict[str, tuple[int, int]] = {}
    for k, node in enumerate(graph.node):
        for j, name in enumerate((*node.input, *node.output)):
            first.setdefault(name, (k, j))
    return first
