"""Convolutions on integers for the FINN form: FINN gets integer arithmetic it has nothing to
re-derive.

A quantized Conv, or MatMul with its bias Add (activation Quant in, constant weight and bias
Quants, a requantization chain of non-decreasing steps out to an activation Quant) computes,
in exact arithmetic, a function of its integer accumulator
``A = sum((q_in - z_in) * (q_w - z_w)) + b``: the chain applied to ``s_in * s_w[c] * A``.
FINN's frontend instead keeps the float Conv and moves the weight scale and bias around it as
Mul / Div / Add; a float32 accumulator that is not exact (scales that are
not powers of two) then lands on the other side of a threshold (t2o MobileNet v1: 1 of 65,536
activations at one layer, spreading from there). Here the Conv reads the input's integer
levels and integer weights (a scale-1 Quant FINN folds into an integer weight type) and has no
bias; every partial sum is an integer below 2^24, exact in float32. Behind it, one
MultiThreshold per output channel on that accumulator (the bias folded into the thresholds),
threshold k the least integer the chain maps to level k + 1, and one Mul by the output scale.
The chain is evaluated in float64 from the exact product ``A * s_in * s_w[c]`` (float32 steps
would put an accumulator within an ulp of a tie on either side). Per-channel chains (TFLite's
per-channel right shifts) are taken too, which the scalar chain machinery
(``finn_thresholds``) is not for.

Convs whose partial sums could reach 2^24, or whose pattern differs, are left as they are.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.graph_edit import ensure_opset, readers_of
from qonnx_ingest.names import graph_names, unique_name
from qonnx_ingest.passes import PassResult

QONNX_DOMAIN = "qonnx.custom_op.general"
MAX_THRESHOLD_BITS = 8  # FINN's MultiThreshold (its frontend's default)
EXACT = 2**24  # float32 holds every integer below this
_STEPS = {"Mul", "Div", "Relu", "Clip", "Quant"}


class _Levels:
    """An integer tensor and what it stands for: ``levels * scale``, levels in [low, high]."""

    def __init__(self, name: str, scale: float, low: int, high: int) -> None:
        self.name, self.scale, self.low, self.high = name, scale, low, high


def convs_on_integers(model: onnx.ModelProto) -> PassResult:
    """Each matching Conv -> chain -> Quant as integer Conv -> MultiThreshold -> Mul."""
    graph = model.graph
    constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    readers = readers_of(graph)
    outputs = {o.name for o in graph.output}
    taken = graph_names(graph)
    written: dict[str, _Levels] = {}  # the Mul outputs this pass writes -> their levels
    replaced: dict[int, list[onnx.NodeProto]] = {}  # conv's position -> nodes in its place
    dropped: set[int] = set()  # positions of chain nodes now computed by the thresholds
    position = {id(node): k for k, node in enumerate(graph.node)}
    for k, node in enumerate(graph.node):
        if node.op_type not in ("Conv", "MatMul") or k in dropped:
            continue
        bias, start = _bias_add(node, readers, producers, constants)
        chain = _chain_behind(start, readers, outputs, constants)
        if chain is None:
            continue
        found = _input_levels(node.input[0], constants, producers, written, taken, graph)
        if found is None:
            continue
        levels, in_nodes, quant = found
        new = _rewrite(node, levels, bias, chain, constants, producers, written, graph, taken)
        if new is None:
            continue
        if quant is None:  # a Reshape of levels, in front of the Conv
            replaced[k] = in_nodes + new
        else:  # the input Quant as its levels and a Mul by its scale, where it was
            replaced[position[id(quant)]] = in_nodes
            written[quant.output[0]] = levels
            replaced[k] = new
        dropped.update(position[id(n)] for n in chain)
        if bias is not None and node.op_type == "MatMul":
            dropped.add(position[id(readers[node.output[0]][0])])
    if not replaced:
        return model, False
    nodes = []
    for k, node in enumerate(graph.node):
        if k in replaced:
            nodes.extend(replaced[k])
        elif k not in dropped:
            nodes.append(node)
    # what no node reads any more: input Quants, output Muls, Reshapes of the old values
    # (FINN refuses nodes whose result nobody reads)
    while True:
        read = {name for n in nodes for name in n.input} | outputs
        dead = [n for n in nodes if not any(o in read for o in n.output)]
        if not dead:
            break
        nodes = [n for n in nodes if n not in dead]
    del graph.node[:]
    graph.node.extend(nodes)
    ensure_opset(model, QONNX_DOMAIN)
    return model, True


def _bias_add(node, readers, producers, constants) -> tuple[str | None, str]:
    """A Conv's bias input, or the constant Quant a MatMul's one reader (an Add) adds; and
    the tensor the requantization chain starts from."""
    if node.op_type == "Conv":
        return (node.input[2] if len(node.input) > 2 and node.input[2] else None), node.output[0]
    after = readers.get(node.output[0], [])
    if len(after) == 1 and after[0].op_type == "Add":
        other = [n for n in after[0].input if n != node.output[0]]
        quant = producers.get(other[0]) if len(other) == 1 else None
        if quant is not None and quant.op_type == "Quant" and quant.input[0] in constants:
            return other[0], after[0].output[0]
    return None, node.output[0]


def _chain_behind(x, readers, outputs, constants) -> list[onnx.NodeProto] | None:
    """The steps from tensor ``x`` (a Conv's or MatMul's result) to the first activation
    Quant of at most 8 bits (that Quant last), each tensor between read once; None if there
    is no such chain."""
    chain: list[onnx.NodeProto] = []
    while True:
        after = readers.get(x, [])
        if len(after) != 1 or x in outputs:
            return None
        node = after[0]
        if node.op_type not in _STEPS or node.input[0] != x:
            return None
        if any(n not in constants for n in node.input[1:] if n):
            return None
        chain.append(node)
        if node.op_type == "Quant" and float(constants[node.input[3]]) <= MAX_THRESHOLD_BITS:
            return chain
        x = node.output[0]


def _attrs(node: onnx.NodeProto) -> dict:
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    rounding = attrs.get("rounding_mode", "ROUND")
    attrs["rounding_mode"] = rounding.decode() if isinstance(rounding, bytes) else rounding
    return attrs


def _quant_range(node: onnx.NodeProto, bits: int) -> tuple[int, int]:
    attrs = _attrs(node)
    signed, narrow = bool(attrs.get("signed", 1)), bool(attrs.get("narrow", 0))
    if signed:
        return -(2 ** (bits - 1)) + int(narrow), 2 ** (bits - 1) - 1
    return 0, 2**bits - 1 - int(narrow)


def _scalar(value: np.ndarray) -> float | None:
    value = np.asarray(value)
    if value.size != 1 and np.any(value != value.flat[0]):
        return None
    return float(value.flat[0])


def _input_levels(x, constants, producers, written, taken, graph):
    """The Conv input's integer levels: those of a Mul this pass wrote (or a Reshape of them),
    or of an activation Quant, written as ``Quant(x / s, 1, z)`` (the same float32 arithmetic
    as ``Quant(x, s, z)``; the thresholds pass makes it one MultiThreshold) and a Mul by ``s``
    for its other readers. Returns (levels, new nodes, the Quant they replace) or None."""
    if x in written:
        return written[x], [], None
    quant = producers.get(x)
    if quant is not None and quant.op_type == "Reshape" and quant.input[0] in written:
        levels = written[quant.input[0]]
        name = unique_name(f"{levels.name}_reshaped", taken)
        node = helper.make_node("Reshape", [levels.name, quant.input[1]], [name], name=name)
        return _Levels(name, levels.scale, levels.low, levels.high), [node], None
    if quant is None or quant.op_type != "Quant" or quant.input[0] in constants:
        return None
    if any(n not in constants for n in quant.input[1:4]):
        return None
    scale, zero, bits = (_scalar(constants[n]) for n in quant.input[1:4])
    if scale is None or zero is None or bits is None or scale <= 0 or zero != round(zero):
        return None
    if bits != round(bits) or not 2 <= bits <= MAX_THRESHOLD_BITS:
        return None
    low, high = _quant_range(quant, int(bits))
    base = quant.name or x
    names = [unique_name(f"{base}_{w}", taken) for w in ("in_scale", "unit", "by_scale", "int")]
    names.append(unique_name(f"{base}_Mul", taken))
    graph.initializer.append(numpy_helper.from_array(np.float32(scale), names[0]))
    graph.initializer.append(numpy_helper.from_array(np.float32(1.0), names[1]))
    nodes = [
        helper.make_node("Div", [quant.input[0], names[0]], [names[2]], name=names[2]),
        helper.make_node(
            "Quant",
            [names[2], names[1], quant.input[2], quant.input[3]],
            [names[3]],
            name=unique_name(f"{base}_levels_Quant", taken),
            domain=QONNX_DOMAIN,
            **{k: v for k, v in _attrs(quant).items()},
        ),
    ]
    nodes.append(helper.make_node("Mul", [names[3], names[0]], [x], name=names[4]))
    return _Levels(names[3], scale, low - int(zero), high - int(zero)), nodes, quant


def _integers(quant: onnx.NodeProto, constants) -> tuple[np.ndarray, np.ndarray] | None:
    """A constant Quant's integers ``q - z`` (exactly) and its scale."""
    from qonnx.custom_op.general.intquant import int_quant

    if quant is None or quant.op_type != "Quant":
        return None
    if any(n not in constants for n in quant.input):
        return None
    x, scale, zero, bits = (np.asarray(constants[n], np.float64) for n in quant.input)
    attrs = _attrs(quant)
    signed, narrow = bool(attrs.get("signed", 1)), bool(attrs.get("narrow", 0))
    q = int_quant(x / scale, np.float64(1), zero, bits, signed, narrow, attrs["rounding_mode"])
    return np.round(q).astype(np.int64), scale


