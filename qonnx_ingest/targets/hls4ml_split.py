"""TFLite's half-away-from-zero rounding written exactly in hls4ml's roundings, ties and all.

Where no rule of ``hls4ml_rounding`` proves a signed ``HALF_UP`` activation Quant tie-free,
its function is split by sign. Half away from zero is ``FLOOR(|v| + 1/2)`` with the sign of
``v``, so for ``v = x / s``::

    HALF_UP(v) = FLOOR(relu(v) + 1/2) - FLOOR(relu(-v) + 1/2)

(for ``v >= 0`` the second term is ``FLOOR(1/2) = 0``; for ``v < 0`` the first is). With zero
point 0 the Quant's saturation to ``[low, high]`` splits too: the first term is clipped to
``[0, high]`` by a FLOOR Quant of the same width, the second to ``[0, high]`` as well, which
is ``-low`` when the Quant is narrow and otherwise differs from the source only where
``v <= -high - 1/2``. So the split is written where the Quant is narrow or a bound proves
``v > -high - 1/2`` on the reachable inputs (the accumulator's lattice bound, or an integer
Quant's range over ``2^r``). It costs a Relu, a Mul by -1, two Adds and a Sub, all ops hls4ml
1.3.0 reads, and no tie analysis at all: the identity holds for every real ``v``.

Before that, a HALF_UP Quant whose rounded value ``x / s + z`` (qonnx rounds after adding the
zero point) is never negative, its input ``>= 0`` (a Relu's output, a Quant's from its
zero point up, through pooling, reshaping, positive scalings and sums) and ``z >= 0``, is
written ``FLOOR(x / s + 1/2 + z)`` (an Add of half a step, FLOOR): half away from zero and
``FLOOR(. + 1/2)`` agree on every value ``>= 0``, ties included.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.graph_edit import replace_nodes
from qonnx_ingest.names import graph_names, unique_name
from qonnx_ingest.targets.hls4ml_graph import GRID_OPS as _SIGN_KEEPING
from qonnx_ingest.targets.hls4ml_graph import (
    QUANTS,
    RoundingGraph,
    node_label,
    power_of_two,
    rounding_of,
    set_rounding,
)
from qonnx_ingest.targets.hls4ml_rounding import accumulator_lattices


def split_half_up(
    model: onnx.ModelProto, constant: Callable[[onnx.NodeProto, list], object]
) -> dict[str, str]:
    """Rewrites, in place, each signed zero-point-0 activation HALF_UP Quant whose negative
    saturation is proven unreachable (or matches) into the sign split; {Quant: why}."""
    g = RoundingGraph(model, constant)
    report, replaced = {}, {}
    for node in g.graph.node:
        if node.op_type not in QUANTS or rounding_of(node) != "HALF_UP":
            continue
        if not g.is_activation_quant(node):
            continue
        levels, scale = g.levels(node), g.scalar(node.input[1])
        if levels is None or scale is None or scale <= 0:
            continue
        # qonnx rounds x / s + z: FLOOR(w + 1/2) is half away from zero where w >= 0
        why = _nonnegative(g, node.input[0]) if levels[0] >= 0 else None
        if why:
            replaced[id(node)] = _floor_plus_half(g, node)
            report[node_label(node)] = (
                f"nonnegative: x / s + z >= 0, where FLOOR(. + 1/2) is half away from zero ({why})"
            )
            continue
        if levels[0] != 0 or levels[1] >= 0:
            continue
        _, low, high = levels
        narrow = -low == high
        lowest = None if narrow else _lowest(g, node)
        if not narrow and (lowest is None or lowest <= -high - Fraction(1, 2)):
            continue
        replaced[id(node)] = _split_nodes(g, node)
        why = "narrow" if narrow else f"x / s >= {float(lowest):.6g}"
        report[node_label(node)] = (
            f"sign split: FLOOR(relu(v) + 1/2) - FLOOR(relu(-v) + 1/2) ({why})"
        )
    if replaced:
        nodes = []
        for node in g.graph.node:
            nodes.extend(replaced.get(id(node), [node]))
        replace_nodes(g.graph, nodes)
    return report


def _nonnegative(g: RoundingGraph, name: str) -> str | None:
    """Why every value of ``name`` is >= 0, read through ops that keep the sign: a Relu, or a
    Quant of positive scale whose zero point is its lowest level (uint8 from 0, int8 from
    -128), behind pooling, reshaping, positive scalings and sums with nonnegative weights."""
    node = g.producer.get(name)
    while node is not None:
        if node.op_type == "Relu":
            return f"after Relu {node_label(node)}"
        if node.op_type in QUANTS:
            levels, scale = g.levels(node), g.scalar(node.input[1])
            if levels is None or scale is None or scale <= 0 or levels[0] > levels[1]:
                return None
            return f"after {node_label(node)}, whose zero point is its lowest level"
        if node.op_type in ("Div", "Mul", "MatMul"):
            weights = g.value(node.input[1])
            positive = node.op_type != "MatMul" and weights is not None and np.all(weights > 0)
            if not (positive or node.op_type == "MatMul" and weights is not None
                    and np.all(weights >= 0)):  # fmt: skip
                return None
        elif node.op_type not in (*_SIGN_KEEPING, "AveragePool", "GlobalAveragePool"):
            return None
        node = g.producer.get(node.input[0])
    return None


def _floor_plus_half(g: RoundingGraph, node: onnx.NodeProto) -> list[onnx.NodeProto]:
    taken = graph_names(g.graph)
    half = unique_name(f"{node_label(node)}_half_step", taken)
    shifted = unique_name(f"{node_label(node)}_plus_half", taken)
    step = float(g.scalar(node.input[1]))
    g.graph.initializer.append(numpy_helper.from_array(np.float32(step / 2), half))
    add = helper.make_node("Add", [node.input[0], half], [shifted], name=shifted)
    node.input[0] = shifted
    set_rounding(node, "FLOOR")
    return [add, node]


def _split_nodes(g: RoundingGraph, node: onnx.NodeProto) -> list[onnx.NodeProto]:
    base, taken = node_label(node), graph_names(g.graph)
    name = {
        k: unique_name(f"{base}_{k}", taken)
        for k in ("half", "minus_one", "pos", "pos_half", "pos_q", "neg", "neg_relu", "neg_half")
    }
    neg_q = unique_name(f"{base}_neg_q", taken)
    step = float(g.scalar(node.input[1]))
    g.graph.initializer.append(numpy_helper.from_array(np.float32(step / 2), name["half"]))
    g.graph.initializer.append(numpy_helper.from_array(np.float32(-1.0), name["minus_one"]))
    x, out = node.input[0], node.output[0]

    def quant(source: str, target: str) -> onnx.NodeProto:
        q = onnx.NodeProto()
        q.CopyFrom(node)
        q.name, q.input[0], q.output[0] = target, source, target
        set_rounding(q, "FLOOR")
        return q

    return [
        helper.make_node("Relu", [x], [name["pos"]], name=name["pos"]),
        helper.make_node(
            "Add", [name["pos"], name["half"]], [name["pos_half"]], name=name["pos_half"]
        ),
        quant(name["pos_half"], name["pos_q"]),
        helper.make_node("Mul", [x, name["minus_one"]], [name["neg"]], name=name["neg"]),
        helper.make_node("Relu", [name["neg"]], [name["neg_relu"]], name=name["neg_relu"]),
        helper.make_node(
            "Add", [name["neg_relu"], name["half"]], [name["neg_half"]], name=name["neg_half"]
        ),
        quant(name["neg_half"], neg_q),
        helper.make_node("Sub", [name["pos_q"], neg_q], [out], name=base),
    ]


def _lowest(g: RoundingGraph, node: onnx.NodeProto) -> Fraction | None:
    """A lower bound of ``x / s`` on the reachable inputs, or None."""
    found = accumulator_lattices(g, node)
    if found is not None:
        _, relu, k_low, k_high, lattices = found
        if relu:
            return None  # the lattice is of the value before the Relu
        return min(
            sum(min(k_low * c, k_high * c) for c in coefficients) + offset
            for coefficients, offset in lattices
        )
    # an integer Quant's output over 2^r (TFLite's RoundingDivideByPOT), per channel
    s = g.scalar(node.input[1])
    div = g.producer.get(node.input[0])
    if div is None or div.op_type != "Div":
        return None
    divisors = g.value(div.input[1])
    source = g.producer.get(div.input[0])
    if divisors is None or source is None or not g.integer_valued(div.input[0]):
        return None
    if any(power_of_two(float(d)) is None for d in np.ravel(divisors)):
        return None
    z, low, _ = g.levels(source)
    smallest = min(Fraction(float(d)) for d in np.ravel(divisors))
    return (Fraction(low) - Fraction(z)) / smallest / Fraction(float(s))
