"""TFLite's requantization (Quant ``HALF_UP``, half away from zero) in roundings hls4ml 1.3.0
reads (ROUND, half to even; FLOOR), wherever that is provably the same function.

Each activation Quant rounding HALF_UP is taken by the first rule that proves it (and left
alone otherwise, for the caller to refuse or label):

* ``input grid``: it quantizes a graph input that the source takes as integers (the
  ``tflite2qonnx.io_quantization`` record, same scale and zero point): ``x / s`` is an integer
  on the source's whole input domain, never a tie. Written ROUND.
* ``own scale``: its input is ``Mul(n, s)`` with ``n`` an integer (a scale-1 Quant's output)
  and ``s`` its own scale: ``x / s = n``, never a tie. Written ROUND, as ``Mul(Quant(n, 1),
  s)``, the same function (``s * (clip(n + z) - z)`` both ways) in the order hls4ml keeps:
  with the Mul in front, hls4ml fuses it and the Quant's ``1/s`` into a unit ApplyAlpha that
  its ``remove_nop_batch_normalization`` drops, saturation and all. Only with zero point 0
  or ``-+2^(b-1)``: hls4ml drops any other zero point on that unit scale
  (``hls4ml_zero_points``).
* ``integer over 2^r``: it rounds ``n / 2^r`` (``n`` an integer; TFLite's
  ``RoundingDivideByPOT``), where ties are reachable. ``FLOOR(x + 1/2)`` is half away from
  zero for ``x >= 0`` and differs only at negative ties, by one step up; written so (an Add of
  half a step, FLOOR) where every consumer sends all values ``<= 0`` to one level (a Relu, or
  a Quant whose zero point is its lowest level, behind an optional positive Mul), so the
  negative ties are moot.
* ``requantize``: it quantizes another Quant's output (through Reshape, MaxPool, ...):
  ``x / s`` is that Quant's integer times one ratio, checked as below. Written ROUND.
* ``accumulator``: its input is ``factor * (Conv or MatMul of a Quant's integers with constant
  weights + constant bias)``, an exact rational function of integers in known ranges; no
  output channel's lattice meets a tie (``hls4ml_ties.tie_reachable``). Written ROUND.

The proofs are about the graph's exact (real-number) arithmetic; qonnx executes it in float32
and hls4ml in its fixed-point types, whose own rounding errors are measured, not proven.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.graph_edit import replace_nodes
from qonnx_ingest.names import graph_names, unique_name
from qonnx_ingest.targets.hls4ml_graph import (
    GRID_OPS,
    QUANTS,
    RoundingGraph,
    node_label,
    power_of_two,
    rounding_of,
    set_rounding,
)
from qonnx_ingest.targets.hls4ml_ties import tie_reachable
from qonnx_ingest.targets.hls4ml_zero_points import shifted_signedness

IO_KEY = "tflite2qonnx.io_quantization"


def rewrite_half_up(
    model: onnx.ModelProto, constant: Callable[[onnx.NodeProto, list], object]
) -> dict[str, str]:
    """Rewrites, in place, each activation HALF_UP Quant of ``model`` a rule above proves;
    returns {Quant name: the rule and why}. ``constant(node, inputs)`` computes a constant
    Quant's values."""
    report: dict[str, str] = {}
    index = 0
    while index < len(model.graph.node):  # the maps are rebuilt after each reordering
        g, node = RoundingGraph(model, constant), model.graph.node[index]
        name = node_label(node)
        if node.op_type in QUANTS and rounding_of(node) == "HALF_UP" and _own_scale(g, node):
            report[name] = "own scale: an integer times the Quant's own scale, as Mul(Quant)"
        index += 1
    g = RoundingGraph(model, constant)
    io = _io_record(model)
    for node in list(g.graph.node):
        if node.op_type not in QUANTS or rounding_of(node) != "HALF_UP":
            continue
        if not g.is_activation_quant(node):
            continue
        reason = (
            _input_grid(g, node, io)
            or _clipped_own_scale(g, node)
            or _requantized(g, node)
            or _integer_over_pot(g, node)
            or _accumulator(g, node)
        )
        if reason:
            report[node_label(node)] = reason
    if g.in_front:
        nodes = []
        for node in g.graph.node:
            extra = g.in_front.get(node.output[0])
            nodes.extend([extra, node] if extra is not None else [node])
        replace_nodes(g.graph, nodes)
    return report


