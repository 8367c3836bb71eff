"""Channels-last output (``tflite2qonnx.convert(..., channels_last=True)``): what qonnx's
``ConvertToChannelsLastAndClean`` makes of our channels-first output, built directly.

A graph built in source order (TFLite's) is NHWC already, so instead of moving every tensor
to NCHW (the layout pass) and having qonnx move them back (minutes on a MediaPipe model: its
passes rescan the graph per node), every tensor keeps its source order. Two linear passes:

Both steps are passes (``qonnx_ingest.passes``):

* ``wrap_implicit`` (before finishing): each implicit op of the layout table (Conv, pools,
  Resize, ...; built with ONNX's channels-first semantics) reads its activations through a
  Transpose to channels-first and writes back through one to channels-last, so the graph is
  plain ONNX that shape inference and constant folding understand; the batch is fixed at 1
  (qonnx's pass and hls4ml need static shapes).
* ``fuse_channels_last`` (after finishing): each wrapped Conv, MaxPool and
  BatchNormalization of rank 3 or 4 becomes the op of qonnx's ``qonnx.custom_op.channels_last``
  domain on the NHWC tensors (a Conv weight is stored OHWI, as qonnx folds it), and a
  Transpose back to channels-last followed by one to channels-first cancels. Ops with no
  channels-last form (AveragePool, Resize, ...) keep their Transposes, as qonnx leaves them;
  so does a MaxPool padded more on one side (Keras's ``padding='same'`` with an odd total:
  qonnx's channels-last MaxPool asserts even padding), exact as plain ONNX.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import numpy as np
import onnx
from onnx import helper, numpy_helper

from layout.classes import infer_ranks
from layout.graph import GraphIndex, constants_to_initializers
from layout.op_table import OP_CLASSES, Kind
from layout.orders import channels_first
from qonnx_ingest.errors import ConversionError, InputError
from qonnx_ingest.finish import finish_model, sort_nodes
from qonnx_ingest.passes import PassResult, run_passes

CHANNELS_LAST_DOMAIN = "qonnx.custom_op.channels_last"
# qonnx's channels-last ops (qonnx.custom_op.channels_last) and the ranks they take
CHANNELS_LAST_OPS = ("Conv", "MaxPool", "BatchNormalization")
CHANNELS_LAST_RANKS = (3, 4)
_QUANTIZERS = ("Quant", "IntQuant", "BipolarQuant", "Trunc")


def to_last(rank: int) -> list[int]:
    return [0, *range(2, rank), 1]


def finish_channels_last(
    model: onnx.ModelProto,
    *,
    opset: int,
    metadata: Mapping[str, str] | None = None,
    layouts: Mapping[str, str] | None = None,
) -> onnx.ModelProto:
    """The finished channels-last model of a source-order graph (graph I/O stays NHWC)."""
    if layouts:
        raise InputError("explicit layouts do not apply to channels-last output (all NHWC)")
    finish = partial(finish_model, opset=opset, metadata=metadata)
    # a Conv weight computed by other nodes gets its OHWI Transpose last: sort
    return run_passes([wrap_implicit, finish, fuse_channels_last, sort_nodes], model)[0]


def wrap_implicit(model: onnx.ModelProto) -> PassResult:
    """A copy of the source-order ``model`` whose implicit ops sit between Transposes, with
    the batch fixed at 1; raises ``ConversionError`` for another dynamic dimension."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    constants_to_initializers(out)
    _fix_batch(out.graph)
    g = GraphIndex(out)
    infer_ranks(g)
    nodes = []
    for node in g.nodes:
        op = OP_CLASSES.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        if op is None or op.kind is not Kind.IMPLICIT:
            nodes.append(node)
            continue
        after = []
        rank_out = _rank(g, node, node.input[0])
        for slot in op.ports_in:
            name = node.input[slot] if slot < len(node.input) else ""
            if name:  # a constant too: finishing folds its Transpose
                rank = _rank(g, node, name)
                node.input[slot] = f"{name}__{node.output[0]}_nchw"
                nodes.append(transpose_node(name, node.input[slot], channels_first(rank)))
        for slot in op.ports_out:
            name = node.output[slot] if slot < len(node.output) else ""
            if name:
                node.output[slot] = f"{name}_nchw"
                after.append(transpose_node(node.output[slot], name, to_last(rank_out)))
        nodes.append(node)
        nodes.extend(after)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out, True


