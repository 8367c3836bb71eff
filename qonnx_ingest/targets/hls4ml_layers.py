"""Ops hls4ml 1.3.0's QONNX frontend has no handler for, written as the same function in ops
it reads (part of the hls4ml form, ``qonnx_ingest.targets.hls4ml``).

* A Clip (TFLite's fused RELU6 / activation range) whose only consumer is an activation Quant
  that saturates at least as tightly: ``Quant(Clip(x, a, b)) == Quant(x)`` for every ``x``
  when the Quant rounds ``a / s`` to its lowest level or below and ``b / s`` to its highest
  or above (the Quant is monotone, and every ``x`` the Clip changes then lands on the same
  end level). The Clip is dropped; otherwise it stays (and hls4ml refuses it).
* A global average pool, as qonnx leaves it in a channels-last graph (NHWC ->
  Transpose -> AveragePool over the whole H x W, no padding -> Transpose -> NHWC): hls4ml reads
  AveragePool only in qonnx's channels-last domain, which has none, and its GlobalAveragePool
  reads an NCHW shape as NHWC data. Written as Reshape to (1, H*W*C), MatMul by the constant
  0/1 matrix that sums each channel, Div by H*W, Reshape to (1, 1, 1, C): the same function
  (a sum divided by the count; the AveragePool has no padding, so the count is H*W).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.graph_edit import replace_nodes
from qonnx_ingest.names import graph_names, unique_name
from qonnx_ingest.passes import PassResult
from qonnx_ingest.targets.hls4ml_graph import RoundingGraph, node_label, rounding_of


def fold_saturating_clips(model: onnx.ModelProto, constant) -> PassResult:
    """Drops each Clip whose consuming Quant already saturates where it clips."""
    g = RoundingGraph(model, constant)
    dropped = []
    for clip in list(g.graph.node):
        if clip.op_type != "Clip" or clip.output[0] in g.outputs:
            continue
        quant = g.only_consumer(clip.output[0])
        if quant is None or not g.is_activation_quant(quant) or quant.input[0] != clip.output[0]:
            continue
        scale, levels = g.scalar(quant.input[1]), g.levels(quant)
        bounds = [g.scalar(n) if n else None for n in (list(clip.input) + ["", ""])[1:3]]
        if scale is None or scale <= 0 or levels is None:
            continue
        if any(n and b is None for n, b in zip(clip.input[1:3], bounds, strict=False)):
            continue  # a bound that is not a constant scalar
        z, low, high = levels
        s = Fraction(float(np.float32(scale)))
        lowest, highest = Fraction(low) - Fraction(z), Fraction(high) - Fraction(z)
        # the Quant's rounding of a bound reaches its end level (a margin below 1/2 / 1 step)
        margin = Fraction(1) if rounding_of(quant) == "FLOOR" else Fraction(1, 2)
        a, b = bounds
        if a is not None and not Fraction(float(np.float32(a))) / s < lowest + margin:
            continue
        if b is not None:
            top = Fraction(float(np.float32(b))) / s
            if not (top >= highest if margin == 1 else top > highest - margin):
                continue
        quant.input[0] = clip.input[0]
        dropped.append(clip)
    for clip in dropped:
        g.graph.node.remove(clip)
    return model, bool(dropped)


def global_average_as_matmul(model: onnx.ModelProto) -> PassResult:
    """Transpose -> global AveragePool -> Transpose written as a sum MatMul and a Div."""
    graph = model.graph
    shapes = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in [*graph.value_info, *graph.input, *graph.output]
    }
    producer = {o: n for n in graph.node for o in n.output}
    users: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            users[name] = users.get(name, 0) + 1
    replaced: dict[int, list[onnx.NodeProto]] = {}
    removed: set[int] = set()
    taken = graph_names(graph)
    for after in graph.node:
        pool = producer.get(after.input[0]) if after.op_type == "Transpose" else None
        before = producer.get(pool.input[0]) if pool is not None else None
        if before is None or pool.op_type != "AveragePool" or before.op_type != "Transpose":
            continue
        if _perm(before) != [0, 3, 1, 2] or _perm(after) != [0, 2, 3, 1]:
            continue
        if users.get(before.output[0]) != 1 or users.get(pool.output[0]) != 1:
            continue
        shape = shapes.get(before.input[0], [])
        attrs = {a.name: helper.get_attribute_value(a) for a in pool.attribute}
        if len(shape) != 4 or 0 in shape or shape[0] != 1:
            continue
        _, h, w, c = shape
        if list(attrs.get("kernel_shape", [])) != [h, w] or any(attrs.get("pads", [0])):
            continue
        if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID"):
            continue
        base = node_label(pool)
        names = {
            k: unique_name(f"{base}_{k}", taken)
            for k in ("flat_shape", "flat", "sums", "ones", "count", "mean", "out_shape")
        }
        ones = np.tile(np.eye(c, dtype=np.float32), (h * w, 1))  # row (h*W+w)*C + c -> c
        for key, value in (
            ("flat_shape", np.array([1, h * w * c], np.int64)),
            ("ones", ones),
            ("count", np.float32(h * w)),
            ("out_shape", np.array([1, 1, 1, c], np.int64)),
        ):
            graph.initializer.append(numpy_helper.from_array(np.asarray(value), names[key]))
        n = names
        replaced[id(after)] = [
            helper.make_node(
                "Reshape", [before.input[0], n["flat_shape"]], [n["flat"]], name=n["flat"]
            ),
            helper.make_node("MatMul", [n["flat"], n["ones"]], [n["sums"]], name=n["sums"]),
            helper.make_node("Div", [n["sums"], n["count"]], [n["mean"]], name=base),
            helper.make_node(
                "Reshape", [n["mean"], n["out_shape"]], list(after.output), name=n["out_shape"]
            ),
        ]
        removed |= {id(before), id(pool)}
        gone = {before.output[0], pool.output[0]}
        for info in [v for v in graph.value_info if v.name in gone]:
            graph.value_info.remove(info)
    if not replaced:
        return model, False
    nodes = []
    for node in graph.node:
        if id(node) in removed:
            continue
        nodes.extend(replaced.get(id(node), [node]))
    replace_nodes(graph, nodes)
    return model, True


def _perm(node: onnx.NodeProto) -> list[int] | None:
    perms = [list(helper.get_attribute_value(a)) for a in node.attribute if a.name == "perm"]
    return perms[0] if perms else None
