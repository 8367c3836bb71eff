"""The FINN form's unannotated integer-grid weights: a Quant that holds them exactly, so FINN
knows they are integers and maps the layer.

QKeras's power-of-two quantizers (``quantized_po2``) have no single Quant form, so the default
QONNX writes their weights as the quantized float constants without a Quant. FINN maps a
MatMul or Conv only when its weights have an integer type, which it reads off a weight Quant;
such a layer then stays a float MatMul between FINN's layers and the dataflow partition fails.
Yet ``quantized_po2`` weights are integers times one power of two (``+-2^-8 .. +-2^-3`` are
``k * 2^-8`` with ``|k| <= 32``): a signed Quant with that scale and enough bits returns each
of them unchanged, and FINN folds it into integer weights and a Mul by the scale.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.graph_edit import ensure_opset, replace_nodes
from qonnx_ingest.names import graph_names, unique_name
from qonnx_ingest.passes import PassResult

QONNX_DOMAIN = "qonnx.custom_op.general"
WEIGHT_SLOTS = {"MatMul": 1, "Gemm": 1, "Conv": 1}
# wider grids are float weights in all but name (a float32 layer needs 24 bits and more);
# FINN would build a matrix unit of that width for them
MAX_WEIGHT_BITS = 16


def grid_weights_as_quants(model: onnx.ModelProto) -> PassResult:
    """Each constant weight read straight from an initializer whose values are integers times
    one power of two, on at most MAX_WEIGHT_BITS signed bits, read through a Quant holding it."""
    graph = model.graph
    constants = {i.name: i for i in graph.initializer}
    taken = graph_names(graph)
    nodes: list[onnx.NodeProto] = []
    modified = False
    for node in graph.node:
        slot = WEIGHT_SLOTS.get(node.op_type)
        name = node.input[slot] if slot is not None and len(node.input) > slot else ""
        grid = (
            power_of_two_grid(numpy_helper.to_array(constants[name])) if name in constants else None
        )
        if grid is None:
            nodes.append(node)
            continue
        scale, bits = grid
        base = node.name or node.output[0]
        params = {w: unique_name(f"{base}_weight_{w}", taken) for w in ("scale", "zero", "bits")}
        for what, value in (
            ("scale", np.full(1, scale, np.float32)),
            ("zero", np.zeros(1, np.float32)),
            ("bits", np.float32(bits)),
        ):
            graph.initializer.append(numpy_helper.from_array(np.asarray(value), params[what]))
        quantized = unique_name(f"{base}_weight_quantized", taken)
        nodes.append(
            helper.make_node(
                "Quant",
                [name, params["scale"], params["zero"], params["bits"]],
                [quantized],
                name=unique_name(f"{base}_weight_Quant", taken),
                domain=QONNX_DOMAIN,
                signed=1,
                narrow=0,
                rounding_mode="ROUND",
            )
        )
        node.input[slot] = quantized
        nodes.append(node)
        modified = True
    if modified:
        replace_nodes(graph, nodes)
        ensure_opset(model, QONNX_DOMAIN)
    return model, modified


def power_of_two_grid(weights: np.ndarray) -> tuple[float, int] | None:
    """(2^e, bits): the coarsest power-of-two grid holding every value of ``weights`` as a
    signed integer, and the signed width that integer range needs (at least 2); None when the
    weights are not float32, all zero, not finite, or need more than MAX_WEIGHT_BITS bits."""
    if weights.dtype != np.float32 or not weights.size or not np.all(np.isfinite(weights)):
        return None
    nonzero = weights[weights != 0].astype(np.float64)
    if not nonzero.size:
        return None
    # each float32 is m * 2^(x - 24) with an integer m < 2^24: the grid 2^(min x - 24) holds
    # all; its coarsest is found from there upwards
    _, exponents = np.frexp(nonzero)
    e = int(exponents.min()) - 24
    while np.all(np.ldexp(nonzero, -(e + 1)) == np.round(np.ldexp(nonzero, -(e + 1)))):
        e += 1
    if e < np.finfo(np.float32).minexp:  # a subnormal scale: no weights of FINN's
        return None
    levels = np.ldexp(nonzero, -e)
    low, high = min(float(levels.min()), 0.0), max(float(levels.max()), 0.0)
    bits = max(2, int(max(-low - 1, high)).bit_length() + 1)
    if bits > MAX_WEIGHT_BITS:
        return None
    return float(np.ldexp(1.0, e)), bits
