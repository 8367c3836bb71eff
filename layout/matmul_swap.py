"""Attention scores computed transposed: ``Transpose(MatMul(A, B))`` over the last two axes is
``MatMul(B^T, A^T)``, and when A and B come from Transposes (or constants) their transposes
are the same Transposes with other perms. TFLite writes exactly this around BATCH_MATMUL
(q·kᵀ, then a TRANSPOSE to [b, h, key, query] before SOFTMAX), so each attention block loses
one Transpose. Per-tensor quantizers between the ops are elementwise and stay where they are.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from layout.collapse import per_tensor_quantizer
from layout.graph import get_attr, is_default_domain, set_attr
from qonnx_ingest.graph_edit import readers_of, set_nodes
from qonnx_ingest.passes import PassResult


def swap_transposed_matmuls(model: onnx.ModelProto) -> PassResult:
    """Rewrite ``model`` in place; modified when it removed a Transpose."""
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    readers = readers_of(graph)
    producer = {t: node for node in graph.node for t in node.output}
    outputs = {vi.name for vi in graph.output}

    def only_reader(t: str) -> onnx.NodeProto | None:
        users = readers.get(t, [])
        return users[0] if len(users) == 1 and t not in outputs else None

    changed: set[str] = set()  # tensors whose shapes the rewrite changes
    gone: set[int] = set()
    identities: list[onnx.NodeProto] = []
    for node in graph.node:
        if node.op_type != "MatMul" or not is_default_domain(node):
            continue
        path, user = [node.output[0]], only_reader(node.output[0])
        while user is not None and per_tensor_quantizer(user, inits):
            path.append(user.output[0])
            user = only_reader(user.output[0])
        if user is None or user.op_type != "Transpose" or not is_default_domain(user):
            continue
        perm = list(get_attr(user, "perm") or [])
        rank = len(perm)
        swap = [*range(rank - 2), rank - 1, rank - 2]
        if rank < 2 or perm != swap:
            continue
        sources = [_source(t, producer, only_reader, inits) for t in node.input]
        if not all(_fits(s, t, rank, inits) for s, t in zip(sources, node.input, strict=True)):
            continue
        for slot, (transpose, tperm, inner) in enumerate(sources):
            if transpose is not None:
                set_attr(transpose, "perm", [tperm[k] for k in swap])
                changed.update(inner)
            else:
                node.input[slot] = _transposed_constant(graph, inits, node.input[slot])
        node.input[0], node.input[1] = node.input[1], node.input[0]
        changed.update(path)
        identities.extend(_bypass(user, readers, outputs))
        gone.add(id(user))
    if not gone:
        return model, False
    set_nodes(graph, [n for n in graph.node if id(n) not in gone] + identities, changed)
    return model, True


def _source(t, producer, only_reader, inits):
    """(the Transpose t comes from, its perm, the tensors in between) through per-tensor
    quantizers; (None, (), []) for a constant; None when neither."""
    if t in inits:
        return None, (), []
    inner = []
    while True:
        node = producer.get(t)
        if node is None or only_reader(t) is None:
            return None
        inner.append(t)
        if node.op_type == "Transpose" and is_default_domain(node):
            perm = get_attr(node, "perm")
            return (node, list(perm), inner) if perm else None
        if not per_tensor_quantizer(node, inits):
            return None
        t = node.input[0]


def _fits(source, t: str, rank: int, inits: dict) -> bool:
    if source is None:
        return False
    if source[0] is None:  # a constant of rank >= 2 (MatMul treats 1-D operands as vectors)
        return len(inits[t].dims) >= 2
    return len(source[1]) == rank


def _transposed_constant(graph, inits, name: str) -> str:
    value = numpy_helper.to_array(inits[name])
    new = f"{name}__swapped"
    k = 1
    while new in inits:
        new, k = f"{name}__swapped{k}", k + 1
    tensor = numpy_helper.from_array(np.ascontiguousarray(np.swapaxes(value, -1, -2)), new)
    graph.initializer.append(tensor)
    inits[new] = tensor
    return new


def _bypass(transpose, readers, outputs) -> list[onnx.NodeProto]:
    """The readers of the Transpose's output read its input instead (an Identity keeps the
    name when it is a graph output)."""
    src, dst = transpose.input[0], transpose.output[0]
    if dst in outputs:
        return [onnx.helper.make_node("Identity", [src], [dst], name=transpose.name)]
    for reader in readers.get(dst, []):
        reader.input[:] = [src if t == dst else t for t in reader.input]
        readers.setdefault(src, []).append(reader)
    return []
