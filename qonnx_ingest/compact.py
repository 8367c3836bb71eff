"""Compact form for graphs whose structure outweighs their weights.

A model of thousands of small operators on few shared weights (TFLM's dp_net: 3,384 nodes on
2.1 MB of weights) would otherwise be 1.6x its weights in names and shapes: TFLite's
hierarchical names run to 60 characters and each appears as a node name, a tensor name per
reader and a value_info entry. Past a threshold the graph keeps what identifies it and drops
what can be recomputed:

- internal tensors and initializers get short names (``t<k>``, ``w<k>``, k in base 62: at
  most three characters up to 3,844 tensors; graph inputs and outputs keep theirs); each
  appears as a producer's output, a value_info entry and once per reader, so a character
  saved is four bytes a tensor. value_info stays, under the short names:
  qonnx's executor refuses a graph without it, and re-inferring it with qonnx's InferShapes
  takes minutes on such a graph (133 s on dp_net);
- nodes keep readable names: the last '/'-separated parts of their TFLite-derived name that
  fit in ``NODE_NAME_LIMIT`` characters (the tail names the op; the head is the Keras model's
  scope), made unique.

- a bias Add after a MatMul of a [M, K] tensor and a [K, N] weight is folded into one Gemm
  (a node and a tensor fewer; dp_net's 768 fully connected layers: 1.124x -> 1.097x).

Small graphs, and graphs whose weights dwarf their structure (every CNN of the corpus), are
left as they are.
"""

from __future__ import annotations

import string

import onnx

from qonnx_ingest.graph_edit import readers_of
from qonnx_ingest.names import TakenNames, unique_name
from qonnx_ingest.passes import PassResult
from qonnx_ingest.quant import QUANT_OP_TYPES

# compact when the structure (everything but the initializers) exceeds both of these
MAX_STRUCTURE_VS_WEIGHTS = 0.1
MIN_STRUCTURE_BYTES = 256 * 1024
NODE_NAME_LIMIT = 32
_DIGITS = string.digits + string.ascii_lowercase + string.ascii_uppercase


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
    """Fold each bias Add into its MatMul, name tensors ``t<k>``/``w<k>`` (value_info
    follows), shorten node names."""
    graph = model.graph
    _biased_matmuls_as_gemm(graph)
    keep = {v.name for v in graph.input} | {v.name for v in graph.output}
    taken = TakenNames(keep)
    mapping: dict[str, str] = {}
    for k, t in enumerate(graph.initializer):
        if t.name not in keep:
            mapping[t.name] = unique_name(f"w{_base62(k)}", taken)
    count = 0
    for node in graph.node:
        for name in node.output:
            if name and name not in keep and name not in mapping:
                mapping[name] = unique_name(f"t{_base62(count)}", taken)
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


def _biased_matmuls_as_gemm(graph: onnx.GraphProto) -> None:
    """``Add(MatMul(a, W), b)`` as ``Gemm(a, W, b)`` where ``a`` is [M, K], ``W`` a [K, N] and
    ``b`` an [N] initializer and nothing else reads the product: one node and one tensor
    (its value_info too) fewer, about 80 bytes (dp_net: 768 fully connected layers). Gemm
    computes ``a @ W + b``, as the pair does; its runtimes add the bias to the dot products'
    float sum (onnxruntime's kernel for K <= 128 writes the pair's bits exactly, XNNPACK's
    fully connected starts from the bias)."""
    weights = {t.name: t for t in graph.initializer}
    known = (*graph.input, *graph.value_info)
    ranks = {v.name: len(v.type.tensor_type.shape.dim) for v in known}
    readers = readers_of(graph)
    outputs = {v.name for v in graph.output}
    producers = {n.output[0]: n for n in graph.node if n.op_type == "MatMul" and not n.domain}
    folded: set[str] = set()
    for add in graph.node:
        if add.op_type != "Add" or add.domain or len(add.input) != 2:
            continue
        for product, bias in (add.input, reversed(add.input)):
            matmul = producers.get(product)
            if matmul is None or len(readers.get(product, ())) != 1 or product in outputs:
                continue
            w, b = weights.get(matmul.input[1]), weights.get(bias)
            if w is None or b is None or len(w.dims) != 2 or list(b.dims) != [w.dims[1]]:
                continue
            if ranks.get(matmul.input[0]) != 2:
                continue
            gemm = onnx.helper.make_node(
                "Gemm", [matmul.input[0], matmul.input[1], bias], list(add.output), name=matmul.name
            )
            add.CopyFrom(gemm)
            folded.add(product)
            break
    if folded:
        kept = [n for n in graph.node if not (n.op_type == "MatMul" and n.output[0] in folded)]
        del graph.node[:]
        graph.node.extend(kept)
        info = [v for v in graph.value_info if v.name not in folded]
        del graph.value_info[:]
        graph.value_info.extend(info)


def _base62(k: int) -> str:
    """``k`` in the digits 0-9, a-z, A-Z."""
    digits = ""
    while True:
        k, d = divmod(k, 62)
        digits = _DIGITS[d] + digits
        if not k:
            return digits


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
