"""The FINN form's 1D convolutions: written as 2D ones over a height of 1, the form FINN maps.

FINN lowers convolutions and pools over NCHW images only; on a 1D Conv (N, C, W) its
streamlining fails (``IndexError`` in the lowering). A 1D Conv is the 2D Conv of kernel
(1, K) over (N, C, 1, W) (strides, dilations and pads on the second axis): the same products
summed in the same order, so the same floats. Every rank-3 tensor of the region around the
1D Convs (pools, quantizers, thresholds, scalar and per-channel arithmetic) gets the height
axis; their constants of rank 2 and more get it too, before their last axis, so they
broadcast as before. Where the region meets anything else a Reshape restores rank 3, but for
a Reshape reading the region (a Flatten), which gives the same result from either. The
channels-last model input's Transpose (QKeras's NWC to ONNX's NCW) becomes a Reshape to
NHWC (N, 1, W, C) and the NHWC-to-NCHW Transpose, which FINN's conv lowering cancels.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.graph_edit import readers_of, replace_nodes
from qonnx_ingest.names import graph_names, unique_name
from qonnx_ingest.passes import PassResult

# element-wise ops that read rank-3 tensors the same way at rank 4; their constants of rank 2
# and more are broadcast against the tensor and get the height axis too (but NOT_BROADCAST)
ELEMENTWISE = {"Mul", "Add", "Sub", "Div", "Relu", "Clip", "Round", "Quant", "BipolarQuant"}
POOLS = {"MaxPool", "AveragePool"}
GLOBAL_POOLS = {"GlobalMaxPool", "GlobalAveragePool"}
# inputs that are not broadcast against the tensor: thresholds (channels, levels), a bit width
NOT_BROADCAST = {("MultiThreshold", 1), ("Quant", 3), ("Conv", 2)}


def conv1d_as_conv2d(model: onnx.ModelProto) -> PassResult:
    """The region of rank-3 tensors around each 1D Conv written with a height axis of 1."""
    graph = model.graph
    shapes = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in (*graph.input, *graph.value_info, *graph.output)
        if v.type.tensor_type.HasField("shape")
    }
    ranks = {name: len(shape) for name, shape in shapes.items()}
    constants = {i.name: i for i in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    readers = readers_of(graph)
    region = _region(graph, ranks, constants, producers, readers)
    if not region:
        return model, False
    taken = graph_names(graph)
    lifted = {
        t
        for node in graph.node
        if id(node) in region and node.op_type != "Transpose"
        for t in (*node.input, *node.output)
        if t and t not in constants and ranks.get(t) == 3
    }
    name4 = {t: unique_name(f"{t}_h1", taken) for t in sorted(lifted)}
    inside = {t for t in lifted if t in producers and id(producers[t]) in region}
    nodes: list[onnx.NodeProto] = []
    entered: set[str] = set()

    def read(t: str) -> str:
        """``t``'s rank-4 name, made from its rank-3 self once if it comes from outside."""
        if t not in inside and t not in entered:
            nodes.append(_reshape(t, name4[t], _lift_shape(shapes[t]), graph, taken))
            entered.add(t)
        return name4[t]

    lifted_constants: dict[str, str] = {}
    for node in graph.node:
        if id(node) not in region:
            nodes.append(node)
        elif node.op_type == "Transpose":
            nodes.extend(_transpose(node, lifted, name4, read, shapes, readers, graph, taken))
        else:
            width = shapes.get(node.input[0], [0])[-1]
            for k, t in enumerate(node.input):
                if t in lifted:
                    node.input[k] = read(t)
                elif t in constants and (node.op_type, k) not in NOT_BROADCAST:
                    node.input[k] = _lifted_constant(t, constants, graph, taken, lifted_constants)
            _lift_attributes(node)
            if node.op_type == "GlobalMaxPool":  # FINN maps MaxPool: a (1, W) window here
                node.op_type = "MaxPool"
                node.attribute.extend(
                    [helper.make_attribute(k, [1, width]) for k in ("kernel_shape", "strides")]
                    + [helper.make_attribute("pads", [0, 0, 0, 0])]
                )
            node.output[:] = [name4.get(t, t) for t in node.output]
            nodes.append(node)
    # rank 3 again wherever a lifted tensor is read outside the region (but by a flatten)
    outputs = {o.name for o in graph.output}
    for t in sorted(inside):
        outside = [r for r in readers.get(t, []) if id(r) not in region]
        for r in outside:
            _squeeze_as_reshape(r, t, shapes, graph, taken)
        if t in outputs or not all(_flattens(r, t) for r in outside):
            nodes.append(_reshape(name4[t], t, shapes[t], graph, taken))
        else:
            for r in outside:
                r.input[0] = name4[t]
    replace_nodes(graph, _in_order(nodes, graph))
    stale = lifted
    infos = [v for v in graph.value_info if v.name not in stale]
    del graph.value_info[:]
    graph.value_info.extend(infos)
    return model, True


