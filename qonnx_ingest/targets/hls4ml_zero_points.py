"""Activation zero points in the form hls4ml 1.3.0 keeps.

hls4ml turns a Quant whose scale is a power of two into one fixed-point type
(``QuantToActivation``) and drops a non-zero zero point there: measured on a Relu -> Quant
graph, ``Quant(x, 0.5, -128)`` (int8) saturated at 63.5 where qonnx gives up to 127.5, and
``Quant(x, 0.5, 20)`` (uint8) went past 117.5. With any other scale its ApplyAlpha layers
carry the zero point (TFLite's hello_world, zero points -128, equals the interpreter).

A signed Quant whose zero point is its lowest level (int8 with -128: TFLite's RELU-range
activations, and the scale-1 Quants the own-scale rule writes) holds the same levels as the
unsigned Quant with zero point 0: ``round(v + z) - z == round(v)`` for ROUND with an even ``z``
(half to even keeps its parity) and for FLOOR, and the clip to ``[-2^(b-1), 2^(b-1) - 1]``
after adding ``z = -2^(b-1)`` is the clip to ``[0, 2^b - 1]`` without it. Likewise an unsigned
Quant with ``z = 2^(b-1)`` (uint8 with 128) is the signed one with zero point 0. Such a Quant is
written so; any other non-zero zero point on a power-of-two scale is refused, naming it.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.names import graph_names, unique_name
from qonnx_ingest.passes import PassResult
from qonnx_ingest.targets.hls4ml_graph import QUANTS, node_label, rounding_of


def zero_points_hls4ml_keeps(model: onnx.ModelProto, *, record: dict | None = None) -> PassResult:
    """Each activation Quant with a zero point on a power-of-two scale written with zero point 0
    and the other signedness (exact, above), or refused."""
    graph = model.graph
    constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    taken = graph_names(graph)
    rewritten = []
    for node in graph.node:
        if node.op_type not in QUANTS or node.input[0] in constants:
            continue
        if any(name not in constants for name in node.input[1:4]):
            continue  # computed parameters: not hls4ml's fixed types either way
        scale, zero, bits = (constants[name] for name in node.input[1:4])
        if not np.any(zero) or not _powers_of_two(scale):
            continue
        signed = shifted_signedness(node, zero, bits)
        # round(v + z) - z == round(v): FLOOR always, half to even for an even z (2^(b-1))
        if signed is None or rounding_of(node) not in ("ROUND", "FLOOR"):
            raise ConversionError(
                f"zero point {_show(zero)} on the power-of-two scale {_show(scale)}: hls4ml "
                "1.3.0 reads this Quant as one fixed-point type and drops the zero point there",
                f"{node.op_type} {node_label(node)}",
            )
        name = unique_name(f"{node_label(node)}_hls4ml_zero", taken)
        graph.initializer.append(numpy_helper.from_array(np.zeros_like(zero), name))
        node.input[2] = name
        _set_signed(node, signed)
        rewritten.append(node_label(node))
    if record is not None and rewritten:
        record["zero point 2^(b-1) as the other signedness"] = rewritten
    return model, bool(rewritten)


def _powers_of_two(scale: np.ndarray) -> bool:
    mantissa, _ = np.frexp(np.asarray(scale, np.float64))
    return bool(np.all(scale > 0) and np.all(mantissa == 0.5))


def shifted_signedness(node: onnx.NodeProto, zero: np.ndarray, bits: np.ndarray) -> int | None:
    """The ``signed`` of the zero-point-0 Quant with this Quant's levels shifted by its zero
    point: 0 for a signed Quant with ``z = -2^(b-1)``, 1 for an unsigned one with ``z = 2^(b-1)``
    (not narrow, integer width); None for any other zero point."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    signed, narrow = int(attrs.get("signed", 1)), int(attrs.get("narrow", 0))
    if narrow or bits.size != 1 or float(bits) != round(float(bits)) or int(bits) < 2:
        return None
    half = 2 ** (int(bits) - 1)
    if np.all(zero == (-half if signed else half)):
        return 1 - signed
    return None


def _set_signed(node: onnx.NodeProto, value: int) -> None:
    for attr in node.attribute:
        if attr.name == "signed":
            attr.i = value
            return
    node.attribute.append(helper.make_attribute("signed", value))


def _show(values: np.ndarray) -> str:
    flat = np.unique(np.asarray(values, np.float64))
    return f"{flat[0]:g}" if flat.size == 1 else f"{flat.size} values"
