"""qonnx's ``QuantToQCDQ`` rewrite, in one linear pass and without its imports.

qonnx's pass matches its rule with onnxscript's rewriter, whose import (onnxscript, onnx_ir,
sympy) alone costs more than converting a MobileNet. The rule is simple: a Quant whose scale,
zero point and bit width are initializers, with a zero zero point, a scalar bit width in
[2, 8], a scalar or 1-D (after squeezing) scale and ROUND rounding becomes

    QuantizeLinear(x, s, 0) [-> Clip(lo, hi)] -> DequantizeLinear(., s, 0)

in 8-bit (u)int storage, the Clip present when the bit width is below 8 or the grid is signed
and narrow, ``axis`` the first dimension of the scale's shape with the per-channel size. This
module writes exactly that; a Quant outside the rule is left for qonnx's own pass.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from qonnx_ingest.graph_edit import replace_nodes
from qonnx_ingest.names import TakenNames, unique_name
from qonnx_ingest.passes import PassResult

# the domains qonnx's rule matches (its brevitas and qonnx patterns)
_DOMAINS = ("qonnx.custom_op.general", "onnx.brevitas")


def lower_quants(model: onnx.ModelProto) -> PassResult:
    """Replace every Quant of ``model`` that qonnx's rule lowers by its QCDQ nodes (in place);
    ``left_quants`` counts the others. Unused parameters stay: the caller drops them."""
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    taken = TakenNames(
        {n.name for n in graph.node} | {o for n in graph.node for o in n.output} | set(inits)
    )
    nodes, modified = [], False
    for node in graph.node:
        replacement = _qcdq(node, inits, taken) if _is_quant(node) else None
        nodes.extend([node] if replacement is None else replacement)
        modified |= replacement is not None
    if modified:
        replace_nodes(graph, nodes)
    return model, modified


def left_quants(model: onnx.ModelProto) -> int:
    """How many Quant nodes ``lower_quants`` left (qonnx's pass gets those)."""
    return sum(_is_quant(n) for n in model.graph.node)


def _is_quant(node: onnx.NodeProto) -> bool:
    return node.op_type == "Quant" and node.domain in _DOMAINS


def _attributes(node: onnx.NodeProto) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _qcdq(node: onnx.NodeProto, inits: dict, taken: set) -> list | None:
    """The QCDQ nodes for ``node``, or None where qonnx's rule does not apply."""
    if len(node.input) != 4 or any(name not in inits for name in node.input[1:]):
        return None
    attrs = _attributes(node)
    # the rule binds these attributes by name: a Quant without them does not match
    if "signed" not in attrs or "narrow" not in attrs:
        return None
    rounding = attrs.get("rounding_mode", b"ROUND")
    if rounding not in (b"ROUND", "ROUND"):
        return None
    scale_t, zero_t, bits_t = (inits[name] for name in node.input[1:])
    scale = numpy_helper.to_array(scale_t)
    squeezed = scale.squeeze()
    zero = numpy_helper.to_array(zero_t).squeeze()
    bits = numpy_helper.to_array(bits_t)
    if squeezed.ndim not in (0, 1) or zero.ndim != 0 or zero != 0:
        return None
    if bits.shape != () or not 2 <= bits <= 8 or bits != np.round(bits):
        return None
    bits = int(bits)
    signed, narrow = bool(attrs["signed"]), bool(attrs["narrow"])
    store_type, store_np = (TensorProto.INT8, np.int8) if signed else (TensorProto.UINT8, np.uint8)
    base = node.name or node.output[0]
    if squeezed.ndim == 1:
        axis = {"axis": scale.shape.index(squeezed.shape[0])}
        zeros = np.zeros(squeezed.shape, store_np)
    else:
        axis = {}
        zeros = np.zeros((), store_np)
    scale_value = helper.make_tensor(
        "scale", scale_t.data_type, squeezed.shape, squeezed.reshape(-1).tolist()
    )
    zero_value = helper.make_tensor("zero_point", store_type, zeros.shape, zeros.reshape(-1))
    s = unique_name(f"{base}_scale", taken)
    z = unique_name(f"{base}_zero_point", taken)
    q = unique_name(f"{base}_q", taken)
    nodes = [
        helper.make_node("Constant", [], [s], name=s, value=scale_value),
        helper.make_node("Constant", [], [z], name=z, value=zero_value),
        helper.make_node(
            "QuantizeLinear", [node.input[0], s, z], [q],
            name=unique_name(f"{base}_quantize", taken), **axis,
        ),
    ]  # fmt: skip
    if (signed and narrow) or bits < 8:
        if signed:
            hi = 2 ** (bits - 1) - 1
            lo = -hi if narrow else -(2 ** (bits - 1))
        else:
            lo, hi = 0, (2**bits - 2 if narrow else 2**bits - 1)
        bounds = []
        for label, value in (("min", lo), ("max", hi)):
            name = unique_name(f"{base}_{label}", taken)
            nodes.append(
                helper.make_node(
                    "Constant", [], [name], name=name,
                    value=helper.make_tensor(f"{label}_val", store_type, (), [value]),
                )
            )  # fmt: skip
            bounds.append(name)
        clipped = unique_name(f"{base}_clipped", taken)
        nodes.append(
            helper.make_node(
                "Clip", [q, *bounds], [clipped], name=unique_name(f"{base}_clip", taken)
            )
        )
        q = clipped
    nodes.append(
        helper.make_node(
            "DequantizeLinear", [q, s, z], [node.output[0]],
            name=unique_name(f"{base}_dequantize", taken), **axis,
        )
    )  # fmt: skip
    return nodes
