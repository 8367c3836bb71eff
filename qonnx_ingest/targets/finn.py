"""The FINN form (``--format finn``): the same function, written the way FINN's frontend reads it.

FINN turns an activation ``Quant`` into a ``MultiThreshold`` whose thresholds sit half-way
between levels, and counts ``x >= t``: every tie rounds up, whatever the Quant's rounding mode
says (QKeras and TFLite round ties to even or away from zero, and ties are common on the
power-of-two grids they use). So each activation Quant is written here as the MultiThreshold
that computes it exactly: threshold k is the smallest float32 value the Quant itself (qonnx's
``int_quant``, the executor's arithmetic) maps to level k + 1, so ``x >= t_k`` is the Quant on
every float32 input, ties included. A Mul by the scale (and an Add for a zero point) follows,
which FINN's streamlining absorbs. Constant Quants (weights, biases) stay Quants for FINN to
fold, with their scale and zero point in the ``(1,)`` shape FINN's bias extraction takes.

FINN's MultiThreshold takes activations of at most 8 bits (its frontend's default); a wider
activation Quant is refused, naming it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.graph_edit import ensure_opset
from qonnx_ingest.names import TakenNames, graph_names, unique_name
from qonnx_ingest.passes import PassResult, run_passes
from qonnx_ingest.targets.finn_thresholds import (
    HIGHEST,
    LOWEST,
    chain_function,
    chain_input,
    least_reaching,
    ordered,
    quant_chain,
    unordered,
)

QONNX_DOMAIN = "qonnx.custom_op.general"
# FINN's frontend leaves wider activations as Quant nodes it cannot map (its
# ``max_multithreshold_bit_width`` default)
MAX_THRESHOLD_BITS = 8
# how many times the search window around a half-way point may grow sixteenfold
_WIDEN = 6


def to_finn(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` in the FINN form; ``model`` is not changed."""
    from qonnx_ingest.targets.finn_integer_conv import convs_on_integers
    from qonnx_ingest.targets.finn_layout import image_ends_channels_last
    from qonnx_ingest.targets.finn_pooling import (
        average_pools_as_sums,
        one_pixel_heads_as_matmul,
        reshapes_merged,
    )
    from qonnx_ingest.targets.finn_qkeras import qkeras_forms
    from qonnx_ingest.targets.finn_shapes import with_shapes

    # every tensor's shape on record: the pooling and layout passes read ranks and channels
    model = with_shapes(onnx.ModelProto.FromString(model.SerializeToString()))

    passes = [
        average_pools_as_sums,
        reshapes_merged,
        one_pixel_heads_as_matmul,
        convs_on_integers,
        activation_quants_as_thresholds,
        qkeras_forms,
        image_ends_channels_last,
        zero_points_out_of_weights,
        constant_quant_params_as_1d,
    ]
    model, _ = run_passes(passes, model)
    return with_shapes(model)