def _per_channel(value: np.ndarray, channels: int, rank: int) -> np.ndarray | None:
    """A constant broadcast against a (1, C, ...) result of ``rank`` as C values; None if it
    varies along another axis."""
    value = np.asarray(value, np.float64)
    if value.size == 1:
        return np.full(channels, float(value.flat[0]))
    shape = (1,) * (rank - value.ndim) + value.shape
    if value.size != channels or len(shape) != rank or shape[1] != channels:
        return None
    return value.reshape(channels)


def _rewrite(conv, levels, bias_name, chain, constants, producers, written, graph, taken):
    """The integer Conv (MatMul) -> MultiThreshold -> Mul computing ``conv``, its bias and
    ``chain``, or None."""
    weights = _integers(producers.get(conv.input[1]), constants)
    if weights is None:
        return None
    w_int, w_scale = weights
    matrix = conv.op_type == "MatMul"
    if matrix and w_int.ndim != 2:
        return None
    channels = w_int.shape[1] if matrix else w_int.shape[0]
    if w_scale.size not in (1, channels):
        return None
    w_scale = np.broadcast_to(w_scale.reshape(-1), (channels,))
    if np.any(w_scale <= 0):
        return None
    bias = np.zeros(channels, np.int64)
    if bias_name is not None:
        found = _integers(producers.get(bias_name), constants)
        if found is None or found[0].size != channels:
            return None
        bias = found[0].reshape(channels)
    # the accumulator's range (a padded tap contributes 0) and its largest partial sum
    low, high = min(levels.low, 0), max(levels.high, 0)
    taps = w_int.T if matrix else w_int.reshape(channels, -1)
    acc_low = np.minimum(taps * low, taps * high).sum(axis=1)
    acc_high = np.maximum(taps * low, taps * high).sum(axis=1)
    if np.abs(taps).sum(axis=1).max() * max(-low, high) >= EXACT:
        return None
    steps = _steps(chain, constants, channels, 2 if matrix else 4)
    if steps is None:
        return None
    out_quant = chain[-1]
    s_out, z_out = _scalar(constants[out_quant.input[1]]), _scalar(constants[out_quant.input[2]])
    if s_out is None or z_out is None or z_out != round(z_out):
        return None
    unit = np.float64(levels.scale) * w_scale  # the real value of one accumulator step

    def level(a: np.ndarray) -> np.ndarray:  # a: (C, N) integer accumulators with the bias
        return _run(steps, a * unit[:, None])

    lo, hi = (acc_low + bias)[:, None], (acc_high + bias)[:, None]
    first, last = int(level(lo).min()), int(level(hi).max())
    if last <= first:
        return None
    targets = np.arange(first + 1, last + 1, dtype=np.float64)[None, :]
    thresholds = _least_reaching(level, targets, lo, hi) - bias[:, None]

    base = conv.name or conv.output[0]
    names = {w: unique_name(f"{base}_{w}", taken) for w in ("w", "one", "zero", "bits", "wq")}
    names.update({w: unique_name(f"{base}_{w}", taken) for w in ("acc", "t", "lv", "s")})
    width = int(max(2, int(np.abs(w_int).max()).bit_length() + 1))
    for what, value in (
        ("w", w_int.astype(np.float32)),
        ("one", np.ones(1, np.float32)),
        ("zero", np.zeros(1, np.float32)),
        ("bits", np.float32(width)),
        ("t", thresholds.astype(np.float32)),
        ("s", np.float32(s_out)),
    ):
        graph.initializer.append(numpy_helper.from_array(np.asarray(value), names[what]))
    out_low, out_high = first - int(z_out), last - int(z_out)
    y = out_quant.output[0]
    nodes = [
        helper.make_node(
            "Quant",
            [names["w"], names["one"], names["zero"], names["bits"]],
            [names["wq"]],
            name=unique_name(f"{base}_weights_Quant", taken),
            domain=QONNX_DOMAIN,
            signed=1,
            narrow=0,
            rounding_mode="ROUND",
        ),
        helper.make_node(
            conv.op_type,
            [levels.name, names["wq"]],
            [names["acc"]],
            name=conv.name or names["acc"],
            **{a.name: helper.get_attribute_value(a) for a in conv.attribute},
        ),
        helper.make_node(
            "MultiThreshold",
            [names["acc"], names["t"]],
            [names["lv"]],
            name=unique_name(f"{base}_MultiThreshold", taken),
            domain=QONNX_DOMAIN,
            out_dtype=_integer_type(out_low, out_high),
            out_bias=float(out_low),
        ),
        helper.make_node(
            "Mul", [names["lv"], names["s"]], [y], name=unique_name(f"{base}_Mul", taken)
        ),
    ]
    written[y] = _Levels(names["lv"], s_out, out_low, out_high)
    return nodes


