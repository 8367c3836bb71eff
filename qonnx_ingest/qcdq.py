"""Lowering QONNX to QCDQ (QuantizeLinear -> Clip -> DequantizeLinear) for runtimes without
the Quant op, onnxruntime above all.

Activation quantizers go through qonnx's ``QuantToQCDQ`` rule (written out in qcdq_rewrite,
qonnx's own pass for what it leaves). It takes only zero-point-free, 2-8 bit, round-half-even
Quants; two cases it leaves are lowered here because QCDQ computes them exactly as well, up to
ties:

- a non-zero zero point: ``s * (sat(round(x / s) + z) - z)`` equals Quant's
  ``s * (round(clip(x / s + z)) - z)`` except where ``x / s`` is exactly half-way;
- HALF_UP rounding (TFLite's): QuantizeLinear rounds ties to even, the one place they differ.

Such tie differences are listed in one warning (``strict`` refuses them). Quantizers of
constants (weights, biases) are stored as integers behind a DequantizeLinear, which is exact
at any width up to 32 bits. Activations of 9 to 16 bits (TFLite's 16x8 models) are stored as
(u)int16, which QuantizeLinear takes from opset 21: such a model is first upgraded to opset 21
with onnx's version converter; so is one with blockwise constant scales, which become
opset 21's blocked DequantizeLinear (qcdq_blocked). Anything else (an activation wider than
16 bits, a bipolar activation) cannot be lowered and is an error naming the node.
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from qonnx_ingest.errors import ConversionError, ConversionWarning
from qonnx_ingest.finish import QUANT_OP_TYPES, check_model, remove_unused_tensors, sort_nodes
from qonnx_ingest.names import name_list
from qonnx_ingest.passes import run_passes
from qonnx_ingest.qcdq_blocked import lower_blocked
from qonnx_ingest.qcdq_rewrite import left_quants, lower_quants
from qonnx_ingest.qcdq_unsigned import store_int8_as_uint8
from qonnx_ingest.quant_info import (
    ACTIVATION,
    INPUT,
    QuantizedTensor,
    constant_quantizer_output,
    quantized_tensors,
)
from qonnx_ingest.quant_lowering import lower_quants as lower_to_standard_ops

# QuantizeLinear rounds half to even: exact for these, different at ties only for these.
_EXACT_ROUNDING = ("ROUND", "HALF_EVEN")
_TIE_ROUNDING = ("HALF_UP", "HALF_DOWN")
# QuantizeLinear stores activations in 8 bits, and in 16 from this opset on
_WIDE_OPSET = 21


def to_qcdq(model: onnx.ModelProto, strict: bool = False) -> onnx.ModelProto:
    """A QCDQ copy of ``model``; ``model`` is not changed."""
    model = prepare(model, strict)
    try:
        model = _quant_to_qcdq(model)
    except Exception as exc:  # qonnx's rewriter raises bare exceptions
        raise ConversionError(f"qonnx QuantToQCDQ failed: {type(exc).__name__}: {exc}") from exc
    left = [n for n in model.graph.node if n.op_type in QUANT_OP_TYPES]
    if left:  # Trunc, or a node qonnx declined that the checks above accepted: never ship it
        node = left[0]
        raise ConversionError(
            "Trunc has no QCDQ form" if node.op_type == "Trunc"
            else "qonnx QuantToQCDQ did not lower it",
            f"{node.op_type} {node.name or node.output[0]}",
        )  # fmt: skip
    store_int8_as_uint8(model)  # what a default onnxruntime session loads at opset >= 21
    _drop_qonnx_domain(model)
    check_model(model)
    return model


def prepare(model: onnx.ModelProto, strict: bool = False) -> onnx.ModelProto:
    """A copy of ``model`` with what qonnx's QuantToQCDQ does not take lowered here: constant
    quantizers, zero points, 16-bit activations, tie-rounding modes (set to ROUND, after the
    warning), and the activations QuantizeLinear cannot hold written as standard ops."""
    model = lower_blocked(copy.deepcopy(model), _upgraded)
    quantized = quantized_tensors(model)
    activations = [q for q in quantized if q.role in (ACTIVATION, INPUT)]
    standard = {q.output for q in activations if _needs_standard_ops(q)}
    standard |= {n.output[0] for n in model.graph.node if n.op_type == "FloatQuant"}  # no QDQ
    if any(q.integer_bits > 8 for q in activations if q.output not in standard):
        model = _upgraded(model, _WIDE_OPSET)
        quantized = quantized_tensors(model)
    graph = model.graph
    nodes = {n.output[0]: n for n in graph.node if n.output}  # outputs are unique, names may not be
    constants = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    tied = []
    replaced: dict[str, list] = {}  # by the quantizer's output: one rebuild of the node list
    for q in quantized:
        node = nodes[q.output]
        if q.role not in (ACTIVATION, INPUT):
            replaced[q.output] = _dequantized_constant(model, node, q, constants)
            continue
        if q.output in standard:
            continue
        if q.rounding_mode not in _EXACT_ROUNDING or np.any(q.zero_point != 0):
            tied.append(q.node or q.output)
        if np.any(q.zero_point != 0) or q.integer_bits > 8:  # outside qonnx's rule
            replaced[q.output] = _qdq_nodes(q)
        else:
            _set_attribute(node, "rounding_mode", "ROUND")
            node.op_type = "Quant"
    if tied:
        message = (
            f"{len(tied)} activation quantizers round ties differently in QCDQ (QuantizeLinear "
            f"rounds x/scale half to even before adding the zero point): {name_list(tied)}"
        )
        if strict:
            raise ConversionError(message + " (--strict refuses them)", "qcdq")
        warnings.warn(message, ConversionWarning, 3)
    if replaced:
        _replace_nodes(graph, replaced)
    if standard:
        model = lower_to_standard_ops(model, only=standard)
    return sort_nodes(model)[0]


def _quant_to_qcdq(model: onnx.ModelProto) -> onnx.ModelProto:
    """qonnx's QuantToQCDQ: our linear form of its rule (qcdq_rewrite), then, only for a Quant
    the rule leaves there, qonnx's own rewrite; unused tensors dropped."""
    model, _ = lower_quants(model)
    if left_quants(model) == 0:  # every Quant lowered: qonnx's pass would match none
        return remove_unused_tensors(model)[0]
    return _qonnx_quant_to_qcdq(model)


