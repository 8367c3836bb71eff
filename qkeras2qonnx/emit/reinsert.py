"""Put one QONNX node per layer-map entry into the tf2onnx graph, and prove none is missing."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qkeras2qonnx.emit.composite import Builder
from qkeras2qonnx.emit.layer_map import LayerMap, MapEntry
from qkeras2qonnx.emit.markers import decode_weight_markers, marker_id
from qkeras2qonnx.emit.spec import BIPOLAR, FLOAT, QuantSpec
from qonnx_ingest.errors import ConversionError
from qonnx_ingest.finish import QUANT_OP_TYPES, subgraph_reads
from qonnx_ingest.passes import PassResult
from qonnx_ingest.quant import QuantNode, make_bipolar_quant, make_quant


def reinsert(model: onnx.ModelProto, *, layer_map: LayerMap, int_quant: bool = False) -> PassResult:
    """Replace weight markers by the real values behind a Quant node, output markers by the
    activation's Quant node (or nothing); raise if any recorded quantizer found no tensor."""
    graph = model.graph
    op_type = "IntQuant" if int_quant else "Quant"
    placed: Counter[int] = Counter()
    _place_weights(graph, layer_map, op_type, placed)
    _place_outputs(graph, layer_map, op_type, placed)
    for entry in layer_map.entries:
        if placed[id(entry)] != 1:
            raise ConversionError(
                "the quantizer's tensor was not found in the tf2onnx graph "
                f"({placed[id(entry)]} matches)",
                entry.where,
            )
    # Stale after the surgery; finish_model infers shapes again.
    del graph.value_info[:]
    check_quantizer_count(model, layer_map)
    return model, True


def check_quantizer_count(model: onnx.ModelProto, layer_map: LayerMap) -> None:
    """Exactly one QONNX quantization node per recorded quantizer, by name."""
    names = Counter(n.name for n in model.graph.node if n.op_type in QUANT_OP_TYPES)
    expected = Counter(node_name(e) for e in layer_map.entries)
    expected.update(list(layer_map.recurrent_nodes()))
    if names != expected:
        missing = sorted((expected - names).elements())
        extra = sorted((names - expected).elements())
        raise ConversionError(
            f"{sum(names.values())} quantization nodes for {sum(expected.values())} quantizers"
            + (f"; missing: {', '.join(missing)}" if missing else "")
            + (f"; unexpected: {', '.join(extra)}" if extra else "")
        )


def node_name(entry: MapEntry) -> str:
    role = entry.role if entry.role.endswith("quantizer") else f"{entry.role}_quantizer"
    return f"{entry.layer}/{role}"


def _place_weights(graph: onnx.GraphProto, layer_map: LayerMap, op_type: str, placed) -> None:
    entries = sorted((e for e in layer_map.entries if e.values is not None), key=lambda e: e.marker)
    if not entries:
        return
    starts = np.array([e.marker for e in entries])
    readers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}  # initializer -> (node, slot)
    for node in graph.node:
        for slot, name in enumerate(node.input):
            readers.setdefault(name, []).append((node, slot))
    read_inside = subgraph_reads(graph)  # by name, from If / Loop bodies
    new_nodes = []
    for init in list(graph.initializer):
        if init.data_type != onnx.TensorProto.FLOAT:
            continue
        array = numpy_helper.to_array(init)
        index = decode_weight_markers(array)
        if index is None:
            continue
        k = int(np.searchsorted(starts, index.min(), side="right")) - 1
        entry = entries[k] if k >= 0 else None
        if entry is None or index.min() >= entry.marker + entry.values.size:
            continue  # not ours: real values that happen to lie in the marker range
        local = (index - entry.marker).ravel()
        size = entry.values.size
        if local.size != size or local.max() >= size or np.unique(local).size != size:
            raise ConversionError(
                f"tf2onnx changed the quantized weight (initializer {init.name!r} holds part "
                "of it or mixes it with other values), so its quantizer cannot be placed",
                entry.where,
            )
        values = entry.values.ravel()[local].reshape(array.shape)
        scale = np.broadcast_to(entry.spec.scale, entry.values.shape).ravel()[local]
        init.CopyFrom(numpy_helper.from_array(values.astype(np.float32), init.name))
        shape_only = all(node.op_type == "Shape" for node, _ in readers.get(init.name, ()))
        if shape_only and init.name not in read_inside:
            # a copy whose values nothing reads (tf2onnx's einsum over a non-last axis keeps
            # the kernel for a Shape beside the transposed one its Gemm reads): no Quant there
            continue
        quantized = f"{init.name}_quantized"
        for node, slot in readers.get(init.name, ()):
            node.input[slot] = quantized
        qnode = _quant_node(entry, init.name, quantized, scale.reshape(array.shape), op_type)
        new_nodes.append(qnode.node)
        graph.initializer.extend(qnode.initializers)
        placed[id(entry)] += 1
    nodes = [*new_nodes, *graph.node]
    del graph.node[:]
    graph.node.extend(nodes)


