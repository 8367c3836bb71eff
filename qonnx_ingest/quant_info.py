"""What each quantizer of a QONNX model says about its tensor, read once for every consumer.

The report, the AIMET encodings export, the QCDQ export and --verify all need the same facts
about a Quant node (bit width, signedness, per-tensor or per-axis scale, role in the graph);
they read them here so that the four can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.quant import int_range

INPUT, WEIGHT, BIAS, ACTIVATION = "input", "weight", "bias", "activation"
# The quantizers that state a tensor's own quantization (Trunc re-quantizes a quantized value).
TENSOR_QUANTIZERS = frozenset({"Quant", "IntQuant", "BipolarQuant"})
# (op type, input index) where a constant is a bias: added to the accumulator, not multiplied.
_BIAS_SLOTS = frozenset({("Conv", 2), ("ConvTranspose", 2), ("Gemm", 2)})


@dataclass(frozen=True)
class QuantizedTensor:
    """One Quant / IntQuant / BipolarQuant node and the tensor it quantizes.

    ``scale`` and ``zero_point`` are flat: one value (per-tensor) or one per slice of
    ``axis``. ``bit_width`` is 1 and ``bipolar`` is set for BipolarQuant.
    """

    node: str
    op_type: str
    tensor: str
    output: str
    role: str
    bit_width: float
    signed: bool
    narrow: bool
    rounding_mode: str
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None
    shape: tuple[int | str, ...] | None
    bipolar: bool = False

    @property
    def per_axis(self) -> bool:
        return self.axis is not None

    @property
    def integer_bits(self) -> int | None:
        """The bit width as an int, or None for a fractional or non-constant width."""
        bits = float(self.bit_width)
        return int(bits) if bits.is_integer() else None

    @property
    def storage_range(self) -> tuple[int, int]:
        if self.bipolar:
            return -1, 1
        lo, hi = int_range(self.bit_width, self.signed, self.narrow)
        return int(lo), int(hi)


def quantized_tensors(model: onnx.ModelProto) -> list[QuantizedTensor]:
    """Every quantizer of ``model`` in graph order (Trunc, which re-quantizes an already
    quantized value to fewer bits, is not a tensor's own quantization and is left out)."""
    graph = model.graph
    constants = _constants(graph)
    shapes = _shapes(graph)
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in graph.node:
        for index, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, index))
    graph_inputs = {vi.name for vi in graph.input} - set(constants)
    found = []
    for node in graph.node:
        if node.op_type not in TENSOR_QUANTIZERS:
            continue
        found.append(_read(node, constants, shapes, consumers, graph_inputs))
    return found


def constant_quantizer_output(
    node: onnx.NodeProto, constants: dict[str, np.ndarray], graph: onnx.GraphProto
) -> np.ndarray:
    """What a quantizer outputs when every input is a constant, computed by qonnx's own op."""
    from qonnx.core.onnx_exec import execute_node

    missing = [name for name in node.input if name not in constants]
    if missing:
        raise ConversionError(
            f"input '{missing[0]}' is not a constant", f"{node.op_type} {node.name}"
        )
    context = {name: constants[name] for name in node.input}
    execute_node(node, context, graph, opset_version=1)
    return context[node.output[0]]


def _read(node, constants, shapes, consumers, graph_inputs) -> QuantizedTensor:
    where = node.name or node.output[0]

    def param(index: int, label: str) -> np.ndarray:
        if index >= len(node.input) or node.input[index] not in constants:
            raise ConversionError(f"{label} is not a constant", f"{node.op_type} {where}")
        return constants[node.input[index]].astype(np.float64)

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    x = node.input[0]
    shape = shapes.get(x)
    scale = param(1, "scale")
    bipolar = node.op_type == "BipolarQuant"
    if bipolar:
        zero_point, bits, signed, narrow, rounding = np.zeros(1), 1.0, True, False, "SIGN"
    else:
        zero_point = param(2, "zero_point")
        bits_a = param(3, "bit_width")
        if bits_a.size != 1:
            raise ConversionError("bit_width is not a scalar", f"{node.op_type} {where}")
        bits = float(bits_a.item())
        signed, narrow = bool(attrs.get("signed", 1)), bool(attrs.get("narrow", 0))
        rounding = attrs.get("rounding_mode", b"ROUND")
        rounding = rounding.decode() if isinstance(rounding, bytes) else str(rounding)
    axis, flat_scale, flat_zp = _per_axis(scale, zero_point, shape, f"{node.op_type} {where}")
    return QuantizedTensor(
        node=node.name,
        op_type=node.op_type,
        tensor=x,
        output=node.output[0],
        role=_role(x, node.output[0], constants, consumers, graph_inputs),
        bit_width=bits,
        signed=signed,
        narrow=narrow,
        rounding_mode=rounding,
        scale=flat_scale,
        zero_point=flat_zp,
        axis=axis,
        shape=shape,
        bipolar=bipolar,
    )


def _per_axis(
    scale: np.ndarray, zero_point: np.ndarray, shape: tuple | None, where: str
) -> tuple[int | None, np.ndarray, np.ndarray]:
    """The axis along which scale / zero point vary (None: one value), and their flat values."""
    varying = [a for a in (scale, zero_point) if a.size > 1]
    if not varying:
        return None, scale.reshape(1), zero_point.reshape(1)
    rank = len(shape) if shape is not None else max(a.ndim for a in varying)
    axes = set()
    for a in varying:
        dims = [i for i, d in enumerate(a.shape) if d != 1]
        if len(dims) != 1:
            raise ConversionError(
                f"quantization parameters of shape {a.shape} vary along more than one axis",
                where,
            )
        axes.add(rank - a.ndim + dims[0])
    if len(axes) != 1:
        raise ConversionError("scale and zero point vary along different axes", where)
    (axis,) = axes
    count = max(a.size for a in varying)
    return axis, _flat(scale, count), _flat(zero_point, count)


def _flat(a: np.ndarray, count: int) -> np.ndarray:
    return np.broadcast_to(a.reshape(-1), (count,)).copy() if a.size == 1 else a.reshape(-1)


def _role(x, y, constants, consumers, graph_inputs) -> str:
    if x in graph_inputs:
        return INPUT
    if x not in constants:
        return ACTIVATION
    uses = consumers.get(y, [])
    if uses and all((n.op_type, i) in _BIAS_SLOTS or n.op_type == "Add" for n, i in uses):
        return BIAS
    return WEIGHT


def _constants(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    values = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            values[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    return values


def _shapes(graph: onnx.GraphProto) -> dict[str, tuple[int | str, ...]]:
    shapes: dict[str, tuple[int | str, ...]] = {}
    for vi in (*graph.input, *graph.value_info, *graph.output):
        if vi.type.tensor_type.HasField("shape"):
            dims = vi.type.tensor_type.shape.dim
            shapes[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else d.dim_param or "?"
                                    for d in dims)  # fmt: skip
    for t in graph.initializer:
        shapes[t.name] = tuple(t.dims)
    return shapes
