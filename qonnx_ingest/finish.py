"""Turning a freshly converted graph into a clean, checkable QONNX model.

Both converters end here, so every model we write has the same hygiene: opset imports that
name the QONNX domain (the removed qonnx converter's output failed ``onnx.checker``), shapes
on every tensor, constants folded except the quantizers, and unique readable names.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from functools import partial

import onnx
from onnx import helper

from qonnx_ingest import DEFAULT_OPSET, __version__
from qonnx_ingest.compact import compact, needs_compacting
from qonnx_ingest.errors import ConversionError, InputError
from qonnx_ingest.fold import fold_constants, share_equal_initializers
from qonnx_ingest.names import TakenNames, unique_name
from qonnx_ingest.passes import Pass, PassResult, run_passes
from qonnx_ingest.quant import QONNX_DOMAIN, QONNX_DOMAIN_VERSION, QUANT_OP_TYPES
from qonnx_ingest.symbolic_dims import forget_generated_dims, stale_after_static_inputs


def finish_model(
    model: onnx.ModelProto,
    *,
    opset: int = DEFAULT_OPSET,
    metadata: Mapping[str, str] | None = None,
    rename_tensors: bool = True,
    compact_large: bool = False,
) -> PassResult:
    """The finished model: opsets, constants folded except the quantizers, equal constants
    shared, unused tensors dropped, names, checks; in time linear in the graph. A pass
    (``qonnx_ingest.passes``) made of passes; it says True (it re-infers every shape).

    ``compact_large``: a graph whose structure outweighs its weights gets the compact form
    (qonnx_ingest.compact); only where no metadata names internal tensors."""
    # qonnx's passes (InferShapes, FoldConstantsFiltered and the cleanup each triggers) look
    # tensors up by scanning the graph: minutes on a 2,000-operator model. These do the same
    # work from indexes built once per pass.
    passes: list[Pass] = [
        partial(set_opset_imports, opset=opset),
        quant_domains,
        sort_nodes,
        _inferred_shapes,
        _folded_constants,
        sort_commutative_inputs,
        share_equal_initializers,
        remove_unused_tensors,
        drop_shapeless_value_info,
        name_nodes,
    ]
    if rename_tensors:
        passes.append(name_tensors_after_nodes)
        if compact_large:
            passes.append(compact_if_large)
    passes.append(partial(stamp, metadata=metadata))
    model, _ = run_passes(passes, model)
    check_model(model)
    return model, True


def quant_domains(model: onnx.ModelProto) -> PassResult:
    """Every quantizer node in the QONNX domain."""
    quants = [n for n in model.graph.node if n.op_type in QUANT_OP_TYPES]
    modified = any(n.domain != QONNX_DOMAIN for n in quants)
    for node in quants:
        node.domain = QONNX_DOMAIN
    return model, modified


def _inferred_shapes(model: onnx.ModelProto) -> PassResult:
    """Shapes inferred afresh: the generated dim names of an earlier form of the graph are
    forgotten first (``qonnx_ingest.symbolic_dims``)."""
    forget_generated_dims(model.graph)
    try:
        return infer_shapes(model), True
    except Exception as exc:  # onnx's inference found inconsistent shapes or types
        where = _refused_custom_node(model)
        raise ConversionError(
            f"shape inference failed: {type(exc).__name__}: {exc}", where
        ) from exc


def _refused_custom_node(model: onnx.ModelProto) -> str | None:
    """The first custom node whose qonnx op cannot stand in for shape inference: qonnx's
    InferShapes fails with that op's bare assertion ("Uneven padding not supported") and names
    no node. None when every one can (onnx's own errors name their node)."""
    custom = [n for n in model.graph.node if n.domain not in ("", "ai.onnx")]
    custom = [n for n in custom if n.op_type not in _SHAPE_STAND_INS]
    if not custom:
        return None
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.custom_op.registry import getCustomOp

    wrapper = ModelWrapper(model)
    for node in custom:
        try:
            getCustomOp(node).make_shape_compatible_op(wrapper)
        except Exception:  # the op refused this node's attributes or shapes
            return node.name or node.op_type
    return None


def _folded_constants(model: onnx.ModelProto) -> PassResult:
    """Constants folded; with static inputs, shapes re-inferred and folded again while folding
    makes unknown dims static (``symbolic_dims.stale_after_static_inputs``)."""
    modified = False
    for _ in range(_FOLD_ROUNDS):
        try:
            model, folded = fold_constants(model)
        except Exception as exc:  # onnxruntime refused a node; name the stage that failed
            text = f"constant folding failed: {type(exc).__name__}: {exc}"
            raise ConversionError(text) from exc
        modified |= folded
        if not (folded and stale_after_static_inputs(model.graph)):
            break
        inits = {t.name for t in model.graph.initializer}  # their value_info: from the data
        kept = [v for v in model.graph.value_info if v.name not in inits]
        del model.graph.value_info[:]
        model.graph.value_info.extend(kept)
        model, _ = _inferred_shapes(model)
    return model, modified


_FOLD_ROUNDS = 3


def compact_if_large(model: onnx.ModelProto) -> PassResult:
    """The compact form for a graph whose structure outweighs its weights."""
    return compact(model) if needs_compacting(model) else (model, False)


def stamp(model: onnx.ModelProto, *, metadata: Mapping[str, str] | None = None) -> PassResult:
    """Our name and version as the producer; ``metadata`` added to the model's properties."""
    model.producer_name = "qonnx-ingest"
    model.producer_version = __version__
    if metadata:
        helper.set_model_props(model, {**_props(model), **dict(metadata)})
    return model, True


# Shape-compatible stand-ins for qonnx's quantizers, as qonnx's own InferShapes makes them.
_SHAPE_STAND_INS = {"Quant": "Cast", "IntQuant": "Cast", "BipolarQuant": "Identity",
                    "Trunc": "Identity"}  # fmt: skip


def infer_shapes(model: onnx.ModelProto, *, data_prop: bool = False) -> onnx.ModelProto:
    """qonnx's InferShapes in linear time: onnx's inference on a copy whose quantizers stand
    in as Cast (to the output's recorded type, else float32) or Identity, then the original
    nodes back. qonnx's own swaps nodes in and out of the list one by one, quadratic in the
    node count (95 s for a 1,000-layer TFLite model). Other custom ops go to qonnx's.
    ``data_prop``: onnx's data propagation too (sizes computed by Shape/Slice/Concat reach
    ConstantOfShape and Reshape).
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
    inferred = onnx.shape_inference.infer_shapes(shadow, data_prop=data_prop)
    del inferred.graph.node[:]
    inferred.graph.node.extend(graph.node)
    _add_initializer_value_info(inferred.graph)
    return inferred


def _add_initializer_value_info(graph: onnx.GraphProto) -> None:
    """Value info for each initializer a node reads, as qonnx's ModelWrapper adds it: qonnx's
    ``execute_node`` (its executor, constant folding downstream) builds each one-node model
    from value_info."""
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


def set_opset_imports(model: onnx.ModelProto, *, opset: int) -> PassResult:
    """Default domain first (qonnx's folding reads opset_import[0]), then the QONNX domain;
    the IR version is the lowest those opsets allow."""
    before = (model.ir_version, [(o.domain, o.version) for o in model.opset_import])
    newest = min(MAX_OPSET, onnx.defs.onnx_opset_version())
    if not MIN_OPSET <= opset <= newest:
        raise InputError(f"opset {opset} is not supported: choose {MIN_OPSET} to {newest}")
    others = [o for o in model.opset_import if o.domain not in ("", "ai.onnx", QONNX_DOMAIN)]
    del model.opset_import[:]
    model.opset_import.extend(
        [helper.make_opsetid("", opset), helper.make_opsetid(QONNX_DOMAIN, QONNX_DOMAIN_VERSION)]
    )
    model.opset_import.extend(others)
    # the IR version the opsets need, not the installed onnx's newest: onnx 1.23 writes IR 14,
    # which onnxruntime 1.31 refuses to load
    model.ir_version = helper.find_min_ir_version_for(model.opset_import, ignore_unknown=True)
    return model, before != (model.ir_version, [(o.domain, o.version) for o in model.opset_import])


def sort_nodes(model: onnx.ModelProto) -> PassResult:
    """Order nodes topologically (Kahn, stable: ready nodes keep their relative order)."""
    graph = model.graph
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
    if order == sorted(order):
        return model, False
    nodes = [graph.node[k] for k in order]
    copies = [onnx.NodeProto() for _ in nodes]
    for copy, node in zip(copies, nodes, strict=True):
        copy.CopyFrom(node)
    del graph.node[:]
    graph.node.extend(copies)
    return model, True


# qonnx's SortCommutativeInputsInitializerLast: the order FINN's and qonnx's rewrites assume.
_COMMUTATIVE = frozenset({"Add", "Mul", "And", "Or", "Xor", "Sum"})


def sort_commutative_inputs(model: onnx.ModelProto) -> PassResult:
    """Put the constant inputs of commutative ops last, the others keeping their order."""
    inits = {t.name for t in model.graph.initializer}
    modified = False
    for node in model.graph.node:
        if node.op_type in _COMMUTATIVE:
            names = list(node.input)
            ordered = [n for n in names if n not in inits] + [n for n in names if n in inits]
            if ordered != names:
                node.input[:] = ordered
                modified = True
    return model, modified


def remove_unused_tensors(model: onnx.ModelProto) -> PassResult:
    """Drop initializers, value_info and annotations no node reads or writes (qonnx's
    RemoveUnusedTensors)."""
    graph = model.graph
    modified = False
    used = {name for node in graph.node for name in (*node.input, *node.output)}
    used |= subgraph_reads(graph)
    for field in (graph.initializer, graph.value_info):
        kept = [t for t in field if t.name in used]
        if len(kept) != len(field):
            del field[:]
            field.extend(kept)
            modified = True
    notes = [a for a in graph.quantization_annotation if a.tensor_name in used]
    if len(notes) != len(graph.quantization_annotation):
        del graph.quantization_annotation[:]
        graph.quantization_annotation.extend(notes)
        modified = True
    return model, modified


def subgraph_reads(graph: onnx.GraphProto) -> set[str]:
    """Names the subgraphs of ``graph``'s nodes (If branches, Loop bodies, at any depth) read:
    an outer tensor is read there by name, not listed as the node's input."""
    reads: set[str] = set()
    for node in graph.node:
        for attr in node.attribute:
            for sub in (attr.g,) if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                reads.update(name for inner in sub.node for name in inner.input)
                reads |= subgraph_reads(sub)
    return reads


def check_model(model: onnx.ModelProto) -> None:
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConversionError(f"the converted model fails onnx.checker: {first_line}") from exc


def name_nodes(model: onnx.ModelProto) -> PassResult:
    """Keep each node's given name when it is unique; give the others OpType_k."""
    seen: set[str] = set()
    counts: dict[str, int] = {}
    modified = False
    for node in model.graph.node:
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
        modified = True
    return model, modified


def name_tensors_after_nodes(model: onnx.ModelProto) -> PassResult:
    """Name internal tensors ``<producer>_out<k>`` and constants ``<consumer>_param<k>``.

    Graph inputs and outputs keep their names: users feed and read them by name, and the
    metadata (input scales, layouts) refers to them.
    """
    graph = model.graph
    keep = {v.name for v in graph.input} | {v.name for v in graph.output}
    keep |= subgraph_reads(graph)  # If branches and Loop bodies read outer tensors by name
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
        return model, False
    for node in graph.node:
        node.input[:] = [mapping.get(n, n) for n in node.input]
        node.output[:] = [mapping.get(n, n) for n in node.output]
    for t in graph.initializer:
        t.name = mapping.get(t.name, t.name)
    for vi in graph.value_info:
        vi.name = mapping.get(vi.name, vi.name)
    return model, True


def drop_shapeless_value_info(model: onnx.ModelProto) -> PassResult:
    """Inference leaves type-only entries for data-dependent shapes; the checker rejects them.
    A second entry for one tensor goes too: qonnx's ModelWrapper refuses a model with one
    ("Multiple ValueInfoProto found")."""
    graph = model.graph
    seen: set[str] = set()
    keep = []
    for vi in graph.value_info:
        if vi.type.tensor_type.HasField("shape") and vi.name not in seen:
            seen.add(vi.name)
            keep.append(vi)
    if len(keep) == len(graph.value_info):
        return model, False
    del graph.value_info[:]
    graph.value_info.extend(keep)
    return model, True


def _props(model: onnx.ModelProto) -> dict[str, str]:
    return {p.key: p.value for p in model.metadata_props}
