"""The FINN form's image layout: where the graph's NCHW <-> NHWC Transposes go for FINN.

FINN's hardware layers stream NHWC; its streamlining lowers each Conv to NHWC between two
Transposes and absorbs a ``Transpose -> MultiThreshold`` into an NHWC MultiThreshold, and its
dataflow partition takes only unmapped nodes in front of or behind the mapped ones. The input
and output quantizers of an image model sit at the graph's ends, where nothing cancels those
Transposes: the input's thresholds would come before the first Transpose and the output's
dequantizing Mul after the last, both mapped, with an unmapped Transpose between. Here:

- thresholds reading an NCHW graph input become ``Transpose -> MultiThreshold (NHWC) ->
  Transpose``: the first Transpose stays in front of FINN's layers, the second cancels
  against the conv lowering's;
- a dequantizing ``Mul`` by a scalar behind thresholds on an NCHW graph output becomes
  ``Transpose -> Mul -> Transpose`` with the scale written per channel (the same value for
  every channel): FINN's streamlining moves a scalar Mul past a Transpose, behind it again,
  and a per-channel one it leaves where it is;
- the graph input's layout is annotated (NHWC when it feeds a Transpose to NCHW, as
  ``--keep-io-layout`` writes it, NCHW otherwise), where FINN would guess NCHW.

The function is the same: a Transpose pair is the identity and the thresholds and the Mul act
element by element.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.graph_edit import readers_of
from qonnx_ingest.names import graph_names, unique_name
from qonnx_ingest.passes import PassResult

TO_NHWC, TO_NCHW = [0, 2, 3, 1], [0, 3, 1, 2]


def image_ends_channels_last(model: onnx.ModelProto) -> PassResult:
    """The Transposes at an image model's input and output thresholds where FINN wants them."""
    graph = model.graph
    taken = graph_names(graph)
    constants = {i.name: i for i in graph.initializer}
    readers = readers_of(graph)
    producers = {out: node for node in graph.node for out in node.output}
    outputs = {o.name for o in graph.output}
    rank = _ranks(graph)
    modified = False
    nodes: list[onnx.NodeProto] = []
    for node in graph.node:
        x = node.input[0] if node.input else ""
        if (
            node.op_type == "MultiThreshold"
            and x in {i.name for i in graph.input}
            and rank.get(x) == 4
            and _layout(node) == "NCHW"
        ):
            nodes.extend(_thresholds_in_nhwc(node, taken))
            modified = True
        elif (
            node.op_type == "Mul"
            and node.output[0] in outputs
            and rank.get(node.output[0]) == 4
            and node.input[1] in constants
            and numpy_helper.to_array(constants[node.input[1]]).size == 1
            and x in producers
            and producers[x].op_type == "MultiThreshold"
            and len(readers.get(x, [])) == 1
        ):
            channels = _dims(graph, node.output[0])[1]
            nodes.extend(_scale_in_nhwc(node, constants, channels, graph, taken))
            modified = True
        else:
            nodes.append(node)
    if modified:
        del graph.node[:]
        graph.node.extend(nodes)
    return model, _annotate_input_layout(model, readers, rank) or modified


def _thresholds_in_nhwc(node: onnx.NodeProto, taken) -> list[onnx.NodeProto]:
    base = node.name or node.output[0]
    x, y = node.input[0], node.output[0]
    x_nhwc = unique_name(f"{x}_nhwc", taken)
    y_nhwc = unique_name(f"{y}_nhwc", taken)
    node.input[0], node.output[0] = x_nhwc, y_nhwc
    for a in list(node.attribute):
        if a.name == "data_layout":
            node.attribute.remove(a)
    node.attribute.append(helper.make_attribute("data_layout", "NHWC"))
    return [
        helper.make_node(
            "Transpose", [x], [x_nhwc], perm=TO_NHWC, name=unique_name(f"{base}_to_nhwc", taken)
        ),
        node,
        helper.make_node(
            "Transpose",
            [y_nhwc],
            [y],
            perm=TO_NCHW,
            name=unique_name(f"{base}_to_nchw", taken),
        ),
    ]


def _scale_in_nhwc(node, constants, channels: int, graph, taken) -> list[onnx.NodeProto]:
    base = node.name or node.output[0]
    x, y = node.input[0], node.output[0]
    scale = numpy_helper.to_array(constants[node.input[1]]).reshape(())
    s_name = unique_name(f"{base}_per_channel", taken)
    graph.initializer.append(
        numpy_helper.from_array(np.full((1, 1, 1, channels), scale, scale.dtype), s_name)
    )
    x_nhwc = unique_name(f"{x}_nhwc", taken)
    y_nhwc = unique_name(f"{y}_nhwc", taken)
    node.input[0], node.input[1], node.output[0] = x_nhwc, s_name, y_nhwc
    return [
        helper.make_node(
            "Transpose", [x], [x_nhwc], perm=TO_NHWC, name=unique_name(f"{base}_to_nhwc", taken)
        ),
        node,
        helper.make_node(
            "Transpose", [y_nhwc], [y], perm=TO_NCHW, name=unique_name(f"{base}_to_nchw", taken)
        ),
    ]


def _annotate_input_layout(model: onnx.ModelProto, readers, rank) -> bool:
    """qonnx's ``tensor_layout`` annotation of each 4D graph input (FINN guesses NCHW)."""
    graph = model.graph
    annotations = {a.tensor_name: a for a in graph.quantization_annotation}
    modified = False
    for info in graph.input:
        annotation = annotations.get(info.name)
        keys = {e.key for e in annotation.quant_parameter_tensor_names} if annotation else set()
        if rank.get(info.name) != 4 or "tensor_layout" in keys:
            continue
        to_nchw = [
            n
            for n in readers.get(info.name, [])
            if n.op_type == "Transpose" and _perm(n) == TO_NCHW
        ]
        layout = ["N", "H", "W", "C"] if to_nchw else ["N", "C", "H", "W"]
        if annotation is None:
            annotation = graph.quantization_annotation.add(tensor_name=info.name)
        entry = annotation.quant_parameter_tensor_names.add()
        entry.key, entry.value = "tensor_layout", str(layout)
        modified = True
    return modified


def _perm(node: onnx.NodeProto) -> list[int]:
    return next((list(a.ints) for a in node.attribute if a.name == "perm"), [])


def _layout(node: onnx.NodeProto) -> str:
    for a in node.attribute:
        if a.name == "data_layout":
            return helper.get_attribute_value(a).decode()
    return "NCHW"


def _dims(graph: onnx.GraphProto, name: str) -> list[int]:
    for info in (*graph.input, *graph.value_info, *graph.output):
        if info.name == name and info.type.tensor_type.HasField("shape"):
            return [d.dim_value for d in info.type.tensor_type.shape.dim]
    return []


def _ranks(graph: onnx.GraphProto) -> dict[str, int]:
    return {
        info.name: len(info.type.tensor_type.shape.dim)
        for info in (*graph.input, *graph.value_info, *graph.output)
        if info.type.tensor_type.HasField("shape")
    }