def _squeeze_as_reshape(node: onnx.NodeProto, t: str, shapes, graph, taken) -> None:
    """A Squeeze of ``t`` of known output shape as the Reshape to it (it reads the rank-4
    form then)."""
    if node.op_type != "Squeeze" or node.input[0] != t or 0 in shapes.get(node.output[0], [0]):
        return
    shape = unique_name(f"{node.output[0]}_shape", taken)
    graph.initializer.append(
        numpy_helper.from_array(np.asarray(shapes[node.output[0]], np.int64), shape)
    )
    node.op_type = "Reshape"
    node.input[:] = [t, shape]
    del node.attribute[:]


def _flattens(node: onnx.NodeProto, t: str) -> bool:
    """Whether ``node`` reshapes ``t`` (the same result from its rank-4 form)."""
    return node.op_type == "Reshape" and node.input[0] == t and t not in node.input[1:]


def _region(graph, ranks, constants, producers, readers) -> set[int]:
    """ids of the nodes to lift: the 1D Convs and, from them, every rank-3 neighbour that
    takes a height axis the same way."""
    seeds = [n for n in graph.node if n.op_type == "Conv" and _liftable(n, ranks, constants)]
    region: set[int] = set()
    queue = list(seeds)
    while queue:
        node = queue.pop()
        if id(node) in region:
            continue
        region.add(id(node))
        for t in (*node.input, *node.output):
            if t in constants or ranks.get(t) != 3:
                continue
            for other in (producers.get(t), *readers.get(t, [])):
                if (
                    other is not None
                    and id(other) not in region
                    and _liftable(other, ranks, constants)
                ):
                    queue.append(other)
    return region


def _liftable(node: onnx.NodeProto, ranks: dict, constants: dict) -> bool:
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    dynamic = [t for t in node.input if t and t not in constants]
    if node.op_type == "Conv":
        return (
            ranks.get(node.input[0]) == 3
            and node.input[0] not in constants
            and len(attrs.get("kernel_shape", [0])) == 1
            and attrs.get("auto_pad", b"NOTSET") in (b"NOTSET", b"VALID")
        )
    if node.op_type in POOLS:
        return (
            ranks.get(node.input[0]) == 3
            and len(attrs.get("kernel_shape", [])) == 1
            and attrs.get("auto_pad", b"NOTSET") in (b"NOTSET", b"VALID")
            and len(node.output) == 1
        )
    if node.op_type == "Transpose":
        return ranks.get(node.input[0]) == 3 and list(attrs.get("perm", [])) == [0, 2, 1]
    if (
        node.op_type in GLOBAL_POOLS
        or node.op_type in ELEMENTWISE
        or node.op_type == ("MultiThreshold")
    ):
        # a weight Quant (no dynamic input) is lifted with its 1D Conv's weight
        return all(ranks.get(t) == 3 for t in (*dynamic, *node.output))
    return False


def _lift_shape(shape: list[int]) -> list[int]:
    return [shape[0], shape[1], 1, shape[2]]


