"""The FINN form's BipolarQuants (QKeras's ``binary``): activations FINN cannot merge into a
matrix layer as a one-threshold MultiThreshold it maps anywhere, constants that are not
weights as their values.

FINN's frontend turns an activation BipolarQuant into a MultiThreshold with ``out_scale 2`` and
``out_bias -1``, which FINN takes only when it merges the thresholds into the matrix layer in
front (behind a matrix layer it is left as it is: FINN then uses its XNOR-popcount layers for
bipolar inputs and weights). Anywhere else (on the model input, behind a pooling or a layer
on the float model input) its thresholding layer refuses it (``MultiThreshold out_scale must
be 1``). There it is written as the threshold count ``b`` in {0, 1} (``out_scale 1``,
``out_bias 0``) and ``2 s b - s`` behind it, a Mul and an Add that FINN's streamlining moves
past the next matrix layer into the thresholds behind it. The threshold is 0: qonnx's
BipolarQuant is ``s`` where ``x >= 0`` (-0.0 included) and ``-s`` elsewhere, whatever its
positive scale, and QKeras's ``binary`` sends 0 to ``+1`` too (``sign(x) + 1 - |sign(x)|``).

A constant BipolarQuant that is not a weight (a 1-bit bias) is written as the values it
computes: FINN folds weights' BipolarQuants, but its bias extraction reshapes a Quant's
parameters and cannot read a BipolarQuant's.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.graph_edit import ensure_opset, readers_of, replace_nodes
from qonnx_ingest.names import graph_names, unique_name
from qonnx_ingest.passes import PassResult

QONNX_DOMAIN = "qonnx.custom_op.general"
# (op type, input index) a constant is read at as a weight, which FINN's frontend folds
WEIGHT_SLOTS = {("MatMul", 1), ("Gemm", 1), ("Conv", 1)}
MATRIX_OPS = {op for op, _ in WEIGHT_SLOTS}


def bipolar_activations_as_thresholds(model: onnx.ModelProto) -> PassResult:
    """Each BipolarQuant of a computed tensor as MultiThreshold (BINARY) -> Mul 2s -> Add -s."""
    graph = model.graph
    constants = {i.name: i for i in graph.initializer}
    taken = graph_names(graph)
    producers = {out: node for node in graph.node for out in node.output}
    readers = readers_of(graph)
    inputs = {i.name for i in graph.input}
    nodes: list[onnx.NodeProto] = []
    modified = False
    for node in graph.node:
        if (
            node.op_type != "BipolarQuant"
            or node.input[0] in constants
            or _behind_matrix_layer(node.input[0], producers, readers, constants, inputs)
        ):
            nodes.append(node)
            continue
        where = f"BipolarQuant {node.name or node.output[0]}"
        if node.input[1] not in constants:
            raise ConversionError("FINN needs a constant scale", where)
        scale = numpy_helper.to_array(constants[node.input[1]]).astype(np.float32)
        if not np.all(scale > 0):
            raise ConversionError("a scale that is not positive: FINN needs one > 0", where)
        base = node.name or node.output[0]
        names = {w: unique_name(f"{base}_{w}", taken) for w in ("thresholds", "twice", "minus")}
        values = {
            "thresholds": np.zeros((1, 1), np.float32),
            "twice": 2 * scale,  # exact: a power-of-two multiple
            "minus": -scale,
        }
        for what, value in values.items():
            graph.initializer.append(numpy_helper.from_array(np.asarray(value), names[what]))
        count, doubled = (unique_name(f"{base}_{w}", taken) for w in ("sign", "doubled"))
        nodes += [
            helper.make_node(
                "MultiThreshold",
                [node.input[0], names["thresholds"]],
                [count],
                name=unique_name(f"{base}_MultiThreshold", taken),
                domain=QONNX_DOMAIN,
                out_dtype="BINARY",
                out_bias=0.0,
            ),
            helper.make_node(
                "Mul", [count, names["twice"]], [doubled], name=unique_name(f"{base}_Mul", taken)
            ),
            helper.make_node(
                "Add",
                [doubled, names["minus"]],
                [node.output[0]],
                name=unique_name(f"{base}_Add", taken),
            ),
        ]
        modified = True
    if modified:
        replace_nodes(graph, nodes)
        ensure_opset(model, QONNX_DOMAIN)
    return model, modified


def _behind_matrix_layer(
    x: str, producers: dict, readers: dict, constants: dict, inputs: set
) -> bool:
    """Whether ``x`` is a matrix layer's result (through a BatchNorm's constant Mul / Add, each
    tensor read once) whose data input is computed: FINN merges thresholds there into the
    layer, bipolar ones included. A layer on the float model input stays on the host."""
    while x in producers and len(readers.get(x, [])) == 1:
        node = producers[x]
        if node.op_type in MATRIX_OPS:
            return node.input[0] not in inputs
        dynamic = [n for n in node.input if n not in constants]
        if node.op_type not in ("Mul", "Add") or len(dynamic) != 1:
            return False
        x = dynamic[0]
    return False


def bipolar_constants_folded(model: onnx.ModelProto) -> PassResult:
    """Each constant BipolarQuant read anywhere but a weight slot, as its values."""
    from qonnx.custom_op.general.bipolar_quant import binary_quant

    graph = model.graph
    constants = {i.name: i for i in graph.initializer}
    readers = readers_of(graph)
    kept: list[onnx.NodeProto] = []
    modified = False
    for node in graph.node:
        y = node.output[0] if node.output else ""
        if (
            node.op_type != "BipolarQuant"
            or not all(name in constants for name in node.input)
            or any(
                y == r.input[k] and (r.op_type, k) in WEIGHT_SLOTS
                for r in readers.get(y, [])
                for k in range(len(r.input))
            )
            or y in {o.name for o in graph.output}
        ):
            kept.append(node)
            continue
        x, scale = (numpy_helper.to_array(constants[n]) for n in node.input)
        values = np.asarray(binary_quant(x.astype(np.float32), scale.astype(np.float32)))
        graph.initializer.append(numpy_helper.from_array(values.astype(np.float32), y))
        modified = True
    if modified:
        replace_nodes(graph, kept)
    return model, modified