def _io_record(model: onnx.ModelProto) -> dict:
    import json

    props = {p.key: p.value for p in model.metadata_props}
    return json.loads(props[IO_KEY]) if IO_KEY in props else {}


def _input_grid(g: RoundingGraph, node: onnx.NodeProto, io: dict) -> str | None:
    record = io.get(node.input[0])
    if record is None or node.input[0] not in {i.name for i in g.graph.input}:
        return None
    if not str(record.get("dtype", "")).startswith(("int", "uint")):
        return None
    scale, zero_point = g.value(node.input[1]), g.value(node.input[2])
    if scale is None or zero_point is None or scale.size != 1 or zero_point.size != 1:
        return None
    if [np.float32(s) for s in record["scale"]] != [np.float32(scale.reshape(-1)[0])]:
        return None
    if list(record["zero_point"]) != [float(zero_point.reshape(-1)[0])]:
        return None
    set_rounding(node, "ROUND")
    return f"input grid: the source's {record['dtype']} inputs are integers on this scale"


def _own_scale(g: RoundingGraph, node: onnx.NodeProto) -> bool:
    """Quant(Mul(n, s), s, z) -> Mul(Quant(n, 1, z), s), ROUND (the module docstring)."""
    mul = g.producer.get(node.input[0])
    if mul is None or mul.op_type != "Mul" or g.only_consumer(mul.output[0]) is not node:
        return False
    scale, zero, bits = (g.value(name) for name in node.input[1:4])
    if scale is None or scale.size != 1 or g.levels(node) is None:
        return False
    scale = float(scale.reshape(-1)[0])
    if np.any(zero) and shifted_signedness(node, zero, bits) is None:
        return False  # hls4ml drops a zero point on the unit scale this writes (hls4ml_zero_points)
    for data, factor in ((0, 1), (1, 0)):
        c = g.scalar(mul.input[factor])
        same = c is not None and np.float32(c) == np.float32(scale)
        if same and g.integer_valued(mul.input[data]):
            break
    else:
        return False
    taken = graph_names(g.graph)
    one = unique_name(f"{node_label(node)}_unit_scale", taken)
    g.graph.initializer.append(numpy_helper.from_array(np.float32(1.0), one))
    middle = unique_name(f"{node_label(node)}_levels", taken)
    out, integers = node.output[0], mul.input[data]
    node.input[0], node.input[1], node.output[0] = integers, one, middle
    mul.input[data], mul.output[0] = middle, out
    set_rounding(node, "ROUND")
    nodes = g.graph.node
    i, j = list(nodes).index(mul), list(nodes).index(node)
    first, second = onnx.NodeProto(), onnx.NodeProto()
    first.CopyFrom(node)
    second.CopyFrom(mul)
    nodes[i].CopyFrom(first)
    nodes[j].CopyFrom(second)
    return True


def _clipped_own_scale(g: RoundingGraph, node: onnx.NodeProto) -> str | None:
    """Quant(Clip(Mul(n, s), low, high), s): ``x / s`` is ``n``, ``low / s`` or ``high / s``;
    ROUND where neither bound is a tie (TFLite's fused RELU6 / activation range)."""
    clip = g.producer.get(node.input[0])
    if clip is None or clip.op_type != "Clip" or len(clip.input) != 3:
        return None
    mul = g.producer.get(clip.input[0])
    scale = g.scalar(node.input[1])
    bounds = [g.scalar(clip.input[1]), g.scalar(clip.input[2])]
    if mul is None or mul.op_type != "Mul" or scale is None or None in bounds:
        return None
    c = g.scalar(mul.input[1])
    if c is None or np.float32(c) != np.float32(scale) or not g.integer_valued(mul.input[0]):
        return None
    s = Fraction(float(np.float32(scale)))
    if any((Fraction(float(np.float32(b))) / s - Fraction(1, 2)).denominator == 1 for b in bounds):
        return None
    set_rounding(node, "ROUND")
    return f"own scale through a Clip: an integer, or a bound of {node_label(clip)} off the ties"


