"""Turning a freshly converted graph into a clean, checkable QONNX model.

Both converters end here, so every model we write has the same hygiene: opset imports that
name the QONNX domain (the removed qonnx converter's output failed ``onnx.checker``), shapes
on every tensor, constants folded except the quantizers, and unique readable names.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

import onnx
from onnx import helper

from qonnx_ingest import DEFAULT_OPSET, __version__
from qonnx_ingest.errors import ConversionError, InputError
from qonnx_ingest.names import TakenNames, unique_name
from qonnx_ingest.quant import QONNX_DOMAIN, QONNX_DOMAIN_VERSION

# Folding one of these would replace a quantizer by its output and lose the annotation.
QUANT_OP_TYPES = frozenset({"Quant", "IntQuant", "BipolarQuant", "Trunc"})
_PRESERVED_OP_TYPES = QUANT_OP_TYPES | {"QuantizeLinear", "DequantizeLinear"}


def finish_model(
    model: onnx.ModelProto,
    *,
    opset: int = DEFAULT_OPSET,
    metadata: Mapping[str, str] | None = None,
    rename_tensors: bool = True,
) -> onnx.ModelProto:
    """Return the finished model: opsets, qonnx cleanup that keeps quantizers, names, checks."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.fold_constants import FoldConstantsFiltered
    from qonnx.transformation.general import RemoveUnusedTensors

    set_opset_imports(model, opset)
    for node in model.graph.node:
        if node.op_type in QUANT_OP_TYPES:
            node.domain = QONNX_DOMAIN
    # In place, without qonnx's per-transform deep copy and cleanup, and with linear-time
    # sorting and parameter unsharing: qonnx's versions are quadratic in the node count and
    # cost seconds on a MobileNet. (Initializers need no value_info either.)
    sort_nodes(model.graph)
    unshare_initializers(model.graph)
    try:
        model = infer_shapes(model)
    except Exception as exc:  # onnx's inference found inconsistent shapes or types
        raise ConversionError(f"shape inference failed: {type(exc).__name__}: {exc}") from exc
    wrapper = ModelWrapper(model, fix_missing_initializer_valueinfo=False)
    steps = []
    if _has_foldable_node(model):
        steps.append(FoldConstantsFiltered(_foldable))
    steps.append(RemoveUnusedTensors())
    try:
        for step in steps:
            wrapper = wrapper.transform(step, make_deepcopy=False, cleanup=False)
    except Exception as exc:  # qonnx raises bare exceptions; name the stage that failed
        raise ConversionError(f"qonnx cleanup failed: {type(exc).__name__}: {exc}") from exc
    model = wrapper.model
    _drop_shapeless_value_info(model.graph)
    name_nodes(model.graph)
    if rename_tensors:
        name_tensors_after_nodes(model.graph)
    model.producer_name = "qonnx-ingest"
    model.producer_version = __version__
    if metadata:
        helper.set_model_props(model, {**_props(model), **dict(metadata)})
    check_model(model)
    return model


# Shape-compatible stand-ins for qonnx's quantizers, as qonnx's own InferShapes makes them.
_SHAPE_STAND_INS = {"Quant": "Cast", "IntQuant": "Cast", "BipolarQuant": "Identity",
                    "Trunc": "Identity"}  # fmt: skip


