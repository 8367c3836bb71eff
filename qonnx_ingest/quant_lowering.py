"""Quant / IntQuant as standard ONNX ops that compute exactly what qonnx's executor computes
(FloatQuant too: ``float_quant``).

qonnx's executor runs a graph node by node, each in its own onnxruntime session: about 7 s per
input on a MobileNet. Rewritten op for op as qonnx's ``int_quant`` evaluates it (divide, add
the zero point, clamp, round, subtract, multiply, in the scale's float type, then float32), the
same graph runs in one onnxruntime session in milliseconds and gives the same bits. Any
rounding mode is available, unlike QuantizeLinear (half to even only, 8 or 16 bits). Used
for running and verifying, for the quantizers ``--format qcdq`` has no QuantizeLinear for,
and inside ONNX Loop bodies (tflite2qonnx's WHILE), where qonnx's executor cannot reach; the
QONNX file's top-level graph keeps its Quant nodes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from qonnx_ingest.names import TakenNames, unique_name

_LOWERED = ("Quant", "IntQuant", "FloatQuant")


class NotLowerable(Exception):
    """A quantizer without a standard-op form here (bipolar, Trunc, computed parameters)."""


def lower_quants(model: onnx.ModelProto, only: Collection[str] | None = None) -> onnx.ModelProto:
    """A copy of ``model`` with every Quant / IntQuant replaced by standard ops (with ``only``:
    those whose output is named there; other QONNX nodes are then kept, domain included).

    Raises NotLowerable for BipolarQuant, Trunc, 1-bit signed Quant (qonnx makes it bipolar)
    and quantizers whose scale, zero point or width are computed rather than constant.
    """
    lowered = onnx.ModelProto()
    lowered.CopyFrom(model)
    lower_graph_quants(lowered.graph, only=only)
    if only is None:
        standard = [
            (o.domain, o.version) for o in lowered.opset_import if o.domain in ("", "ai.onnx")
        ]
        del lowered.opset_import[:]
        lowered.opset_import.extend(helper.make_opsetid(*o) for o in standard)
    return lowered


def lower_graph_quants(
    graph: onnx.GraphProto,
    elem_types: Mapping[str, int] | None = None,
    *,
    tflite_rounding: bool = False,
    only: Collection[str] | None = None,
) -> None:
    """``lower_quants`` on one graph, in place (nested subgraphs are left as they are): an
    ONNX Loop body holding Quant nodes becomes one onnxruntime runs (tflite2qonnx's WHILE).
    ``elem_types``: the values' element types where the graph's value_info lacks them (a
    Quant's input computed in float64 is divided in float64, as qonnx does).

    ``tflite_rounding``: HALF_UP quantizers compute TFLite's quantize instead of qonnx's:
    ``round(x / s) + zp`` (ties away from zero, exactly) rather than ``round(x / s + zp)``,
    which differ on a tie between 0 and -zp (x / s = 1.5, zp = -10: -8 vs -9)."""
    constants = {t.name: t for t in graph.initializer}
    elem_types = {
        **(elem_types or {}),
        **{
            v.name: v.type.tensor_type.elem_type
            for v in (*graph.value_info, *graph.input, *graph.output)
            if v.type.tensor_type.elem_type
        },
    }
    taken = TakenNames(
        [*(n for node in graph.node for n in (*node.input, *node.output)), *constants]
    )
    nodes: list[onnx.NodeProto] = []
    replaced: set[str] = set()
    for node in graph.node:
        chosen = only is None or (node.output and node.output[0] in only)
        if chosen and node.op_type in ("BipolarQuant", "Trunc"):
            raise NotLowerable(f"{node.op_type} {node.name}")
        if node.op_type not in _LOWERED or not chosen:
            kept = onnx.NodeProto()
            kept.CopyFrom(node)
            nodes.append(kept)
            continue
        last = 6 if node.op_type == "FloatQuant" else 4
        params = [constants.get(name) for name in node.input[1:last]]
        if any(p is None for p in params):
            raise NotLowerable(f"{node.op_type} {node.name}: computed parameters")
        if node.op_type == "FloatQuant":
            nodes.extend(_float_standard_ops(node, params, graph, taken))
        else:
            x_type = elem_types.get(node.input[0], TensorProto.FLOAT)
            nodes.extend(_standard_ops(node, *params, x_type, graph, taken, tflite_rounding))
        replaced.update(node.input[1:last])
    del graph.node[:]
    graph.node.extend(nodes)
    used = {name for node in nodes for name in node.input} | _read_by_subgraphs(nodes)
    kept = [t for t in graph.initializer if t.name in used or t.name not in replaced]
    del graph.initializer[:]
    graph.initializer.extend(kept)  # replaced parameters go


def _read_by_subgraphs(nodes: list[onnx.NodeProto]) -> set[str]:
    """Every name the nodes' subgraphs read (they may read outer initializers by name)."""
    names: set[str] = set()
    for node in nodes:
        for a in node.attribute:
            for g in (a.g,) if a.type == onnx.AttributeProto.GRAPH else a.graphs:
                names.update(n for sub in g.node for n in sub.input)
                names |= _read_by_subgraphs(list(g.node))
    return names


def _standard_ops(
    node, scale, zero_point, bit_width, x_type: int, graph, taken, tflite_rounding: bool = False
) -> list[onnx.NodeProto]:
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    signed, narrow = bool(attrs.get("signed", 1)), bool(attrs.get("narrow", 0))
    mode = attrs.get("rounding_mode", b"ROUND")
    mode = (mode.decode() if isinstance(mode, bytes) else mode).upper()
    bits = int(numpy_helper.to_array(bit_width))
    if bits == 1 and signed:
        raise NotLowerable(f"{node.op_type} {node.name}: 1-bit signed (bipolar in qonnx)")
    # numpy's promotion: a float64 input or scale makes the whole computation float64
    x_dtype = helper.tensor_dtype_to_np_dtype(x_type)
    dtype = np.result_type(x_dtype, numpy_helper.to_array(scale).dtype)
    low, high = _int_range(bits, signed, narrow)

    def fresh(hint: str) -> str:
        return unique_name(f"{node.name}_{hint}", taken)

    def const(value, hint: str) -> str:
        name = fresh(hint)
        graph.initializer.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    out: list[onnx.NodeProto] = []

    def op(op_type: str, *inputs: str, **kwargs) -> str:
        name = fresh(op_type.lower())
        out.append(helper.make_node(op_type, list(inputs), [name], name=name, **kwargs))
        return name

    x, s, z = node.input[0], node.input[1], node.input[2]
    if x_dtype != dtype:
        x = op("Cast", x, to=helper.np_dtype_to_tensor_dtype(dtype))
    if numpy_helper.to_array(scale).dtype != dtype:  # float32 -> float64 is exact
        s = const(numpy_helper.to_array(scale), "scale")
        z = const(numpy_helper.to_array(zero_point), "zero_point")
    if tflite_rounding and mode == "HALF_UP":
        y = _round_half_away(op, const, op("Div", x, s))
        y = op("Clip", op("Add", y, z), const(low, "min"), const(high, "max"))
    else:
        y = op("Clip", op("Add", op("Div", x, s), z), const(low, "min"), const(high, "max"))
        y = round_op(op, const, y, mode)
    y = op("Mul", op("Sub", y, z), s)
    if dtype != np.float32:  # qonnx's Quant returns float32 whatever it computed in
        y = op("Cast", y, to=TensorProto.FLOAT)
    out.append(helper.make_node("Identity", [y], [node.output[0]], name=fresh("out")))
    return out


def _float_standard_ops(node, params, graph, taken) -> list[onnx.NodeProto]:
    """FloatQuant (``qonnx_ingest.float_quant``) in standard ops, float32."""
    from qonnx_ingest.float_quant import node_mode, standard_ops

    out: list[onnx.NodeProto] = []

    def fresh(hint: str) -> str:
        return unique_name(f"{node.name}_{hint}", taken)

    def const(value, hint: str) -> str:
        name = fresh(hint)
        array = np.asarray(value)
        array = array.astype(np.float32) if array.dtype.kind == "f" else array
        graph.initializer.append(numpy_helper.from_array(array, name))
        return name

    def op(op_type: str, *inputs: str, **kwargs) -> str:
        name = fresh(op_type.lower())
        out.append(helper.make_node(op_type, list(inputs), [name], name=name, **kwargs))
        return name

    arrays = [numpy_helper.to_array(p) for p in params]
    mode = node_mode(node)
    try:
        y = standard_ops(node.input[0], arrays, lambda v: round_op(op, const, v, mode), op, const)
    except ValueError as exc:
        raise NotLowerable(f"{node.op_type} {node.name}: {exc}") from None
    out.append(helper.make_node("Identity", [y], [node.output[0]], name=fresh("out")))
    return out


def _round_half_away(op, const, y: str) -> str:
    """std::round, exactly: ``floor(|y| + 0.5)`` rounds 0.49999997 up in float32, so ties
    are found as ``|y| - floor(|y|) == 0.5`` (exact for |y| >= 0) and the rest rounds to
    nearest."""
    magnitude = op("Abs", y)
    whole = op("Floor", magnitude)
    tie = op("Equal", op("Sub", magnitude, whole), const(0.5, "half"))
    rounded = op("Where", tie, op("Add", whole, const(1.0, "one")), op("Round", magnitude))
    return op("Mul", op("Sign", y), rounded)


def round_op(op, const, y: str, mode: str) -> str:
    """qonnx's resolve_rounding_mode, op for op (``op`` / ``const`` add a node / constant)."""
    if mode in ("ROUND", "HALF_EVEN"):
        return op("Round", y)
    if mode == "FLOOR":
        return op("Floor", y)
    if mode == "CEIL":
        return op("Ceil", y)
    sign, magnitude = op("Sign", y), op("Abs", y)
    if mode == "UP":
        return op("Mul", sign, op("Ceil", magnitude))
    if mode == "DOWN":
        return op("Mul", sign, op("Floor", magnitude))
    if mode == "HALF_UP":
        return op("Mul", sign, op("Floor", op("Add", magnitude, const(0.5, "half"))))
    if mode == "HALF_DOWN":
        return op("Mul", sign, op("Ceil", op("Sub", magnitude, const(0.5, "half"))))
    raise NotLowerable(f"rounding mode {mode}")


def _int_range(bits: int, signed: bool, narrow: bool) -> tuple[float, float]:
    """qonnx's min_int / max_int."""
    if signed:
        return float(-(2 ** (bits - 1)) + narrow), float(2 ** (bits - 1) - 1)
    return 0.0, float(2**bits - 1 - narrow)
