"""Compact form for graphs whose structure outweighs their weights.

A model of thousands of small operators on few shared weights (TFLM's dp_net: 3,384 nodes on
2.1 MB of weights) would otherwise be 1.6x its weights in names and shapes: TFLite's
hierarchical names run to 60 characters and each appears as a node name, a tensor name per
reader and a value_info entry. Past a threshold the graph keeps what identifies it and drops
what can be recomputed:

- internal tensors and initializers get short names (``t<k>``, ``w<k>``; graph inputs and
  outputs keep theirs); value_info stays, under the short names (a few bytes a tensor):
  qonnx's executor refuses a graph without it, and re-inferring it with qonnx's InferShapes
  takes minutes on such a graph (133 s on dp_net);
- nodes keep readable names: the last '/'-separated parts of their TFLite-derived name that
  fit in ``NODE_NAME_LIMIT`` characters (the tail names the op; the head is the Keras model's
  scope), made unique.

Small graphs, and graphs whose weights dwarf their structure (every CNN of the corpus), are
left as they are.
"""

from __future__ import annotations

import onnx

from qonnx_ingest.names import TakenNames, unique_name
from qonnx_ingest.passes import PassResult
from qonnx_ingest.quant import QUANT_OP_TYPES

# compact when the structure (everything but the initializers) exceeds both of these
MAX_STRUCTURE_VS_WEIGHTS = 0.1
MIN_STRUCTURE_BYTES = 256 * 1024
NODE_NAME_LIMIT = 32


def structure_bytes(model: onnx.ModelProto) -> tuple[int, int]:
    """(bytes of everything but the initializers, bytes of the initializers) as serialized."""
    weights = sum(t.ByteSize() for t in model.graph.initializer)
    return model.ByteSize() - weights, weights


def needs_compacting(model: onnx.ModelProto) -> bool:
    """Only float graphs without subgraphs: an If branch or Loop body reads outer tensors by
    name, and renaming them would cut those reads; a graph with quantizers is run node by node
    by qonnx's executor (FINN, hls4ml), which reads every tensor's shape from value_info."""
    if any(
        node.op_type in QUANT_OP_TYPES
        or any(
            a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
            for a in node.attribute
        )
        for node in model.graph.node
    ):
        return False
    structure, weights = structure_bytes(model)
    return structure > max(MIN_STRUCTURE_BYTES, MAX_STRUCTURE_VS_WEIGHTS * weights)


def compact(model: onnx.ModelProto) -> PassResult:
    """Name tensors ``t<k>``/``w<k>`` (value_info follows), shorten node names."""
    graph = model.graph
    keep = {v.name for v in graph.input} | {v.name for v in graph.output}
    taken = TakenNames(keep)
    mapping: dict[str, str] = {}
    for k, t in enumerate(graph.initializer):
        if t.name not in keep:
            mapping[t.name] = unique_name(f"w{k}", taken)
    count = 0
    for node in graph.node:
        for name in node.output:
            if name and name not in keep and name not in mapping:
                mapping[name] = unique_name(f"t{count}", taken)
                count += 1
    for t in (*graph.initializer, *graph.value_info):
        t.name = mapping.get(t.name, t.name)
    for a in graph.quantization_annotation:
        a.tensor_name = mapping.get(a.tensor_name, a.tensor_name)
    node_names = TakenNames()
    for node in graph.node:
        node.input[:] = [mapping.get(n, n) for n in node.input]
        node.output[:] = [mapping.get(n, n) for n in node.output]
        node.name = unique_name(_tail(node.name) or node.op_type, node_names)
    return model, True


def _tail(name: str, limit: int = NODE_NAME_LIMIT) -> str:
    """The last whole '/'-separated parts of ``name`` that fit in ``limit`` characters (the
    last part's tail when even it is longer)."""
    if len(name) <= limit:
        return name
    parts = name.split("/")
    kept = parts[-1][-limit:]
    for part in reversed(parts[:-1]):
        if len(part) + 1 + len(kept) > limit:
            break
        kept = f"{part}/{kept}"
    return kept