def infer_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """qonnx's InferShapes in linear time: onnx's inference on a copy whose quantizers stand
    in as Cast (to the output's recorded type, else float32) or Identity, then the original
    nodes back. qonnx's own swaps nodes in and out of the list one by one, quadratic in the
    node count (95 s for a 1,000-layer TFLite model). Other custom ops go to qonnx's.
    """
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.infer_shapes import InferShapes

    graph = model.graph
    custom = [n for n in graph.node if n.domain not in ("", "ai.onnx")]
    if any(n.op_type not in _SHAPE_STAND_INS for n in custom):
        return ModelWrapper(model).transform(InferShapes(), cleanup=False).model
    types = {v.name: v.type.tensor_type.elem_type for v in (*graph.value_info, *graph.output)}
    shadow = onnx.ModelProto()
    shadow.CopyFrom(model)
    for node in shadow.graph.node:
        stand_in = (
            _SHAPE_STAND_INS.get(node.op_type) if node.domain not in ("", "ai.onnx") else None
        )
        if stand_in is None:
            continue
        node.op_type, node.domain = stand_in, ""
        del node.input[1:]
        del node.attribute[:]
        if stand_in == "Cast":
            to = types.get(node.output[0]) or onnx.TensorProto.FLOAT
            node.attribute.append(helper.make_attribute("to", to))
    inferred = onnx.shape_inference.infer_shapes(shadow)
    del inferred.graph.node[:]
    inferred.graph.node.extend(graph.node)
    _add_initializer_value_info(inferred.graph)
    return inferred


def _add_initializer_value_info(graph: onnx.GraphProto) -> None:
    """Value info for each initializer a node reads, as qonnx's ModelWrapper adds it: its
    constant folding builds each node's one-node model from value_info."""
    inits = {t.name: t for t in graph.initializer}
    have = {v.name for v in (*graph.value_info, *graph.input, *graph.output)}
    for node in graph.node:
        for name in node.input:
            if name in inits and name not in have:
                init = inits[name]
                graph.value_info.append(
                    helper.make_tensor_value_info(name, init.data_type, list(init.dims) or None)
                )
                have.add(name)


MIN_OPSET = 13  # the converters emit opset-13 semantics (Resize, Pad, Clip with inputs)
# onnxruntime 1.31 (the pinned runtime, which qonnx's executor and --verify use) runs up to
# opset 26; onnx 1.22 would write 27, which no runtime here loads.
MAX_OPSET = 26


def set_opset_imports(model: onnx.ModelProto, opset: int) -> None:
    """Default domain first (qonnx's folding reads opset_import[0]), then the QONNX domain."""
    newest = min(MAX_OPSET, onnx.defs.onnx_opset_version())
    if not MIN_OPSET <= opset <= newest:
        raise InputError(f"opset {opset} is not supported: choose {MIN_OPSET} to {newest}")
    others = [o for o in model.opset_import if o.domain not in ("", "ai.onnx", QONNX_DOMAIN)]
    del model.opset_import[:]
    model.opset_import.extend(
        [helper.make_opsetid("", opset), helper.make_opsetid(QONNX_DOMAIN, QONNX_DOMAIN_VERSION)]
    )
    model.opset_import.extend(others)


