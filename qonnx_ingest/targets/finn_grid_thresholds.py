"""The FINN form's thresholds behind an exact integer-grid layer: half a grid step from every
value the layer can give, so that FINN's float re-association cannot move a tie.

The exact thresholds (``finn.py``) send a tie that rounds down by sitting one float32 ulp
above it. FINN's streamlining moves each threshold back through the layer's scale and bias in
float32 (``(t - b) / s``) and rounds it for the integer accumulator; the ulp is lost, the
threshold lands on the tie, and the tie rounds up (quantized_cnn: 1 level on 2 to 11 of 1,936
activations of every input). Behind a Conv / MatMul / Gemm whose input is a quantized
activation (integer levels times a power of two, through pools and reshapes) and whose
weights and bias lie on power-of-two grids, every value the layer computes is a multiple of
one power of two ``g`` within a bound ``B`` with ``B / g < 2^24``: the float32 sums are exact in
any order, and so are the scalar or per-channel positive Mul and Add steps behind it that are
evaluated here as qonnx's executor evaluates them. Each threshold is then moved, per channel,
to half-way between the images of the last grid value below it and the first at or above it:
the same count on every value the layer can give, with half a grid step to spare.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from qonnx_ingest.graph_edit import readers_of
from qonnx_ingest.names import graph_names, unique_name
from qonnx_ingest.passes import PassResult

EXACT = 2.0**24  # float32 integers are exact below this
KEEPS_GRID = {"MaxPool", "Reshape", "Transpose", "Flatten", "Relu", "Squeeze"}
MATRIX = {"Conv": 1, "MatMul": 1, "Gemm": 1}


def thresholds_between_grid_values(model: onnx.ModelProto) -> PassResult:
    """Each MultiThreshold behind an exact grid layer (and its Mul / Add chain) moved off the
    layer's grid, per channel."""
    graph = model.graph
    constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    readers = readers_of(graph)
    taken = graph_names(graph)
    modified = False
    for node in graph.node:
        if node.op_type != "MultiThreshold" or node.input[1] not in constants:
            continue
        found = _layer_behind(node.input[0], producers, readers, constants)
        if found is None:
            continue
        layer, chain = found
        layout = [a.s for a in node.attribute if a.name == "data_layout"]
        if layer.op_type == "Conv" and layout and layout[0] != b"NCHW":
            continue  # its rows would not be the Conv's channels
        grid = _layer_grid(layer, producers, constants)
        if grid is None:
            continue
        g, bound, channels = grid
        steps = _chain_steps(chain, constants, channels, layer.op_type == "Conv")
        if steps is None:
            continue
        thresholds = constants[node.input[1]].astype(np.float32)
        if thresholds.shape[0] not in (1, channels):
            continue
        rows = np.broadcast_to(thresholds, (channels, thresholds.shape[1]))
        moved = _moved(rows, steps, g, bound)
        if moved is None or np.array_equal(moved, np.broadcast_to(thresholds, moved.shape)):
            continue
        name = unique_name(f"{node.input[1]}_off_grid", taken)
        graph.initializer.append(numpy_helper.from_array(moved, name))
        constants[name] = moved
        node.input[1] = name
        modified = True
    return model, modified


def _layer_behind(x, producers, readers, constants):
    """(matrix layer, [Mul / Add steps after it]) in front of ``x``, each tensor read once."""
    chain: list[onnx.NodeProto] = []
    while x in producers and len(readers.get(x, [])) == 1:
        node = producers[x]
        if node.op_type in MATRIX:
            return node, chain
        if node.op_type not in ("Mul", "Add") or len(node.input) != 2:
            return None
        if node.input[1] not in constants or node.input[0] in constants:
            return None
        chain.insert(0, node)
        x = node.input[0]
    return None


