"""The converted graph's element types checked against the TFLite file's, before finishing.

Every TFLite tensor's ONNX value must have the type ``elem_type`` gives it (a quantized
tensor a float on its grid, an unquantized int32 tensor int32), and no node may mix types
where its schema binds them to one. A converter that gets this wrong would otherwise write a
file onnxruntime refuses (a Concat bound to int32 and float) or, where a runtime tolerates the
mix, one that computes something else; here it is a ConversionError naming the tensor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import onnx
from onnx import TensorProto, helper

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.symbolic_dims import dynamic_dim_name
from tflite2qonnx.dtypes import FLOAT_TYPES, ONNX_TYPES
from tflite2qonnx.model import Tensor

_QUANTIZERS = ("Quant", "IntQuant")
INTEGER_ELEM_TYPES = frozenset(
    {TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16, TensorProto.UINT16,
     TensorProto.INT32, TensorProto.UINT32, TensorProto.INT64, TensorProto.UINT64}
)  # fmt: skip
# the TFLite types whose ONNX value has one known element type (not string, resource, ...)
_TYPED = frozenset({*FLOAT_TYPES, *ONNX_TYPES})


def elem_type(tensor: Tensor) -> int:
    """The ONNX element type of ``tensor``'s value in the graph, the one rule every converter
    follows: float for float32 / float16 and for any quantized integer tensor (its real values
    on the grid), TFLite's own type for the rest (an unquantized int32 shape stays int32);
    complex64 is float pairs [..., 2] (``ops.signal.complex_ops``)."""
    if tensor.dtype in FLOAT_TYPES or tensor.dtype == "complex64" or tensor.quant is not None:
        return TensorProto.FLOAT
    if tensor.dtype in ONNX_TYPES:
        return ONNX_TYPES[tensor.dtype]
    # string, resource, variant; int4 without a scale
    raise ConversionError(
        f"{tensor.dtype} tensors have no ONNX equivalent here",
        f"tensor {tensor.index} '{tensor.name}'",
    )


def check_element_types(
    graph: onnx.GraphProto,
    opset: int,
    values: Mapping[int, str],
    tensor: Callable[[int], Tensor],
) -> None:
    """Raise ConversionError where ``graph`` mixes element types or where the value of TFLite
    tensor ``idx`` (``values``: tensor index -> value name; ``tensor``: index -> Tensor) is
    not of the type ``elem_type`` gives it."""
    shadow = _standard_form(graph, opset)
    if shadow is None:
        return
    try:
        inferred = onnx.shape_inference.infer_shapes(shadow, check_type=True, strict_mode=True)
    except onnx.shape_inference.InferenceError as exc:
        _check_quantizer_inputs(graph, shadow, values, tensor)  # the likeliest, named better
        text = " ".join(str(exc).split())
        raise ConversionError(f"the converted graph mixes element types: {text}") from None
    g = inferred.graph
    types = {v.name: v.type.tensor_type.elem_type for v in (*g.input, *g.value_info, *g.output)}
    for idx, name in values.items():
        t = tensor(idx)
        want = elem_type(t) if t.dtype in _TYPED else None  # string and the like: no type
        have = types.get(name, TensorProto.UNDEFINED)
        if want is None or have == TensorProto.UNDEFINED or have == want:
            continue
        raise ConversionError(
            f"{_describe(idx, t)} is computed as {_name(have)} in the converted graph, where "
            f"its TFLite type makes it {_name(want)}"
        )


def _check_quantizer_inputs(
    graph: onnx.GraphProto,
    shadow: onnx.ModelProto,
    values: Mapping[int, str],
    tensor: Callable[[int], Tensor],
) -> None:
    """A quantizer reads real values: one on integers means an integer kernel's output was
    taken for a quantized tensor (an int32 SHAPE output that carries a scale). Named here by
    the TFLite tensor where the strict pass names only the node."""
    loose = onnx.shape_inference.infer_shapes(shadow, check_type=False, strict_mode=False).graph
    types = {v.name: v.type.tensor_type.elem_type for v in (*loose.input, *loose.value_info)}
    by_value = {name: idx for idx, name in values.items()}
    for node in graph.node:
        have = types.get(node.input[0], TensorProto.UNDEFINED) if node.input else None
        if node.op_type not in _QUANTIZERS or have not in (*INTEGER_ELEM_TYPES, TensorProto.BOOL):
            continue
        idx = by_value.get(node.output[0])
        what = f"quantizer {node.name}" if idx is None else _describe(idx, tensor(idx))
        raise ConversionError(
            f"{what} carries a scale, but the kernel that writes it computes plain "
            f"{_name(have)} values (TFLite ignores the scale there); not converted"
        )


def _describe(idx: int, t: Tensor) -> str:
    quantized = "quantized " if t.quant is not None else ""
    return f"tensor {idx} '{t.name}' ({quantized}{t.dtype})"


def _standard_form(graph: onnx.GraphProto, opset: int) -> onnx.ModelProto | None:
    """``graph`` without value_info (inference must find each type, not read it back) and with
    each quantizer as a Cast to float behind an IsInf, which requires a float input as a
    Quant does; None when other custom-domain nodes leave the types unknown."""
    if any(_custom_inside(a.g) for n in graph.node for a in n.attribute if a.HasField("g")):
        return None
    nodes = []
    for node in graph.node:
        if node.domain not in ("", "ai.onnx"):
            if node.op_type not in _QUANTIZERS:
                return None
            x, y = node.input[0], node.output[0]
            check = f"{node.name} (a quantizer: its input must be float)"
            nodes.append(helper.make_node("IsInf", [x], [f"{y}__float_input"], name=check))
            nodes.append(helper.make_node("Cast", [x], [y], to=TensorProto.FLOAT))
        else:
            nodes.append(node)
    # types only: the graph is still in TFLite's layout (the layout pass comes after), so its
    # shapes do not agree yet; initializers become shapeless inputs, which keeps every shape
    # unknown and every type known
    inputs = [_typed(v.name, v.type.tensor_type.elem_type) for v in graph.input]
    inputs += [_typed(init.name, init.data_type) for init in graph.initializer]
    outputs = [_typed(v.name, v.type.tensor_type.elem_type) for v in graph.output]
    shadow = helper.make_graph(nodes, graph.name, inputs, outputs)
    return helper.make_model(shadow, opset_imports=[helper.make_opsetid("", opset)])


def _typed(name: str, elem_type: int) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, None)


def _custom_inside(graph: onnx.GraphProto) -> bool:
    """Whether an If / Loop body holds custom-domain nodes (a WHILE body's Quants)."""
    return any(
        n.domain not in ("", "ai.onnx")
        or any(_custom_inside(a.g) for a in n.attribute if a.HasField("g"))
        for n in graph.node
    )


def _name(elem_type: int) -> str:
    return TensorProto.DataType.Name(elem_type).lower()


def refuse_complex_boundary(tensors: Iterable[Tensor], what: str) -> None:
    """Complex tensors stay inside the graph (``ops.signal.complex_ops``): users feed and read real
    arrays, which a [real, imag] pair would silently not be."""
    for t in tensors:
        if t.dtype == "complex64":
            raise ConversionError(
                f"complex64 tensor {t.index} '{t.name}' is a {what}; the converted graph keeps "
                "complex values inside (as [real, imag] pairs), so it cannot feed or return one"
            )


def tensor_value_info(name: str, tensor: Tensor) -> onnx.ValueInfoProto:
    """A graph input / output: the tensor's ONNX type, a dynamic dim named after it."""
    elem = elem_type(tensor)
    dims = [dynamic_dim_name(name, k) if d < 0 else d for k, d in enumerate(tensor.shape_signature)]
    if tensor.dtype == "complex64":  # [real, imag] on a last axis
        dims.append(2)
    return helper.make_tensor_value_info(name, elem, dims)