def _qonnx_quant_to_qcdq(model: onnx.ModelProto) -> onnx.ModelProto:
    """qonnx's QuantToQCDQ: its onnxscript rewrite rules, then unused tensors dropped.

    qonnx's own ``apply`` wraps the result in a ModelWrapper (a shape check per tensor) and
    cleans it up with passes that scan the graph per node: seconds on a MobileNet. Our models
    already have opset >= 13, so its opset upgrades never apply.
    """
    from onnxscript import ir
    from onnxscript.rewriter import rewrite
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.qonnx_to_qcdq import QuantToQCDQ

    from qonnx_ingest.compat.qonnx import rewrite_rule_set

    transformation = QuantToQCDQ()
    rules = rewrite_rule_set(transformation)
    if rules is None:  # another qonnx version: its public (slower) path
        return ModelWrapper(model).transform(transformation).model
    rewritten = ir.to_proto(rewrite(ir.from_proto(model), pattern_rewrite_rules=rules))
    return run_passes([sort_nodes, remove_unused_tensors], rewritten)[0]


def _needs_standard_ops(q: QuantizedTensor) -> bool:
    """Whether ``q`` is written as the standard ops that compute it (Div, Add, Clip, the
    rounding, Sub, Mul) because no QuantizeLinear holds it: FLOOR / CEIL / UP / DOWN rounding
    differs from QuantizeLinear's on every non-integer value, and QuantizeLinear stores
    activations in 8 or 16 bits (the exact integer kernels of ``--bit-exact`` and TFLite's
    16x8 models round 32-bit accumulators this way). Bipolar and fractional widths have
    neither form."""
    where = f"{q.op_type} {q.node or q.output}"
    if q.bipolar:
        raise ConversionError("a bipolar activation has no QCDQ form", where)
    bits = q.integer_bits
    if bits is None:
        raise ConversionError(
            f"{q.bit_width:g}-bit activation cannot be lowered: QCDQ stores whole-bit integers",
            where,
        )
    exact_rounding = q.rounding_mode in (*_EXACT_ROUNDING, *_TIE_ROUNDING)
    return not exact_rounding or not 2 <= bits <= 16