def activation_quants_as_thresholds(model: onnx.ModelProto) -> PassResult:
    """Each Quant of a computed tensor becomes MultiThreshold -> (Add) -> Mul, exactly."""
    graph = model.graph
    constants = {i.name: i for i in graph.initializer}
    taken = graph_names(graph)
    producers = {out: node for node in graph.node for out in node.output}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    # a twice-rounding chain in front of a Quant (later Quants first: each claims its chain)
    chains: dict[str, list[onnx.NodeProto]] = {}
    claimed: set[str] = set()
    for node in reversed(graph.node):
        if node.op_type != "Quant" or node.input[0] in constants or node.output[0] in claimed:
            continue
        chain = quant_chain(node.input[0], producers, readers, constants)
        if chain:
            chains[node.output[0]] = chain
            claimed.update(n.output[0] for n in chain)
    nodes: list[onnx.NodeProto] = []
    dropped: set[str] = set()  # outputs of the Relus (and chains) made redundant
    for node in graph.node:
        if node.output[0] in claimed:
            dropped.add(node.output[0])
            continue
        if node.op_type != "Quant" or node.input[0] in constants:
            nodes.append(node)
            continue
        chain = chains.get(node.output[0], [])
        written = _thresholds_for(node, constants, graph, taken, chain)
        relu = None if chain else producers.get(node.input[0])
        while relu is not None and relu.op_type == "Relu" and readers[relu.output[0]] == 1:
            # FINN maps no Relu in front of thresholds. Relu(x) >= t is x >= t for t > 0 and
            # always true for t <= 0, which the lowest float32 threshold also is.
            init = next(i for i in graph.initializer if i.name == written[0].input[1])
            thresholds = numpy_helper.to_array(init)
            init.CopyFrom(
                numpy_helper.from_array(np.where(thresholds > 0, thresholds, LOWEST), init.name)
            )
            written[0].input[0] = relu.input[0]
            dropped.add(relu.output[0])
            relu = producers.get(relu.input[0])  # Relu(Relu(x)) too (QKeras: relu + quantized_relu)
        nodes.extend(written)
    modified = (
        len(nodes) != len(graph.node)
        or bool(dropped)
        or any(n.op_type == "MultiThreshold" for n in nodes)
    )
    if modified:
        del graph.node[:]
        graph.node.extend(n for n in nodes if n.output[0] not in dropped)
        ensure_opset(model, QONNX_DOMAIN)
    return model, modified


def _thresholds_for(
    node: onnx.NodeProto,
    constants: dict,
    graph: onnx.GraphProto,
    taken: TakenNames,
    chain: list[onnx.NodeProto],
) -> list[onnx.NodeProto]:
    """The MultiThreshold -> Mul computing ``node`` (with ``chain`` in front of it) exactly."""
    where = f"Quant {node.name or node.output[0]}"
    params = []
    for name in node.input[1:4]:
        if name not in constants:
            raise ConversionError("FINN needs a constant scale, zero point and bit width", where)
        params.append(numpy_helper.to_array(constants[name]).astype(np.float64))
    scale, zero_point, bits = params
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    signed, narrow = bool(attrs.get("signed", 1)), bool(attrs.get("narrow", 0))
    rounding = attrs.get("rounding_mode", "ROUND")
    if isinstance(rounding, bytes):
        rounding = rounding.decode()
    if bits.size != 1 or zero_point.size != 1 and np.any(zero_point != zero_point.flat[0]):
        raise ConversionError("FINN's thresholds need one bit width and one zero point", where)
    width = int(bits.flat[0])
    if width != bits.flat[0] or not 2 <= width <= MAX_THRESHOLD_BITS:
        raise ConversionError(
            f"a {bits.flat[0]:g}-bit activation: FINN's MultiThreshold takes 2 to "
            f"{MAX_THRESHOLD_BITS} bits",
            where,
        )
    z = float(zero_point.flat[0])
    q_min = -(2 ** (width - 1)) + int(narrow) if signed else 0
    q_max = 2 ** (width - 1) - 1 if signed else 2**width - 1
    channel_scales, axis = _channel_scales(scale, where)
    if chain and channel_scales.size > 1:
        raise ConversionError("a rounding chain in front of per-channel scales", where)
    first, last = q_min, q_max  # the levels the MultiThreshold counts between
    if chain:
        before = chain_function(chain, constants)
        level = _level_function(scale.flat[0], z, width, signed, narrow, rounding, before)
        found, first, last = _thresholds_over_all_floats(level, where)
        thresholds = found[None, :].astype(np.float32)
    else:
        thresholds = np.stack(
            [
                _exact_thresholds(
                    _level_function(s, z, width, signed, narrow, rounding),
                    s,
                    z,
                    q_min,
                    q_max,
                    where,
                )
                for s in channel_scales
            ]
        ).astype(np.float32)

    x, y = (chain_input(chain, constants) if chain else node.input[0]), node.output[0]
    base = node.name or y
    t_name = unique_name(f"{base}_thresholds", taken)
    graph.initializer.append(numpy_helper.from_array(thresholds, t_name))
    count = unique_name(f"{base}_levels", taken)
    # the levels minus the zero point, counted from out_bias: no Add behind the thresholds
    # (FINN cannot absorb one that widens the type, and then maps no Conv after it)
    if z != round(z):
        raise ConversionError(f"a zero point of {z}: FINN's thresholds need an integer", where)
    low, high = first - int(z), last - int(z)
    dtype = _integer_type(low, high)
    out: list[onnx.NodeProto] = [
        helper.make_node(
            "MultiThreshold",
            [x, t_name],
            [count],
            name=unique_name(f"{base}_MultiThreshold", taken),
            domain=QONNX_DOMAIN,
            out_dtype=dtype,
            out_bias=float(low),
            **({"data_layout": "NHWC"} if axis == -1 and _rank(graph, x) > 2 else {}),
        )
    ]
    levels = count
    s_name = unique_name(f"{base}_scale", taken)
    graph.initializer.append(numpy_helper.from_array(scale.astype(np.float32), s_name))
    out.append(
        helper.make_node("Mul", [levels, s_name], [y], name=unique_name(f"{base}_Mul", taken))
    )
    return out