def sort_nodes(graph: onnx.GraphProto) -> None:
    """Order nodes topologically (Kahn, stable: ready nodes keep their relative order)."""
    producers = {out: k for k, node in enumerate(graph.node) for out in node.output if out}
    consumers: dict[int, list[int]] = {}
    waiting = []
    for k, node in enumerate(graph.node):
        deps = {producers[i] for i in node.input if i in producers and producers[i] != k}
        waiting.append(len(deps))
        for d in deps:
            consumers.setdefault(d, []).append(k)
    ready = [k for k, n in enumerate(waiting) if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        k = heapq.heappop(ready)
        order.append(k)
        for c in consumers.get(k, ()):
            waiting[c] -= 1
            if waiting[c] == 0:
                heapq.heappush(ready, c)
    if len(order) != len(graph.node):
        stuck = next(graph.node[k] for k, n in enumerate(waiting) if n > 0)
        raise ConversionError("the graph has a cycle", stuck.name or stuck.op_type)
    if order != sorted(order):
        nodes = [graph.node[k] for k in order]
        copies = [onnx.NodeProto() for _ in nodes]
        for copy, node in zip(copies, nodes, strict=True):
            copy.CopyFrom(node)
        del graph.node[:]
        graph.node.extend(copies)


def unshare_initializers(graph: onnx.GraphProto) -> None:
    """Give every use of an initializer its own copy, as qonnx's GiveUniqueParameterTensors.

    Transformations downstream (FINN, channels-last) rewrite a node's parameters in place and
    must not change another node's.
    """
    inits = {t.name: t for t in graph.initializer}
    seen: set[str] = set()
    taken = TakenNames([*inits, *(o for n in graph.node for o in n.output)])
    for node in graph.node:
        for k, name in enumerate(node.input):
            if name not in inits:
                continue
            if name not in seen:
                seen.add(name)
                continue
            copy = graph.initializer.add()
            copy.CopyFrom(inits[name])
            copy.name = unique_name(name, taken)
            node.input[k] = copy.name


def check_model(model: onnx.ModelProto) -> None:
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConversionError(f"the converted model fails onnx.checker: {first_line}") from exc


def name_nodes(graph: onnx.GraphProto) -> None:
    """Keep each node's given name when it is unique; give the others OpType_k."""
    seen: set[str] = set()
    counts: dict[str, int] = {}
    for node in graph.node:
        if node.name and node.name not in seen:
            seen.add(node.name)
            continue
        while True:
            k = counts.get(node.op_type, 0)
            counts[node.op_type] = k + 1
            candidate = f"{node.op_type}_{k}"
            if candidate not in seen:
                break
        node.name = candidate
        seen.add(candidate)


def name_tensors_after_nodes(graph: onnx.GraphProto) -> None:
    """Name internal tensors ``<producer>_out<k>`` and constants ``<consumer>_param<k>``.

    Graph inputs and outputs keep their names: users feed and read them by name, and the
    metadata (input scales, layouts) refers to them.
    """
    keep = {v.name for v in graph.input} | {v.name for v in graph.output}
    initializers = {t.name for t in graph.initializer}
    mapping: dict[str, str] = {}
    taken = TakenNames(keep)

    def claim(old: str, new: str) -> None:
        if not old or old in keep or old in mapping:
            return
        mapping[old] = unique_name(new, taken)

    for node in graph.node:
        params = 0
        for name in node.input:
            if name in initializers:
                claim(name, f"{node.name}_param{params}")
                params += 1
        for k, name in enumerate(node.output):
            claim(name, f"{node.name}_out{k}")
    if not mapping:
        return
    for node in graph.node:
        node.input[:] = [mapping.get(n, n) for n in node.input]
        node.output[:] = [mapping.get(n, n) for n in node.output]
    for t in graph.initializer:
        t.name = mapping.get(t.name, t.name)
    for vi in graph.value_info:
        vi.name = mapping.get(vi.name, vi.name)


def _drop_shapeless_value_info(graph: onnx.GraphProto) -> None:
    """Inference leaves type-only entries for data-dependent shapes; the checker rejects them."""
    keep = [vi for vi in graph.value_info if vi.type.tensor_type.HasField("shape")]
    if len(keep) != len(graph.value_info):
        del graph.value_info[:]
        graph.value_info.extend(keep)


def _has_foldable_node(model: onnx.ModelProto) -> bool:
    """Whether any node computes from constants only (qonnx's folding pass is quadratic)."""
    constants = {t.name for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type not in _PRESERVED_OP_TYPES and all(i in constants for i in node.input):
            return True
    return False


def _foldable(model, node: onnx.NodeProto) -> bool:
    if node.op_type in _PRESERVED_OP_TYPES:
        return False
    if node.op_type == "Shape":
        # qonnx reads a symbolic dim as 0: folding Shape of a dynamic tensor would bake it in.
        return _is_static(model, node.input[0])
    return True


def _is_static(model, tensor: str) -> bool:
    for vi in (*model.graph.input, *model.graph.value_info, *model.graph.output):
        if vi.name == tensor:
            dims = vi.type.tensor_type.shape.dim
            return bool(dims) and all(d.HasField("dim_value") and d.dim_value > 0 for d in dims)
    return False


def _props(model: onnx.ModelProto) -> dict[str, str]:
    return {p.key: p.value for p in model.metadata_props}