def _place_outputs(graph: onnx.GraphProto, layer_map: LayerMap, op_type: str, placed) -> None:
    activations = {e.marker: e for e in layer_map.entries if e.values is None}
    seen: set[int] = set()
    nodes, bypassed = [], []
    for node in graph.node:
        marker = marker_id(node)
        if marker is None:
            nodes.append(node)
            continue
        layer = layer_map.outputs.get(marker)
        if layer is None:
            raise ConversionError(f"unknown layer marker {marker}", node.name)
        if marker in seen:
            raise ConversionError(
                "the layer's output occurs more than once in the ONNX graph "
                "(layers called more than once are not supported)",
                layer,
            )
        seen.add(marker)
        entry = activations.get(marker)
        if entry is None:  # the layer only has weight quantizers: drop its marker
            bypassed.append(node)
            continue
        scale = entry.spec.scale.reshape(())  # activation scales are per tensor (see strip)
        source = node.input[0]
        if entry.spec.composite is not None:  # its exact computation, then the Quant
            builder = Builder(node_name(entry))
            source = entry.spec.composite.emit(builder, source)
            nodes.extend(builder.nodes)
            graph.initializer.extend(builder.initializers)
        qnode = _quant_node(entry, source, node.output[0], scale, op_type)
        nodes.append(qnode.node)
        graph.initializer.extend(qnode.initializers)
        placed[id(entry)] += 1
    del graph.node[:]
    graph.node.extend(nodes)
    _bypass(graph, [(node.input[0], node.output[0]) for node in bypassed])
    for marker in sorted(set(layer_map.outputs) - seen):
        raise ConversionError("tf2onnx lost the layer's output marker", layer_map.outputs[marker])


def _quant_node(entry: MapEntry, x: str, y: str, scale: np.ndarray, op_type: str) -> QuantNode:
    """The node for ``entry``; a weight's ``scale`` is per element in the ONNX layout."""
    scale = np.asarray(scale)
    x_shape = scale.shape if scale.ndim else None
    return spec_quant_node(entry.spec, x, y, scale, x_shape, name=node_name(entry), op_type=op_type)


def spec_quant_node(
    spec: QuantSpec,
    x: str,
    y: str,
    scale: np.ndarray,
    x_shape: tuple[int, ...] | None,
    *,
    name: str,
    op_type: str,
) -> QuantNode:
    """The Quant / BipolarQuant node ``spec`` describes, its per-element ``scale`` reduced to
    per-tensor or per-axis (recurrent cells build theirs with it too)."""
    scale, axis = per_axis(np.asarray(scale))
    if spec.kind == FLOAT:  # HGQ2's minifloat (hgq2_float)
        from qonnx_ingest.float_quant import make_float_quant

        e, m, bias, top = spec.minifloat
        return make_float_quant(
            x, y, exponent_bits=e, mantissa_bits=m, exponent_bias=bias, max_val=top, name=name
        )
    if spec.kind == BIPOLAR:
        return make_bipolar_quant(x, y, scale, x_shape=x_shape, axis=axis, name=name)
    return make_quant(
        x,
        y,
        scale,
        spec.zero_point,
        spec.bit_width,
        signed=spec.signed,
        narrow=spec.narrow,
        rounding_mode=spec.rounding_mode,
        x_shape=x_shape,
        axis=axis,
        name=name,
        op_type=op_type,
    )


def per_axis(full: np.ndarray) -> tuple[np.ndarray, int | None]:
    """The compact form of a per-element scale: scalar, one value per slice of an axis, or
    (when it varies along several axes) the full tensor."""
    if full.size <= 1 or np.all(full == full.flat[0]):
        return np.asarray(full.flat[0]), None
    for axis in range(full.ndim):
        index = [0] * full.ndim
        index[axis] = slice(None)
        vector = full[tuple(index)]
        shape = [1] * full.ndim
        shape[axis] = vector.size
        if np.array_equal(np.broadcast_to(vector.reshape(shape), full.shape), full):
            return vector, axis
    return full, None


def _bypass(graph: onnx.GraphProto, pairs: list[tuple[str, str]]) -> None:
    """Make each ``dst`` (a removed marker's output) an alias of its ``src``, in one pass over
    the graph (a pass per marker is quadratic in the layer count)."""
    outputs = {o.name for o in graph.output}
    alias = {dst: src for src, dst in pairs if dst not in outputs}

    def resolve(name: str) -> str:
        while name in alias:
            name = alias[name]
        return name

    if alias:
        for node in graph.node:
            if any(i in alias for i in node.input):
                node.input[:] = [resolve(i) for i in node.input]
    for src, dst in pairs:
        if dst in outputs:
            _bypass_to_output(graph, resolve(src), dst, outputs)


def _bypass_to_output(graph: onnx.GraphProto, src: str, dst: str, outputs: set[str]) -> None:
    """Graph output ``dst`` takes ``src``'s value: ``src`` renamed where it can be, else an
    Identity."""
    producers = [n for n in graph.node if src in n.output]
    fixed = {i.name for i in graph.input} | {t.name for t in graph.initializer} | outputs
    if len(producers) == 1 and src not in fixed:  # rename src to the graph output's name
        for node in graph.node:
            node.input[:] = [dst if i == src else i for i in node.input]
            node.output[:] = [dst if o == src else o for o in node.output]
        return
    graph.node.append(helper.make_node("Identity", [src], [dst], name=f"{dst}_identity"))