def fuse_channels_last(model: onnx.ModelProto) -> PassResult:
    """The finished ``wrap_implicit`` graph with qonnx's channels-last ops, in place
    (modified, conservatively, always)."""
    graph = model.graph
    _split_chains(graph)
    producer = {o: n for n in graph.node for o in n.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    inits = {t.name: t for t in graph.initializer}
    infos = {vi.name: vi for vi in graph.value_info}
    outputs = {vi.name for vi in graph.output}
    dropped: set[int] = set()
    moved: list[onnx.NodeProto] = []  # weight Transposes, placed after their sources below
    for node in graph.node:
        if node.domain not in ("", "ai.onnx") or node.op_type not in CHANNELS_LAST_OPS:
            continue
        before = producer.get(node.input[0])
        afters = consumers.get(node.output[0], [])
        if len(node.output) != 1 or before is None or len(afters) != 1:
            continue
        rank = len(_perm(before) or ())
        if (
            rank not in CHANNELS_LAST_RANKS
            or _perm(before) != list(channels_first(rank))
            or _perm(afters[0]) != to_last(rank)
            or len(consumers[before.output[0]]) != 1
            or node.output[0] in outputs
            or not _even_pool_pads(node)
        ):
            continue
        if node.op_type == "Conv":
            node.input[1] = _weight_to_last(node, graph, producer, consumers, inits, infos, moved)
        node.input[0] = before.input[0]
        node.output[0] = afters[0].output[0]
        node.domain = CHANNELS_LAST_DOMAIN
        dropped.update((id(before), id(afters[0])))
    kept = _after_sources([n for n in graph.node if id(n) not in dropped], moved)
    kept = _cancel_pairs(kept, outputs)
    del graph.node[:]
    graph.node.extend(kept)
    live = {i for n in kept for i in n.input} | {o for n in kept for o in n.output} | outputs
    keep_vi = [vi for vi in graph.value_info if vi.name in live]
    del graph.value_info[:]
    graph.value_info.extend(keep_vi)
    used = {i for n in kept for i in n.input}
    keep_init = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(keep_init)
    if any(n.domain == CHANNELS_LAST_DOMAIN for n in kept):
        opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
        if all(o.domain != CHANNELS_LAST_DOMAIN for o in model.opset_import):
            model.opset_import.append(helper.make_opsetid(CHANNELS_LAST_DOMAIN, opset))
    return model, True


# ---------------------------------------------------------------------- helpers
def _split_chains(graph: onnx.GraphProto) -> None:
    """A Transpose to channels-last and one back between two implicit ops that tf2onnx
    chains channels-first (a separable conv's depthwise and pointwise halves), so each sits
    between its own pair; the pair cancels or is absorbed when both are fused."""
    producer = {o: n for n in graph.node for o in n.output}
    infos = {vi.name: vi for vi in graph.value_info}
    nodes = []
    for node in graph.node:
        first = producer.get(node.input[0]) if node.input else None
        dims = _dims(infos.get(node.input[0]))
        if _implicit(node) and first is not None and _implicit(first) and len(dims or ()) > 2:
            name, perm = node.input[0], to_last(len(dims))
            elem = _elem_type(infos[name])
            nodes.append(transpose_node(name, f"{name}_last", perm))
            nodes.append(transpose_node(f"{name}_last", f"{name}_first", channels_first(len(dims))))
            # shapes on record: qonnx's channels-last ops read their input's in InferShapes
            graph.value_info.extend(
                [
                    helper.make_tensor_value_info(f"{name}_last", elem, [dims[i] for i in perm]),
                    helper.make_tensor_value_info(f"{name}_first", elem, dims),
                ]
            )
            node.input[0] = f"{name}_first"
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)


def _even_pool_pads(node: onnx.NodeProto) -> bool:
    """False for a MaxPool padded unevenly, which qonnx's channels-last MaxPool refuses
    ("Uneven padding not supported" in its shape inference)."""
    if node.op_type != "MaxPool":
        return True
    pads = next((list(a.ints) for a in node.attribute if a.name == "pads"), [])
    half = len(pads) // 2
    return pads[:half] == pads[half:]


def _elem_type(vi: onnx.ValueInfoProto) -> int:
    return vi.type.tensor_type.elem_type


def _implicit(node: onnx.NodeProto) -> bool:
    op = OP_CLASSES.get(node.op_type) if node.domain in ("", "ai.onnx") else None
    return op is not None and op.kind is Kind.IMPLICIT


def _fix_batch(graph: onnx.GraphProto) -> None:
    """Batch 1 on every tensor whose leading dim is a graph input's symbolic batch."""
    batch = set()
    for vi in graph.input:
        dims = vi.type.tensor_type.shape.dim
        if dims and dims[0].HasField("dim_param"):
            batch.add(dims[0].dim_param)
    for vi in (*graph.input, *graph.output, *graph.value_info):
        for dim in vi.type.tensor_type.shape.dim:
            if dim.HasField("dim_param") and dim.dim_param in batch:
                dim.Clear()
                dim.dim_value = 1
    for vi in graph.input:
        dims = vi.type.tensor_type.shape.dim
        if any(not d.HasField("dim_value") for d in dims):
            shape = [d.dim_value if d.HasField("dim_value") else "?" for d in dims]
            raise ConversionError(
                f"channels-last output needs static shapes, but this input is {shape} after "
                "fixing the batch at 1: give its shape",
                vi.name,
            )


def _rank(g: GraphIndex, node: onnx.NodeProto, name: str) -> int:
    rank = g.rank.get(name)
    if rank not in (3, 4, 5):
        raise ConversionError(
            f"{node.op_type} ({node.name or node.output[0]}): rank {rank} has no "
            "channels-first form",
            name,
        )
    return rank


