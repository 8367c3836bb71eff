"""The FINN form's monotone chains in front of thresholds: folded into the thresholds.

QKeras's hard activations (``quantized_sigmoid``, ``hard_sigmoid``) are written as exact
standard ops in front of their quantizer: ``Round(Clip(x * a + b, lo, hi) * c)``. FINN has no
layer for Clip or Round, and these sit between its layers. Each step is non-decreasing
(a scalar Mul or Div by a positive constant, a scalar Add or Sub of a constant, Clip, Round,
Relu), so ``f(x) >= t`` is ``x >= t'`` with ``t'`` the least float32 that ``f``, evaluated
step by step in float32 as qonnx's executor does, takes to ``t`` or more: the thresholds of
the MultiThreshold behind become those ``t'``, found by bisection over all finite float32
values, and the chain goes. A threshold no float32 reaches is dropped (it never counted), one
every float32 reaches is counted in ``out_bias``. Chains of scalar Mul and Relu alone are
left to FINN's streamlining, which absorbs them itself.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.graph_edit import readers_of, replace_nodes
from qonnx_ingest.names import graph_names, unique_name
from qonnx_ingest.passes import PassResult
from qonnx_ingest.targets.finn_thresholds import HIGHEST, LOWEST, least_reaching, ordered

STEPS = {"Mul", "Div", "Add", "Sub", "Clip", "Round", "Relu"}
# steps FINN cannot absorb into thresholds itself: a chain holding one is folded here
FOLDED = {"Clip", "Round", "Div", "Sub"}


def chains_into_thresholds(model: onnx.ModelProto) -> PassResult:
    """Each MultiThreshold with one row of thresholds takes the monotone chain in front."""
    graph = model.graph
    constants = {i.name: i for i in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    readers = readers_of(graph)
    taken = graph_names(graph)
    dropped: set[int] = set()
    for node in graph.node:
        if node.op_type != "MultiThreshold" or node.input[1] not in constants:
            continue
        thresholds = numpy_helper.to_array(constants[node.input[1]])
        chain = _chain(node.input[0], producers, readers, constants)
        if thresholds.shape[0] != 1 or not any(n.op_type in FOLDED for n in chain):
            continue
        function = _function(chain, constants)
        ends = function(np.float32([LOWEST, HIGHEST])).astype(np.float64)
        row = thresholds[0].astype(np.float64)
        always, never = row <= ends[0], row > ends[1]
        kept = row[~always & ~never]
        if not kept.size:
            continue
        # thresholds every float32 passes add to out_bias; those none passes are dropped
        folded = _thresholds(function, kept)
        name = unique_name(f"{node.input[1]}_folded", taken)
        graph.initializer.append(numpy_helper.from_array(folded[None, :], name))
        node.input[0], node.input[1] = chain[0].input[0], name
        if np.any(always):
            _add_to_out_bias(node, int(np.sum(always)))
        dropped.update(id(n) for n in chain)
    if dropped:
        replace_nodes(graph, [n for n in graph.node if id(n) not in dropped])
    return model, bool(dropped)


def _chain(x: str, producers: dict, readers: dict, constants: dict) -> list[onnx.NodeProto]:
    """The monotone scalar steps in front of ``x`` (first step first), each tensor between
    read once, each step's dynamic input its first."""
    chain: list[onnx.NodeProto] = []
    while x in producers and len(readers.get(x, [])) == 1:
        node = producers[x]
        if node.op_type not in STEPS or not node.input or node.input[0] in constants:
            break
        others = [n for n in node.input[1:] if n]
        if not all(n in constants for n in others):
            break
        values = [numpy_helper.to_array(constants[n]) for n in others]
        if any(v.size != 1 or not np.isfinite(v).all() for v in values):
            break
        if node.op_type in ("Mul", "Div") and not float(values[0].flat[0]) > 0:
            break
        if node.op_type == "Clip" and len(values) != 2:
            break
        chain.insert(0, node)
        x = node.input[0]
    return chain


def _function(chain: list[onnx.NodeProto], constants: dict):
    steps = [
        (n.op_type, [np.float32(numpy_helper.to_array(constants[i]).flat[0]) for i in n.input[1:]])
        for n in chain
    ]

    def run(x: np.ndarray) -> np.ndarray:
        x = x.astype(np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            for op, c in steps:
                if op == "Mul":
                    x = x * c[0]
                elif op == "Div":
                    x = x / c[0]
                elif op == "Add":
                    x = x + c[0]
                elif op == "Sub":
                    x = x - c[0]
                elif op == "Clip":
                    x = np.clip(x, c[0], c[1])
                elif op == "Round":
                    x = np.round(x)  # ONNX Round: half to even, as numpy's
                else:
                    x = np.maximum(x, np.float32(0))
                x = x.astype(np.float32)
        return x

    return run


def _add_to_out_bias(node: onnx.NodeProto, count: int) -> None:
    for a in node.attribute:
        if a.name == "out_bias":
            a.f += count
            return
    node.attribute.append(helper.make_attribute("out_bias", float(count)))


def _thresholds(function, thresholds: np.ndarray) -> np.ndarray:
    """Per threshold t, the least float32 x with ``function(x) >= t`` (some float32 reaches
    each t, the lowest does not)."""

    def level(x: np.ndarray) -> np.ndarray:
        return function(x).astype(np.float64)

    low = np.full(thresholds.shape, ordered(np.float32([LOWEST]))[0])
    high = np.full(thresholds.shape, ordered(np.float32([HIGHEST]))[0])
    return least_reaching(level, thresholds, low, high).astype(np.float32)