def _steps(chain, constants, channels, rank) -> list[tuple] | None:
    """The chain as (op, per-channel constants, attributes), the last Quant giving levels."""
    steps = []
    for node in chain:
        values = [_per_channel(constants[n], channels, rank) for n in node.input[1:] if n]
        if any(v is None for v in values):
            return None
        if node.op_type in ("Mul", "Div") and np.any(values[0] <= 0):
            return None
        if node.op_type == "Clip" and len(values) != 2:
            return None
        if node.op_type == "Quant":
            if np.any(values[0] <= 0) or np.any(values[2] != values[2][0]):
                return None
            bits = int(values[2][0])
            values.append(np.array(_quant_range(node, bits), np.float64))
        steps.append((node.op_type, values, _attrs(node)))
    return steps


def _run(steps, v: np.ndarray) -> np.ndarray:
    """The chain in float64 on ``v`` (C, N); the last Quant's integer level."""
    from qonnx.custom_op.general.intquant import resolve_rounding_mode

    for k, (op, c, attrs) in enumerate(steps):
        col = [x[:, None] for x in c]
        if op == "Relu":
            v = np.maximum(v, 0.0)
        elif op == "Mul":
            v = v * col[0]
        elif op == "Div":
            v = v / col[0]
        elif op == "Clip":
            v = np.clip(v, col[0], col[1])
        else:
            scale, zero, (q_min, q_max) = col[0], col[1], c[3]
            q = resolve_rounding_mode(attrs["rounding_mode"])(v / scale + zero)
            q = np.clip(q, q_min, q_max)
            if k == len(steps) - 1:
                return q
            v = (q - zero) * scale
    raise AssertionError("a chain ends in its Quant")


def _least_reaching(level, targets, low, high) -> np.ndarray:
    """Per channel and target, the least integer in [low, high] with ``level >= target``
    (high + 1 where none is), ``level`` non-decreasing; bisection over the integers."""
    below = np.broadcast_to(low - 1, np.broadcast_shapes(low.shape, targets.shape)).copy()
    above = np.broadcast_to(high + 1, below.shape).copy()
    while np.any(above - below > 1):
        mid = (below + above) // 2
        up = level(mid) >= targets
        above = np.where(up, mid, above)
        below = np.where(up, below, mid)
    return above


def _integer_type(low: int, high: int) -> str:
    """The narrowest FINN integer type holding [low, high]."""
    if low >= 0:
        return f"UINT{max(1, int(high).bit_length())}"
    return f"INT{max((-low - 1).bit_length(), int(high).bit_length()) + 1}"