def transpose_node(src: str, dst: str, perm) -> onnx.NodeProto:
    return helper.make_node("Transpose", [src], [dst], name=f"{dst}_transpose", perm=list(perm))


def _perm(node: onnx.NodeProto) -> list[int] | None:
    if node.op_type != "Transpose":
        return None
    return next((list(a.ints) for a in node.attribute if a.name == "perm"), None)


def _after_sources(
    nodes: list[onnx.NodeProto], moved: list[onnx.NodeProto]
) -> list[onnx.NodeProto]:
    """``nodes`` with each of ``moved`` right after the node producing its input (first when
    an initializer is its input): before every Conv reading it, the order stays topological."""
    by_source: dict[str, list[onnx.NodeProto]] = {}
    for t in moved:
        by_source.setdefault(t.input[0], []).append(t)
    produced = {o for n in nodes for o in n.output}
    ordered = [t for name, ts in by_source.items() if name not in produced for t in ts]
    for n in nodes:
        ordered.append(n)
        ordered.extend(t for o in n.output for t in by_source.get(o, []))
    return ordered


def _weight_to_last(node, graph, producer, consumers, inits, infos, moved_nodes) -> str:
    """The Conv weight OIHW -> OHWI, folded into its initializer (through one quantizer whose
    per-output-channel parameters keep their shape) where it has no other reader; otherwise
    read through a Transpose."""
    name = node.input[1]
    rank = len(_dims(infos.get(name)) or _dims_init(inits.get(name)) or ())
    perm = to_last(rank) if rank else None
    source = producer.get(name)
    target = name if source is None else source.input[0] if source.op_type in _QUANTIZERS else ""
    params_ok = source is None or all(
        p in inits and _per_output_channel(list(inits[p].dims), rank) for p in source.input[1:] if p
    )
    if (
        perm
        and target in inits
        and params_ok
        and len(consumers.get(target, [])) == 1
        and len(consumers.get(name, [])) == 1
    ):
        init = inits[target]
        array = np.ascontiguousarray(numpy_helper.to_array(init).transpose(perm))
        init.CopyFrom(numpy_helper.from_array(array, init.name))
        for t in {name, target}:
            if t in infos:
                _set_dims(infos[t], array.shape)
        return name
    if not perm:
        raise ConversionError("the rank of this Conv weight is unknown", name)
    moved = f"{name}_ohwi"
    if moved in infos:  # one weight read by several Convs (an SSD head's shared towers)
        return moved
    moved_nodes.append(transpose_node(name, moved, perm))
    # its shape on record: qonnx's channels-last Conv reads it in InferShapes (cleanup_model)
    dims = _dims(infos.get(name)) or _dims_init(inits.get(name))
    elem_type = infos[name].type.tensor_type.elem_type if name in infos else inits[name].data_type
    info = helper.make_tensor_value_info(moved, elem_type, [dims[i] for i in perm])
    graph.value_info.append(info)
    infos[moved] = info
    return moved


def _per_output_channel(dims: list[int], rank: int) -> bool:
    """A parameter the OIHW -> OHWI transpose leaves as it is: one value, or [O, 1, 1, 1]."""
    return int(np.prod(dims)) == 1 or (len(dims) == rank and all(d == 1 for d in dims[1:]))


def _dims(vi: onnx.ValueInfoProto | None) -> list[int] | None:
    if vi is None or not vi.type.tensor_type.HasField("shape"):
        return None
    return [d.dim_value for d in vi.type.tensor_type.shape.dim]


def _dims_init(t: onnx.TensorProto | None) -> list[int] | None:
    return None if t is None else list(t.dims)


def _set_dims(vi: onnx.ValueInfoProto, shape) -> None:
    dims = vi.type.tensor_type.shape.dim
    for d, size in zip(dims, shape, strict=True):
        d.Clear()
        d.dim_value = int(size)


def _cancel_pairs(nodes: list[onnx.NodeProto], outputs: set[str]) -> list[onnx.NodeProto]:
    """Transpose(to channels-last) -> Transpose(to channels-first) reads as the first's input."""
    producer = {o: n for n in nodes for o in n.output}
    rename: dict[str, str] = {}
    dropped = set()
    for node in nodes:
        perm = _perm(node)
        first = producer.get(node.input[0]) if perm else None
        if first is None or _perm(first) is None or node.output[0] in outputs:
            continue
        rank = len(perm)
        if (
            rank in (3, 4, 5)
            and perm == list(channels_first(rank))
            and _perm(first) == to_last(rank)
        ):
            rename[node.output[0]] = first.input[0]
            dropped.add(id(node))
    for node in nodes:
        node.input[:] = [rename.get(i, i) for i in node.input]
    kept = [n for n in nodes if id(n) not in dropped]
    used = {i for n in kept for i in n.input} | outputs
    return [n for n in kept if _perm(n) is None or n.output[0] in used]