def _lift_attributes(node: onnx.NodeProto) -> None:
    for a in node.attribute:
        if node.op_type in ("Conv", *POOLS) and a.name in ("kernel_shape", "strides", "dilations"):
            a.ints[:] = [1, *a.ints]
        elif node.op_type in ("Conv", *POOLS) and a.name == "pads":
            a.ints[:] = [0, a.ints[0], 0, a.ints[1]]
        elif node.op_type == "MultiThreshold" and a.name == "data_layout" and a.s == b"NCW":
            a.s = b"NCHW"


def _lifted_constant(name, constants, graph, taken, done: dict[str, str]) -> str:
    """A broadcast constant of rank 2 or more with the height axis before its last one."""
    if name in done:
        return done[name]
    value = numpy_helper.to_array(constants[name])
    if value.ndim < 2:
        done[name] = name
        return name
    done[name] = unique_name(f"{name}_h1", taken)
    shape = [*value.shape[:-1], 1, value.shape[-1]]
    graph.initializer.append(numpy_helper.from_array(value.reshape(shape), done[name]))
    return done[name]


def _transpose(node, lifted, name4, read, shapes, readers, graph, taken) -> list:
    """NWC <-> NCW (perm 0 2 1) at rank 4: into the region from an NWC tensor as a Reshape to
    NHWC and FINN's NHWC-to-NCHW Transpose; out of it as NCHW-to-NHWC and a Reshape (none in
    front of a flatten); inside it between the two forms with the height axis kept."""
    x, y = node.input[0], node.output[0]
    perm = helper.make_attribute("perm", [0, 3, 2, 1])
    out: list[onnx.NodeProto] = []
    if x in lifted and y in lifted:
        node.input[0], node.output[0] = read(x), name4[y]
    elif y in lifted:  # (N, W, C) -> (N, 1, W, C) -> (N, C, 1, W)
        n, w, c = shapes[x]
        nhwc = unique_name(f"{x}_nhwc", taken)
        out.append(_reshape(x, nhwc, [n, 1, w, c], graph, taken))
        node.input[0], node.output[0] = nhwc, name4[y]
        perm = helper.make_attribute("perm", [0, 3, 1, 2])
    elif x in lifted:  # (N, C, 1, W) -> (N, 1, W, C) -> (N, W, C)
        nhwc = unique_name(f"{y}_nhwc", taken)
        node.input[0], node.output[0] = read(x), nhwc
        perm = helper.make_attribute("perm", [0, 2, 3, 1])
        if all(_flattens(r, y) for r in readers.get(y, [])) and y not in {
            o.name for o in graph.output
        }:
            for r in readers.get(y, []):
                r.input[0] = nhwc
        else:
            tail = [_reshape(nhwc, y, shapes[y], graph, taken)]
            del node.attribute[:]
            node.attribute.append(perm)
            return [node, *tail]
    else:
        return [node]
    del node.attribute[:]
    node.attribute.append(perm)
    return [*out, node]


def _reshape(x: str, y: str, shape: list[int], graph, taken) -> onnx.NodeProto:
    s = unique_name(f"{y}_shape", taken)
    graph.initializer.append(numpy_helper.from_array(np.asarray(shape, np.int64), s))
    return helper.make_node("Reshape", [x, s], [y], name=unique_name(f"{y}_Reshape", taken))


def _in_order(nodes: list[onnx.NodeProto], graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """The nodes in an order where each tensor is produced before it is read (the Reshapes
    out of the region were appended at the end)."""
    known = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {""}
    done: list[onnx.NodeProto] = []
    pending = list(nodes)
    while pending:
        ready = [n for n in pending if all(t in known for t in n.input)]
        if not ready:
            raise ValueError("the 1D-to-2D rewrite left a node without its input")  # a bug
        placed = {id(n) for n in ready}
        done.extend(ready)
        known.update(o for n in ready for o in n.output)
        pending = [n for n in pending if id(n) not in placed]
    return done