def _upgraded(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    """``model`` at ``opset`` (onnx's version converter; QONNX's own domain is left as is)."""
    current = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if current >= opset:
        return model
    from onnx import version_converter

    try:
        upgraded = version_converter.convert_version(model, opset)
    except Exception as exc:  # the converter raises bare RuntimeErrors
        raise ConversionError(
            f"16-bit activations need QuantizeLinear from opset {opset}, and onnx's version "
            f"converter could not upgrade the model from opset {current}: {exc}",
            "qcdq",
        ) from exc
    upgraded.ir_version = helper.find_min_ir_version_for(upgraded.opset_import, ignore_unknown=True)
    return upgraded


def _storage(q: QuantizedTensor) -> tuple[int, type]:
    """QuantizeLinear's storage type for ``q``: 8 or 16 bits, signed as the quantizer is."""
    if q.integer_bits is not None and q.integer_bits > 8:
        return (TensorProto.INT16, np.int16) if q.signed else (TensorProto.UINT16, np.uint16)
    return (TensorProto.INT8, np.int8) if q.signed else (TensorProto.UINT8, np.uint8)


def _qdq_nodes(q: QuantizedTensor) -> list:
    """QuantizeLinear -> [Clip] -> DequantizeLinear for an activation with a zero point or
    wider than 8 bits (qonnx's rule takes neither)."""
    proto_type, np_type = _storage(q)
    base = q.node or q.output
    scale = _param(f"{base}_qdq_scale", q.scale.astype(np.float32), q.per_axis)
    zero = _param(f"{base}_qdq_zero_point", q.zero_point.astype(np_type), q.per_axis)
    axis = {"axis": q.axis} if q.per_axis else {}
    quantized = f"{base}_qdq_q"
    nodes = [
        helper.make_node("Constant", [], [scale.name], name=f"{base}_qdq_scale", value=scale),
        helper.make_node("Constant", [], [zero.name], name=f"{base}_qdq_zp", value=zero),
        helper.make_node(
            "QuantizeLinear",
            [q.tensor, scale.name, zero.name],
            [quantized],
            name=f"{base}_quantize",
            **axis,
        ),  # fmt: skip
    ]
    lo, hi = q.storage_range
    info = np.iinfo(np_type)
    if (lo, hi) != (info.min, info.max):
        # onnxruntime has no 16-bit Clip kernel (its fallback, Clip's function body, needs a
        # 16-bit Where it lacks too): 16-bit storage is clipped as int32 and cast back.
        wide = proto_type in (TensorProto.INT16, TensorProto.UINT16)
        clip_type = np.int32 if wide else np_type
        bounds = [numpy_helper.from_array(np.array(v, clip_type), f"{base}_qdq_{k}")
                  for k, v in (("min", lo), ("max", hi))]  # fmt: skip
        nodes += [helper.make_node("Constant", [], [t.name], name=t.name, value=t) for t in bounds]
        if wide:
            nodes.append(
                helper.make_node("Cast", [quantized], [f"{base}_qdq_q32"],
                                 name=f"{base}_qdq_to_int32", to=TensorProto.INT32)
            )  # fmt: skip
            quantized = f"{base}_qdq_q32"
        clipped = f"{base}_qdq_clipped"
        nodes.append(
            helper.make_node(
                "Clip", [quantized, *(t.name for t in bounds)], [clipped], name=f"{base}_clip"
            )  # fmt: skip
        )
        quantized = clipped
        if wide:
            nodes.append(
                helper.make_node("Cast", [clipped], [f"{base}_qdq_clipped16"],
                                 name=f"{base}_qdq_to_int16", to=proto_type)
            )  # fmt: skip
            quantized = f"{base}_qdq_clipped16"
    nodes.append(
        helper.make_node(
            "DequantizeLinear",
            [quantized, scale.name, zero.name],
            [q.output],
            name=f"{base}_dequantize",
            **axis,
        )  # fmt: skip
    )
    return nodes


def _dequantized_constant(
    model: onnx.ModelProto, node, q: QuantizedTensor, constants: dict[str, np.ndarray]
) -> list:
    """The quantizer's output on its constant, stored as integers behind a DequantizeLinear.

    Up to 8 bits the stored values and zero point are QuantizeLinear's (u)int8; wider ones
    are stored as int32 ``q - z`` with no zero point, which DequantizeLinear requires of int32.
    """
    base = q.node or q.output
    values = constant_quantizer_output(node, constants, model.graph).astype(np.float64)
    shape = [1] * values.ndim
    if q.per_axis:
        shape[q.axis] = -1
    scale = q.scale.reshape(shape)
    zero = q.zero_point.reshape(shape)
    stored = np.round(values / scale + zero)
    bits = q.integer_bits or 32
    if q.bipolar or bits <= 8:
        proto_type, np_type = _storage(q) if not q.bipolar else (TensorProto.INT8, np.int8)
        stored_t = stored.astype(np_type)
        zero_t = q.zero_point.astype(np_type)
    else:
        centred = stored - zero
        info = np.iinfo(np.int32)
        if centred.size and (centred.min() < info.min or centred.max() > info.max):
            raise ConversionError(
                f"{q.bit_width:g}-bit constant does not fit DequantizeLinear's int32",
                f"{q.op_type} {base}",
            )
        stored_t = centred.astype(np.int32)
        zero_t = np.zeros_like(q.zero_point, dtype=np.int32)
    tensors = [
        numpy_helper.from_array(stored_t, f"{base}_int"),
        _param(f"{base}_dq_scale", q.scale.astype(np.float32), q.per_axis),
        _param(f"{base}_dq_zero_point", zero_t, q.per_axis),
    ]
    model.graph.initializer.extend(tensors)
    axis = {"axis": q.axis} if q.per_axis else {}
    return [
        helper.make_node(
            "DequantizeLinear",
            [t.name for t in tensors],
            [q.output],
            name=f"{base}_dequantize",
            **axis,
        )  # fmt: skip
    ]


def _param(name: str, values: np.ndarray, per_axis: bool) -> onnx.TensorProto:
    return numpy_helper.from_array(values if per_axis else values.reshape(()), name)


def _replace_nodes(graph: onnx.GraphProto, replaced: dict[str, list]) -> None:
    """Each node whose first output is a key of ``replaced`` becomes the nodes listed there."""
    nodes = []
    for node in graph.node:
        new = replaced.get(node.output[0]) if node.output else None
        if new is None:
            copy_ = onnx.NodeProto()
            copy_.CopyFrom(node)
            nodes.append(copy_)
        else:
            nodes.extend(new)
    del graph.node[:]
    graph.node.extend(nodes)


def _set_attribute(node, name: str, value: str) -> None:
    for attr in node.attribute:
        if attr.name == name:
            attr.s = value.encode()
            return
    node.attribute.append(helper.make_attribute(name, value))


def _drop_qonnx_domain(model: onnx.ModelProto) -> None:
    """No QONNX op is left, so the model no longer imports the QONNX domain."""
    used = {n.domain for n in model.graph.node}
    keep = [o for o in model.opset_import if o.domain in ("", "ai.onnx") or o.domain in used]
    del model.opset_import[:]
    model.opset_import.extend(keep)