def _integer_type(low: int, high: int) -> str:
    """The narrowest FINN integer type holding [low, high]."""
    if low >= 0:
        return f"UINT{max(1, int(high).bit_length())}"
    bits = max((-low - 1).bit_length(), int(high).bit_length()) + 1
    return f"INT{bits}"


def _rank(graph: onnx.GraphProto, name: str) -> int:
    for info in (*graph.input, *graph.value_info):
        if info.name == name and info.type.tensor_type.HasField("shape"):
            return len(info.type.tensor_type.shape.dim)
    raise ConversionError("FINN's per-channel thresholds need the tensor's rank", name)


def _channel_scales(scale: np.ndarray, where: str) -> tuple[np.ndarray, int | None]:
    """The scale per channel and the channel axis (1 for (1, C, 1, 1), -1 for (C,))."""
    if scale.size == 1:
        return scale.reshape(1), None
    nonunit = [a for a, d in enumerate(scale.shape) if d != 1]
    if len(nonunit) != 1:
        raise ConversionError(
            f"a scale of shape {list(scale.shape)}: FINN takes per-channel", where
        )
    axis = nonunit[0] if scale.ndim > 1 else -1
    if axis not in (1, -1, scale.ndim - 1):
        raise ConversionError(
            f"a scale of shape {list(scale.shape)}: FINN takes per-channel", where
        )
    return scale.reshape(-1), 1 if axis == 1 else -1


def _exact_thresholds(
    level: Callable[[np.ndarray], np.ndarray],
    scale: float,
    z: float,
    q_min: int,
    q_max: int,
    where: str,
) -> np.ndarray:
    """Threshold k: the least float32 value that ``level`` (a Quant's, ``_level_function``)
    maps to level q_min + k + 1, searched near the half-way points of its grid."""
    targets = np.arange(q_min + 1, q_max + 1, dtype=np.float64)
    middle = (targets - 0.5 - z) * scale
    # float32 rounding of x / s + z moves the step by a few ulps of that sum, not of x
    margin = 8 * (np.abs(targets) + abs(z) + 1) * abs(scale) * np.finfo(np.float32).eps
    for _ in range(_WIDEN):
        low = ordered((middle - margin).astype(np.float32))
        high = ordered((middle + margin).astype(np.float32))
        if np.all(level(unordered(high)) >= targets) and not np.any(
            level(unordered(low)) >= targets
        ):
            break
        margin *= 16
    else:
        raise ConversionError("no exact float32 threshold found near a half-way point", where)
    # bisection over the float32 values between: the least one reaching each level
    return least_reaching(level, targets, low, high)


def _level_function(
    scale: float,
    z: float,
    width: int,
    signed: bool,
    narrow: bool,
    rounding: str,
    before: Callable[[np.ndarray], np.ndarray] | None = None,
) -> Callable[[np.ndarray], np.ndarray]:
    """The Quant's level of each float32 input (behind ``before``, a chain in front)."""
    from qonnx.custom_op.general.intquant import int_quant

    def level(x: np.ndarray) -> np.ndarray:
        s, zp = np.float32(scale), np.float32(z)
        if before is not None:
            x = before(x)
        y = int_quant(x, s, zp, np.float32(width), signed, narrow, rounding)
        return np.round(y / s + zp)

    return level


