"""tf2onnx's output in one canonical form, so that a model converts to the same bytes every time.

tf2onnx's optimizers walk sets of graph-node objects, which iterate in memory-address order, and
number the nodes they insert from one process-wide counter. So from run to run (and from the
first conversion in a process to the second) the same graph came out with its nodes and
initializers in another order, its inserted nodes numbered differently (``Conv1D__9`` in one
run, ``Conv1D__12`` in the next) and the other of two equal constants kept. Here the order is
derived from the graph itself: nodes topologically, ties broken by their names with tf2onnx's
numbers taken out, then by what they compute (op, attributes, the constants and computations
they read: two Gathers of ``Shape`` differ only in their index constants); inserted nodes
renumbered in that order; initializers and value_info in the
order of their first use. Tensor names are left alone: finishing names them after their nodes.
"""

from __future__ import annotations

import hashlib
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
    numbers stripped and constants by their bytes (tf2onnx keeps one of two equal constants,
    by address: its name is no identity), then by what they compute (``_digests``), then the
    position tf2onnx gave (a tie there means two nodes that compute the same)."""
    nodes = graph.node
    producer = {out: k for k, n in enumerate(nodes) for out in n.output if out}
    constants = _constant_digests(graph)
    digests = _digests(graph, producer, constants)
    keys = [
        (
            _strip(n.name),
            n.op_type,
            tuple(constants.get(i) or _strip(i) for i in n.input),
            digests.get(k, ""),
            k,
        )
        for k, n in enumerate(nodes)
    ]
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


def _constant_digests(graph: onnx.GraphProto) -> dict[str, str]:
    """Initializer name -> ``const:`` and a digest of its type, shape and bytes."""
    digests = {}
    for t in graph.initializer:
        tensor = onnx.TensorProto()
        tensor.CopyFrom(t)
        tensor.name = ""
        digests[t.name] = "const:" + hashlib.sha256(tensor.SerializeToString()).hexdigest()
    return digests


def _digests(
    graph: onnx.GraphProto, producer: dict[str, int], constants: dict[str, str]
) -> dict[int, str]:
    """Node position -> a digest of what it computes, free of tf2onnx's names and numbers: its
    op and attributes (a subgraph by its attribute name only), and per input the constant's
    bytes, the producer's digest and output slot, or the graph input's name. tf2onnx's node
    order fell back to memory addresses where the names tie; this does not."""
    inputs = {vi.name for vi in graph.input}
    done: dict[int, str] = {}
    for k in _any_topological_order(graph.node, producer):
        node = graph.node[k]
        parts = [node.domain, node.op_type]
        for a in node.attribute:
            if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                parts.append(a.name)
            else:
                parts.append(a.SerializeToString(deterministic=True).hex())
        for name in node.input:
            if name in constants:
                parts.append(constants[name])
            elif name in producer:
                source = graph.node[producer[name]]
                slot = list(source.output).index(name)
                parts.append(f"{done.get(producer[name], '?')}:{slot}")
            else:
                parts.append(name if name in inputs or not name else _strip(name))
        done[k] = hashlib.sha256("|".join(parts).encode()).hexdigest()
    return done


def _any_topological_order(nodes, producer: dict[str, int]) -> list[int]:
    """Producers before their readers, in no particular order (a cycle's nodes left out)."""
    waiting = []
    readers: dict[int, list[int]] = {}
    for k, node in enumerate(nodes):
        deps = {producer[i] for i in node.input if i in producer and producer[i] != k}
        waiting.append(len(deps))
        for d in deps:
            readers.setdefault(d, []).append(k)
    ready = [k for k, n in enumerate(waiting) if n == 0]
    order = []
    while ready:
        k = ready.pop()
        order.append(k)
        for r in readers.get(k, ()):
            waiting[r] -= 1
            if waiting[r] == 0:
                ready.append(r)
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