def _layer_grid(layer, producers, constants):
    """(g, bound, channels) of the layer's output, or None when it is not provably exact."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in layer.attribute}
    if layer.op_type == "Gemm" and (
        attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0
    ):
        return None
    source = _grid_of(layer.input[0], producers, constants)
    weights = _constant_value(layer.input[1], producers, constants)
    if source is None or weights is None:
        return None
    if layer.op_type == "Gemm" and attrs.get("transB", 0):
        weights = weights.T
    g_in, b_in = source
    if layer.op_type == "Conv":
        channels = weights.shape[0]
        per_channel = np.abs(weights).reshape(channels, -1).sum(axis=1)
    else:
        channels = weights.shape[-1]
        per_channel = np.abs(weights).reshape(-1, channels).sum(axis=0)
    g_w = _power_of_two_grid(weights)
    bias = np.zeros(channels)
    if len(layer.input) > 2 and layer.input[2]:
        bias = _constant_value(layer.input[2], producers, constants)
        if bias is None or bias.size not in (1, channels):
            return None
        bias = np.broadcast_to(bias.astype(np.float64).reshape(-1), (channels,))
    g_b = _power_of_two_grid(bias) if np.any(bias) else np.inf
    if g_w is None or g_b is None or not np.isfinite(min(g_in * g_w, g_b)):
        return None
    g = min(g_in * g_w, g_b)
    bound = float(np.max(per_channel * b_in + np.abs(bias)))
    if bound / g >= EXACT:
        return None
    return g, bound, channels


def _grid_of(x, producers, constants) -> tuple[float, float] | None:
    """(g, bound): ``x`` is a multiple of the power of two g with |x| <= bound."""
    node = producers.get(x)
    if node is None:
        return None
    if node.op_type in KEEPS_GRID:
        return _grid_of(node.input[0], producers, constants)
    if node.op_type == "Mul" and node.input[1] in constants:
        scale = constants[node.input[1]]
        levels = producers.get(node.input[0])
        if (
            scale.size != 1
            or levels is None
            or levels.op_type != "MultiThreshold"
            or _power_of_two_grid(scale) != abs(float(scale.flat[0]))
        ):
            return None
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in levels.attribute}
        bias = attrs.get("out_bias", 0.0)
        if attrs.get("out_scale", 1.0) != 1.0 or bias != round(bias):
            return None
        count = constants[levels.input[1]].shape[1]
        s = abs(float(scale.flat[0]))
        return s, s * max(abs(bias), abs(bias + count))
    return None


def _constant_value(name, producers, constants) -> np.ndarray | None:
    """A constant, or a zero-point-free Quant of constants, as its values."""
    if name in constants:
        return constants[name].astype(np.float64)
    node = producers.get(name)
    if node is None or node.op_type != "Quant" or not all(n in constants for n in node.input):
        return None
    from qonnx.custom_op.general.intquant import int_quant

    x, scale, zero, bits = (constants[n] for n in node.input)
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    rounding = attrs.get("rounding_mode", b"ROUND")
    rounding = rounding.decode() if isinstance(rounding, bytes) else rounding
    signed, narrow = bool(attrs.get("signed", 1)), bool(attrs.get("narrow", 0))
    return np.asarray(int_quant(x, scale, zero, bits, signed, narrow, rounding), np.float64)


def _power_of_two_grid(values: np.ndarray) -> float | None:
    """The coarsest power of two every value is a multiple of (None for non-finite)."""
    values = np.asarray(values, np.float64).reshape(-1)
    nonzero = values[values != 0]
    if not np.all(np.isfinite(values)):
        return None
    if not nonzero.size:
        return np.inf
    e = int(np.frexp(nonzero)[1].min()) - 60
    if not np.all(np.ldexp(nonzero, -e) == np.round(np.ldexp(nonzero, -e))):
        return None
    while np.all(np.ldexp(nonzero, -(e + 1)) == np.round(np.ldexp(nonzero, -(e + 1)))):
        e += 1
    return float(np.ldexp(1.0, e))


def _chain_steps(chain, constants, channels, conv: bool) -> list[tuple[str, np.ndarray]] | None:
    """Each step's constant per channel (positive for a Mul): a scalar, or one value per
    channel on the channel axis (NCHW's second for a Conv, the last for a matrix product)."""
    steps = []
    for node in chain:
        value = constants[node.input[1]].astype(np.float32)
        if value.size not in (1, channels):
            return None
        if value.size != 1:
            axis = -3 if conv else -1
            if value.ndim < -axis or value.shape[axis] != channels:
                return None
        per_channel = np.broadcast_to(value.reshape(-1), (channels,))
        if node.op_type == "Mul" and not np.all(per_channel > 0):
            return None
        steps.append((node.op_type, per_channel.astype(np.float32)))
    return steps


def _moved(thresholds, steps, g: float, bound: float) -> np.ndarray | None:
    """Per channel and threshold: half-way between the images of the last grid value below
    it and the first at or above it, when both are within the bound."""

    def image(n: np.ndarray) -> np.ndarray:  # grid index -> the chain's value, per channel
        v = (n * g).astype(np.float32)
        for op, c in steps:
            v = (v * c[:, None] if op == "Mul" else v + c[:, None]).astype(np.float32)
        return v

    top = int(np.floor(bound / g))
    low = np.full(thresholds.shape, -top - 1, np.int64)
    high = np.full(thresholds.shape, top, np.int64)
    t = thresholds.astype(np.float32)
    reach_high = image(high) >= t
    reach_low = image(np.full(thresholds.shape, -top, np.int64)) >= t
    inside = reach_high & ~reach_low  # reached by some grid value, not by all
    low = np.where(inside, -top, low)
    while np.any(high - low > 1):
        mid = (low + high) // 2
        up = image(mid) >= t
        high = np.where(up, mid, high)
        low = np.where(up, low, mid)
    below, at = image(high - 1).astype(np.float64), image(high).astype(np.float64)
    middle = ((below + at) / 2).astype(np.float32)
    ok = inside & (middle > below) & (middle <= at)
    return np.where(ok, middle, t).astype(np.float32)