def _thresholds_over_all_floats(level, where: str) -> tuple[np.ndarray, int, int]:
    """A chain's thresholds, searched over every finite float32, and the levels it spans
    (from the lowest float32's to the highest's: a Clip in the chain leaves levels beyond its
    range unreachable, and the MultiThreshold then counts only the reachable ones)."""
    ends = level(np.float32([LOWEST, HIGHEST]))
    first, last = int(ends[0]), int(ends[1])
    if last <= first:
        raise ConversionError("the chain in front of it gives one level only", where)
    targets = np.arange(first + 1, last + 1, dtype=np.float64)
    low = np.full(targets.shape, ordered(np.float32([LOWEST]))[0])
    high = np.full(targets.shape, ordered(np.float32([HIGHEST]))[0])
    return least_reaching(level, targets, low, high), first, last


def zero_points_out_of_weights(model: onnx.ModelProto) -> PassResult:
    """A constant Quant with a zero point (TFLite's uint8 weights) rewritten with none: the
    quantized values ``s * (q - z)`` on the signed grid that holds every ``q - z`` (9 bits for
    uint8). FINN's frontend takes zero-point-free Quants only; the values are the same floats."""
    from qonnx.custom_op.general.intquant import int_quant

    graph = model.graph
    constants = {i.name: i for i in graph.initializer}
    taken = graph_names(graph)
    modified = False
    for node in graph.node:
        if node.op_type != "Quant" or any(n not in constants for n in node.input):
            continue
        x, scale, zero_point, bits = (numpy_helper.to_array(constants[n]) for n in node.input)
        if not np.any(zero_point):
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        rounding = attrs.get("rounding_mode", b"ROUND")
        rounding = rounding.decode() if isinstance(rounding, bytes) else rounding
        signed, narrow = bool(attrs.get("signed", 1)), bool(attrs.get("narrow", 0))
        values = int_quant(x, scale, zero_point, bits, signed, narrow, rounding).astype(np.float32)
        ints = np.round(values / scale)
        width = int(max(2, np.ceil(np.log2(max(-ints.min(), ints.max() + 1, 1))) + 1))
        names = [unique_name(f"{node.name or node.output[0]}_{what}", taken) for what in "xzb"]
        for name, value in zip(
            names, (values, np.zeros(1, np.float32), np.float32(width)), strict=True
        ):
            graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
        node.input[0], node.input[2], node.input[3] = names
        del node.attribute[:]
        node.attribute.extend(
            [helper.make_attribute(k, v) for k, v in (("signed", 1), ("narrow", 0))]
            + [helper.make_attribute("rounding_mode", "ROUND")]
        )
        modified = True
    return model, modified


def constant_quant_params_as_1d(model: onnx.ModelProto) -> PassResult:
    """A constant Quant's rank-0 scale and zero point as ``(1,)`` (qonnx's ``extract_conv_bias``
    takes no other), and an all-zero per-channel zero point as that one zero; the bit width
    stays rank-0, which qonnx's integer Quant needs. Written as new initializers: the
    originals may be shared with activation Quants."""
    graph = model.graph
    constants = {i.name: i for i in graph.initializer}
    taken = graph_names(graph)
    replaced: dict[str, str] = {}
    modified = False
    for node in graph.node:
        if node.op_type != "Quant" or node.input[0] not in constants:
            continue
        for k in (1, 2):
            name = node.input[k]
            if name not in constants:
                continue
            if name not in replaced:
                value = numpy_helper.to_array(constants[name])
                if k == 2 and value.size > 1 and not np.any(value):
                    value = np.zeros((1,), value.dtype)
                elif value.ndim == 0:
                    value = value.reshape(1)
                else:
                    replaced[name] = name
                    continue
                replaced[name] = unique_name(f"{name}_1d", taken)
                graph.initializer.append(numpy_helper.from_array(value, replaced[name]))
            if replaced[name] != name:
                node.input[k] = replaced[name]
                modified = True
    return model, modified
