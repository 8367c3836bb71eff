"""The FINN form's pooling and reshapes: an AveragePool as the depthwise sum FINN maps, and
two Reshapes in a row as one.

FINN's builder maps MaxPool and Brevitas's QuantAvgPool2d, not ONNX's AveragePool, which then
stays between its layers (TFLite's AVERAGE_POOL_2D in front of a classifier). An unpadded
AveragePool is the sum over its window divided by the window's size: here a depthwise Conv
with a kernel of ones (a 2-bit weight Quant, so FINN knows the weights are integers; FINN
lowers it to its sliding window and vector unit) and a Div by the size, which the thresholds
behind fold in exactly (``finn_thresholds``: FINN itself would turn the Div into a Mul by an
inexact reciprocal). FINN's flatten removal takes one Reshape behind a Transpose; a Reshape of
a Reshape is the second one alone.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.graph_edit import readers_of
from qonnx_ingest.names import graph_names, unique_name
from qonnx_ingest.passes import PassResult

QONNX_DOMAIN = "qonnx.custom_op.general"


def average_pools_as_sums(model: onnx.ModelProto) -> PassResult:
    """Each unpadded 2D AveragePool (and a ReduceMean over the image) as a depthwise Conv of
    ones and a Div by the window size."""
    graph = model.graph
    taken = graph_names(graph)
    dims = {
        i.name: [d.dim_value for d in i.type.tensor_type.shape.dim]
        for i in (*graph.input, *graph.value_info, *graph.output)
        if i.type.tensor_type.HasField("shape")
    }
    nodes: list[onnx.NodeProto] = []
    modified = False
    for node in graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        shape = dims.get(node.input[0]) if node.input else None
        pool = node.op_type == "AveragePool" or _spatial_mean(node, attrs, shape)
        if node.op_type == "ReduceMean" and pool:  # the mean over the image: its one window
            attrs = {"kernel_shape": shape[2:]}
        kernel = list(attrs.get("kernel_shape", []))
        if (
            not pool
            or shape is None
            or len(shape) != 4
            or len(kernel) != 2
            or any(attrs.get("pads", [0]))
            or attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", b"VALID")
            or attrs.get("ceil_mode", 0)
        ):
            nodes.append(node)
            continue
        channels, base = shape[1], node.name or node.output[0]
        names = {w: unique_name(f"{base}_{w}", taken) for w in ("ones", "s", "z", "b", "w")}
        for what, value in (
            ("ones", np.ones((channels, 1, *kernel), np.float32)),
            ("s", np.ones(1, np.float32)),
            ("z", np.zeros(1, np.float32)),
            ("b", np.float32(2)),
        ):
            graph.initializer.append(numpy_helper.from_array(np.asarray(value), names[what]))
        size = unique_name(f"{base}_size", taken)
        graph.initializer.append(numpy_helper.from_array(np.float32(kernel[0] * kernel[1]), size))
        total = unique_name(f"{base}_sum", taken)
        nodes += [
            helper.make_node(
                "Quant",
                [names[w] for w in ("ones", "s", "z", "b")],
                [names["w"]],
                name=unique_name(f"{base}_ones_Quant", taken),
                domain=QONNX_DOMAIN,
                signed=1,
                narrow=0,
                rounding_mode="ROUND",
            ),
            helper.make_node(
                "Conv",
                [node.input[0], names["w"]],
                [total],
                name=unique_name(f"{base}_sum_Conv", taken),
                group=channels,
                kernel_shape=kernel,
                pads=[0, 0, 0, 0],
                strides=list(attrs.get("strides", [1, 1])),
            ),
            helper.make_node(
                "Div", [total, size], [node.output[0]], name=unique_name(f"{base}_Div", taken)
            ),
        ]
        modified = True
    if modified:
        del graph.node[:]
        graph.node.extend(nodes)
    return model, modified


def _spatial_mean(node: onnx.NodeProto, attrs: dict, shape: list[int] | None) -> bool:
    """A ReduceMean over both spatial axes of an NCHW image, keeping them (TFLite's MEAN as a
    global average pool): FINN maps no ReduceMean."""
    if node.op_type != "ReduceMean" or shape is None or len(shape) != 4 or len(node.input) > 1:
        return False
    axes = sorted(a % 4 for a in attrs.get("axes", []))
    return axes == [2, 3] and attrs.get("keepdims", 1) == 1


def reshapes_merged(model: onnx.ModelProto) -> PassResult:
    """Reshape(Reshape(x, a), b) as Reshape(x, b) where the middle tensor has no other reader
    and ``b`` is a constant shape with no 0 (copy-this-dimension) entry."""
    graph = model.graph
    constants = {i.name: i for i in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    outputs = {o.name for o in graph.output}
    dropped: set[str] = set()
    for node in graph.node:
        first = producers.get(node.input[0]) if node.op_type == "Reshape" else None
        if (
            first is None
            or first.op_type != "Reshape"
            or readers.get(node.input[0]) != 1
            or node.input[0] in outputs
            or node.input[1] not in constants
            or np.any(numpy_helper.to_array(constants[node.input[1]]) == 0)
        ):
            continue
        node.input[0] = first.input[0]
        dropped.add(first.output[0])
    if dropped:
        kept = [n for n in graph.node if n.output[0] not in dropped]
        del graph.node[:]
        graph.node.extend(kept)
    return model, bool(dropped)


_ELEMENTWISE = {"Quant", "Clip", "Relu", "Mul", "Div"}


def one_pixel_heads_as_matmul(model: onnx.ModelProto) -> PassResult:
    """A 1x1 Conv on a one-pixel image whose result (through scalar elementwise steps) is
    reshaped to (1, K) — a classifier head — as Reshape -> MatMul -> Add before those steps:
    FINN's flatten removal takes a Transpose -> Reshape in front of a matrix layer, while one
    behind the Conv's lowering stays between its layers."""
    from qonnx_ingest.targets.finn_shapes import with_shapes

    graph = model.graph
    constants = {i.name: i for i in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    readers = readers_of(graph)
    dims = {
        i.name: [d.dim_value for d in i.type.tensor_type.shape.dim]
        for i in (*graph.input, *graph.value_info, *graph.output)
        if i.type.tensor_type.HasField("shape")
    }
    taken = graph_names(graph)
    stale: set[str] = set()
    for conv in list(graph.node):
        found = _one_pixel_head(conv, constants, producers, readers, dims)
        if found is None:
            continue
        weight_quant, chain, reshape = found
        x, (k, c) = conv.input[0], dims[conv.output[0]][1:2] + dims[conv.input[0]][1:2]
        base = conv.name or conv.output[0]
        shape = unique_name(f"{base}_flat_shape", taken)
        graph.initializer.append(numpy_helper.from_array(np.int64([1, c]), shape))
        flat = unique_name(f"{base}_flat", taken)
        params = []
        for i, name in enumerate(weight_quant.input[:3]):
            value = numpy_helper.to_array(constants[name])
            if i == 0:
                value = value.reshape(k, c).T
            elif value.size > 1:
                value = value.reshape(1, k)
            params.append(unique_name(f"{base}_matmul_{'wsz'[i]}", taken))
            graph.initializer.append(
                numpy_helper.from_array(np.ascontiguousarray(value), params[-1])
            )
        weights = unique_name(f"{base}_matmul_weights", taken)
        product = unique_name(f"{base}_matmul", taken)
        new = [
            helper.make_node(
                "Reshape", [x, shape], [flat], name=unique_name(f"{base}_Reshape", taken)
            ),
            helper.make_node(
                "Quant",
                [*params, weight_quant.input[3]],
                [weights],
                name=unique_name(f"{base}_weights_Quant", taken),
                domain=QONNX_DOMAIN,
                **{a.name: helper.get_attribute_value(a) for a in weight_quant.attribute},
            ),
        ]
        if len(conv.input) > 2 and conv.input[2]:
            new.append(
                helper.make_node(
                    "MatMul", [flat, weights], [product], name=unique_name(f"{base}_MatMul", taken)
                )
            )
            new.append(
                helper.make_node(
                    "Add",
                    [product, conv.input[2]],
                    [conv.output[0]],
                    name=unique_name(f"{base}_Add", taken),
                )
            )
        else:
            new.append(
                helper.make_node(
                    "MatMul",
                    [flat, weights],
                    [conv.output[0]],
                    name=unique_name(f"{base}_MatMul", taken),
                )
            )
        index = list(graph.node).index(conv)
        graph.node.remove(conv)
        for offset, node in enumerate(new):
            graph.node.insert(index + offset, node)
        if len(readers[conv.input[1]]) == 1:  # the Conv's weights, read by nothing else now
            graph.node.remove(weight_quant)
        for step in chain:  # per-channel constants on the flat (1, K) result
            for i, name in enumerate(step.input):
                value = numpy_helper.to_array(constants[name]) if name in constants else None
                if i and value is not None and value.size > 1:
                    step.input[i] = unique_name(f"{name}_flat", taken)
                    graph.initializer.append(
                        numpy_helper.from_array(value.reshape(1, -1), step.input[i])
                    )
        stale.update([conv.output[0], *(n.output[0] for n in chain)])
        chain[-1].output[0] = reshape.output[0]
        graph.node.remove(reshape)
    if not stale:
        return model, False
    kept = [v for v in graph.value_info if v.name not in stale]
    del graph.value_info[:]
    graph.value_info.extend(kept)
    return with_shapes(model), True


def _one_pixel_head(conv, constants, producers, readers, dims):
    """(weight Quant, elementwise chain, Reshape) when ``conv`` is such a head, else None."""
    if conv.op_type != "Conv":
        return None
    attrs = {a.name: helper.get_attribute_value(a) for a in conv.attribute}
    in_shape, out_shape = dims.get(conv.input[0]), dims.get(conv.output[0])
    if (
        attrs.get("group", 1) != 1
        or list(attrs.get("kernel_shape", [1, 1])) != [1, 1]
        or any(attrs.get("pads", [0]))
        or in_shape is None
        or out_shape is None
        or in_shape[0] != 1
        or in_shape[2:] != [1, 1]
        or out_shape[2:] != [1, 1]
    ):
        return None
    weight_quant = producers.get(conv.input[1])
    if (
        weight_quant is None
        or weight_quant.op_type != "Quant"
        or any(n not in constants for n in weight_quant.input)
    ):
        return None
    chain, tensor = [], conv.output[0]
    while True:
        nexts = readers.get(tensor, [])
        if len(nexts) != 1:
            return None
        (node,) = nexts
        if node.op_type == "Reshape":
            if dims.get(node.output[0]) == [1, out_shape[1]] and chain:
                return weight_quant, chain, node
            return None
        if node.op_type not in _ELEMENTWISE or node.input[0] != tensor:
            return None
        if any(
            n not in constants
            or numpy_helper.to_array(constants[n]).size != 1
            and list(numpy_helper.to_array(constants[n]).shape) != [1, out_shape[1], 1, 1]
            for n in node.input[1:]
            if n
        ):  # scalars, or per channel (TFLite's per-channel right shifts)
            return None
        chain.append(node)
        tensor = node.output[0]