def _requantized(g: RoundingGraph, node: onnx.NodeProto) -> str | None:
    """A Quant of another Quant's output (through ops that keep its grid: TFLite's QUANTIZE
    between types, a Reshape): ``x / s = k * s_in / s`` for the integers ``k`` of the input."""
    if g.producer.get(node.input[0]) is None or g.producer[node.input[0]].op_type == "Mul":
        return None  # the own-scale rules' case, or a graph input
    k_range, scale = _integer_range(g, node.input[0]), g.scalar(node.input[1])
    if k_range is None or scale is None or scale <= 0:
        return None
    s_in, k_low, k_high = k_range
    ratio = s_in / Fraction(float(np.float32(scale)))
    if tie_reachable([ratio], Fraction(0), k_low, k_high):
        return None
    set_rounding(node, "ROUND")
    return f"requantize: integers in [{k_low}, {k_high}] times {ratio}, never a tie"


def _integer_over_pot(g: RoundingGraph, node: onnx.NodeProto) -> str | None:
    s_exp = power_of_two(g.scalar(node.input[1]))
    if s_exp is None or g.scalar(node.input[2]) != 0.0:
        return None
    x, rights = node.input[0], [-s_exp]
    div = g.producer.get(x)
    if div is not None and div.op_type == "Div":
        pots = g.value(div.input[1])
        exps = [power_of_two(float(p)) for p in np.ravel(pots)] if pots is not None else [None]
        if None in exps or not g.integer_valued(div.input[0]):
            return None
        rights = [e - s_exp for e in exps]  # per channel, where the divisor is per channel
    elif not g.integer_valued(x):
        return None
    if max(rights) < 1 or min(rights) < 0:
        return None  # x / s an integer (no rounding), or not on a grid of halves
    moot = _negatives_moot(g, node.output[0])
    if moot is None:
        return None
    taken = graph_names(g.graph)
    half = unique_name(f"{node_label(node)}_half_step", taken)
    shifted = unique_name(f"{node_label(node)}_plus_half", taken)
    step = float(g.scalar(node.input[1]))
    g.graph.initializer.append(numpy_helper.from_array(np.float32(step / 2), half))
    g.in_front[node.output[0]] = helper.make_node("Add", [x, half], [shifted], name=shifted)
    node.input[0] = shifted
    set_rounding(node, "FLOOR")
    shown = f"2^{rights[0]}" if len(set(rights)) == 1 else f"2^{min(rights)}..2^{max(rights)}"
    return (
        f"integer over {shown}: FLOOR(x + 1/2), half away from zero for x >= 0; "
        f"negative ties are moot ({moot})"
    )


def _negatives_moot(g: RoundingGraph, name: str) -> str | None:
    """Whether every consumer of ``name`` maps all values <= 0 to one value: a Relu, or a
    Quant whose (integer) zero point is its lowest level, behind an optional Mul by c > 0."""
    users = g.consumers.get(name, [])
    if not users or name in g.outputs:
        return None
    found = []
    for user in users:
        source = name
        if user.op_type == "Mul":
            c = g.scalar(user.input[1] if user.input[0] == name else user.input[0])
            quant = g.only_consumer(user.output[0])
            if c is None or c <= 0 or quant is None:
                return None
            user, source = quant, user.output[0]
        if user.op_type == "Relu":
            found.append(f"Relu {node_label(user)}")
            continue
        if user.op_type == "Clip" and user.input[0] == source:
            low = g.scalar(user.input[1]) if len(user.input) > 1 and user.input[1] else None
            if low is None or low < 0:
                return None
            found.append(f"Clip {node_label(user)} from {low:g}")
            continue
        if user.op_type not in QUANTS or user.input[0] != source:
            return None
        levels, scale = g.levels(user), g.scalar(user.input[1])
        if levels is None or scale is None or scale <= 0:
            return None
        z, low, _ = levels
        if z > low:
            return None
        found.append(f"{user.op_type} {node_label(user)} clips at its zero point")
    return ", ".join(found)


def _accumulator(g: RoundingGraph, node: onnx.NodeProto) -> str | None:
    found = accumulator_lattices(g, node)
    if found is None:
        return None
    op, relu, k_low, k_high, lattices = found
    if any(tie_reachable(c, offset, k_low, k_high) for c, offset in lattices):
        return None
    kind = "Conv" if op.op_type == "Conv" else "MatMul"
    set_rounding(node, "ROUND")
    return (
        f"accumulator: {kind} {node_label(op)} of integers in [{k_low}, {k_high}]"
        f"{' through a Relu' if relu else ''}; no output channel's lattice meets a tie"
    )


