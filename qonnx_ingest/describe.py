"""A short human-readable summary of a QONNX model: interface, op counts, quantizers."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.finish import QUANT_OP_TYPES


def describe(model: onnx.ModelProto) -> str:
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    lines = []
    for kind, values in (("input", graph.input), ("output", graph.output)):
        for v in values:
            if v.name in inits:
                continue
            dims = [d.dim_param or str(d.dim_value) for d in v.type.tensor_type.shape.dim]
            lines.append(f"  {kind:6} {v.name} [{', '.join(dims)}]")
    ops = Counter(n.op_type for n in graph.node)
    lines.append("  ops    " + ", ".join(f"{op} x{k}" for op, k in sorted(ops.items())))
    for node in graph.node:
        if node.op_type in QUANT_OP_TYPES:
            lines.append(f"  {node.op_type:12} {_quant_summary(node, inits)}  <- {node.input[0]}")
    return "\n".join(lines)


def _quant_summary(node: onnx.NodeProto, inits: dict[str, onnx.TensorProto]) -> str:
    def value(i: int) -> np.ndarray | None:
        if i >= len(node.input) or node.input[i] not in inits:
            return None
        return numpy_helper.to_array(inits[node.input[i]])

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    scale = value(1)
    scale_text = (
        "?"
        if scale is None
        else (
            f"scale {scale.item():.6g}" if scale.size == 1 else f"scale per-channel x{scale.size}"
        )
    )
    if node.op_type == "BipolarQuant":
        return f"bipolar, {scale_text}"
    if node.op_type == "Trunc":
        return f"{value(3)} -> {value(4)} bits, {scale_text}"
    if node.op_type == "FloatQuant":  # x, scale, exponent / mantissa widths, bias, max_val
        e, m, bias, top = (value(i) for i in (2, 3, 4, 5))
        if any(v is None or v.size != 1 for v in (e, m, bias, top)):
            return f"minifloat (computed or per-element parameters), {scale_text}"
        widths = f"E{e.item():g}M{m.item():g} bias {bias.item():g}"
        return f"minifloat {widths}, max {top.item():g}, {scale_text}"
    bits = value(3)
    zp = value(2)
    sign = "int" if attrs.get("signed", 1) else "uint"
    narrow = " narrow" if attrs.get("narrow", 0) else ""
    zp_text = "" if zp is None or not np.any(zp) else f", zero point {zp.ravel()[0]:g}"
    bits_text = "?" if bits is None else f"{bits.item():g}"
    return f"{sign}{bits_text}{narrow}, {scale_text}{zp_text}"