def accumulator_lattices(
    g: RoundingGraph, node: onnx.NodeProto
) -> tuple[onnx.NodeProto, bool, int, int, list[tuple[list[Fraction], Fraction]]] | None:
    """The Quant's ``x / s`` as ``sum_i k_i c_i + offset`` per output channel, with integers
    ``k_low <= k_i <= k_high``: (the Conv/MatMul, through a Relu, k_low, k_high, [(c, offset)]
    per channel), when its input is an accumulator (the module docstring)."""
    scale, levels = g.scalar(node.input[1]), g.levels(node)
    if scale is None or levels is None or scale <= 0:
        return None
    factor, offset, name, relu = np.array([Fraction(1)]), None, node.input[0], False
    while True:
        op = g.producer.get(name)
        if op is None:
            return None
        if op.op_type == "Relu" and offset is None:
            name, relu = op.input[0], True
            continue
        if op.op_type in ("Reshape", "Flatten") and offset is None and factor.size == 1:
            name = op.input[0]  # nothing per channel above it (the form's pooled sums)
            continue
        divisor = g.value(op.input[1]) if op.op_type in ("Div", "Mul") else None
        if divisor is not None and np.all(divisor != 0) and divisor.ndim <= 1:
            # a scalar or one value per channel (the last axis)
            c = np.array([Fraction(float(v)) for v in np.ravel(divisor)])
            factor = factor / c if op.op_type == "Div" else factor * c
            name = op.input[0]
            continue
        if op.op_type == "Add":
            values = [g.value(i) for i in op.input]
            if sum(v is not None for v in values) != 1:
                return None
            const = next(v for v in values if v is not None)
            offset = (offset or []) + [(factor, const)]
            name = next(i for i, v in zip(op.input, values, strict=True) if v is None)
            continue
        break
    if op.op_type == "Conv" and len(op.input) >= 2:
        weights = g.value(op.input[1])
        if weights is None:
            return None
        per_channel = weights.reshape(weights.shape[0], -1)
        bias = g.value(op.input[2]) if len(op.input) > 2 and op.input[2] else None
        if len(op.input) > 2 and op.input[2] and bias is None:
            return None
    elif op.op_type == "MatMul":
        weights = g.value(op.input[1])
        if weights is None or weights.ndim != 2:
            return None
        per_channel, bias = weights.T, None
    else:
        return None
    channels = per_channel.shape[0]
    k_range = _integer_range(g, op.input[0])
    if k_range is None or factor.size not in (1, channels):
        return None
    s_in, k_low, k_high = k_range
    factor = np.broadcast_to(factor, (channels,))
    offsets = [Fraction(0)] * channels
    terms = [(factor, bias)] if bias is not None else []
    for f, const in [*(offset or []), *terms]:
        flat = np.ravel(const)
        if flat.size not in (1, channels):
            return None
        flat = np.broadcast_to(flat, (channels,))
        f = np.broadcast_to(f, (channels,))
        offsets = [o + fj * Fraction(float(v)) for o, fj, v in zip(offsets, f, flat, strict=True)]
    s_out = Fraction(float(scale))
    lattices = []
    for j in range(channels):
        unit = factor[j] * s_in / s_out
        coefficients = [unit * Fraction(float(w)) for w in per_channel[j]]
        lattices.append((coefficients, offsets[j] / s_out))
    return op, relu, k_low, k_high, lattices


def _integer_range(g: RoundingGraph, name: str) -> tuple[Fraction, int, int] | None:
    """The scale and the integer range (0 included: padding) of a Quant's output, read
    through ops that keep its grid."""
    node, factor = g.producer.get(name), 1.0
    while node is not None and node.op_type in (*GRID_OPS, "Mul"):
        if node.op_type == "Mul":  # Mul(Quant, c), as the own-scale rule writes it
            c = [g.scalar(i) for i in node.input]
            if c[1] is None or c[1] <= 0 or factor != 1.0:
                return None
            factor = float(np.float32(c[1]))
        node = g.producer.get(node.input[0])
    if node is None or node.op_type not in QUANTS:
        return None
    scale, levels = g.scalar(node.input[1]), g.levels(node)
    if scale is None or levels is None:
        return None
    z, low, high = levels
    return Fraction(scale) * Fraction(factor), int(min(low - z, 0)), int(max(high - z, 0))
