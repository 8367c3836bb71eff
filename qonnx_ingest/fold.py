"""Constant folding and shared-constant bookkeeping in time linear in the graph.

qonnx's ``FoldConstantsFiltered`` decides the same thing per node, but through ModelWrapper
lookups that scan the whole graph (``get_initializer``, ``get_tensor_shape``) and one shape
inference plus a full cleanup per pass: minutes on a 2,000-operator model. Here the indexes
are built once, each foldable node runs once in onnxruntime (as qonnx's ``execute_node``
runs it), and its outputs become initializers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.passes import PassResult
from qonnx_ingest.quant import QUANT_OP_TYPES

# Never folded: folding a quantizer would replace it by its output and lose the annotation.
PRESERVED_OP_TYPES = QUANT_OP_TYPES | {"QuantizeLinear", "DequantizeLinear"}
# Random ops have no one value to fold to.
_NONDETERMINISTIC = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
     "Bernoulli"}
)  # fmt: skip

NodeFilter = Callable[[onnx.NodeProto, dict[str, onnx.ValueInfoProto]], bool]


def static_dims(info: onnx.ValueInfoProto | None) -> list[int] | None:
    """The shape of a tensor whose every dimension is a positive number, else None."""
    if info is None or not info.type.tensor_type.HasField("shape"):
        return None
    dims = info.type.tensor_type.shape.dim
    if not dims or not all(d.HasField("dim_value") and d.dim_value > 0 for d in dims):
        return None
    return [d.dim_value for d in dims]


def fold_constants(model: onnx.ModelProto) -> PassResult:
    """Fold, in one pass in node order, every node computed from initializers only (and
    Shape of a statically shaped tensor), except quantizers; True if anything folded.

    The graph must be sorted and its shapes inferred. Like qonnx's pass, a node with an absent
    optional input is left alone.
    """
    graph = model.graph
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    inits = {t.name: t for t in graph.initializer}
    values: dict[str, np.ndarray] = {}
    infos = {v.name: v for v in (*graph.input, *graph.value_info, *graph.output)}
    outputs = {v.name for v in graph.output}
    kept: list[onnx.NodeProto] = []
    folded = False
    for node in graph.node:
        produces_output = any(name in outputs for name in node.output)
        result = None if produces_output else _fold(node, inits, values, infos, opset)
        if result is None:
            kept.append(node)
            continue
        for name, value in zip(node.output, result, strict=True):
            values[name] = value
            inits[name] = numpy_helper.from_array(value, name)
            graph.initializer.append(inits[name])
        folded = True
    if folded:
        del graph.node[:]
        graph.node.extend(kept)
    return model, folded


def _fold(node, inits, values, infos, opset) -> list[np.ndarray] | None:
    if node.op_type in PRESERVED_OP_TYPES or node.op_type in _NONDETERMINISTIC:
        return None
    if node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type == "Shape" and node.input and node.input[0] not in inits:
        dims = static_dims(infos.get(node.input[0]))
        if dims is None:
            return None  # a symbolic dimension would be baked in as 0
        return [_shape_of(node, dims)]
    if not node.input or not all(name in inits for name in node.input):
        return None
    feeds = {}
    for name in node.input:
        if name not in values:
            values[name] = numpy_helper.to_array(inits[name])
        feeds[name] = values[name]
    return _run_node(node, feeds, infos, opset)


def _shape_of(node: onnx.NodeProto, dims: list[int]) -> np.ndarray:
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    start, end = attrs.get("start", 0), attrs.get("end")
    return np.array(dims[start:end], dtype=np.int64)


def _run_node(node, feeds: dict[str, np.ndarray], infos, opset) -> list[np.ndarray]:
    """One node in its own onnxruntime session, as qonnx's ``execute_node`` runs it."""
    import onnxruntime as ort

    inputs = [
        helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(value.dtype), list(value.shape)
        )
        for name, value in feeds.items()
    ]
    outputs = []
    for name in node.output:
        info = infos.get(name)
        elem = info.type.tensor_type.elem_type if info is not None else 0
        if not elem:
            raise ValueError(f"no inferred type for {name!r}, output of {node.op_type} {node.name}")
        outputs.append(helper.make_tensor_value_info(name, elem, None))
    graph = helper.make_graph([node], "fold", inputs, outputs)
    tiny = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    tiny.ir_version = min(tiny.ir_version, 10)  # what onnxruntime 1.31 loads
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        tiny.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, feeds)


def share_equal_initializers(model: onnx.ModelProto) -> PassResult:
    """Make every use of equal constants (type, shape and bytes) read one initializer.

    Converters copy a constant per use (TFLite weights shared by many operators, per-node
    quantizer parameters); one copy per distinct value keeps the file the size of its weights.
    Downstream tools that edit parameters in place unshare first, as qonnx's cleanup does
    (GiveUniqueParameterTensors). Modified when an initializer was dropped.
    """
    graph = model.graph
    first: dict[tuple, str] = {}
    rename: dict[str, str] = {}
    protected = {v.name for v in (*graph.input, *graph.output)}
    for init in graph.initializer:
        if init.name in protected:
            continue
        key = _content_key(init)
        if key in first:
            rename[init.name] = first[key]
        else:
            first[key] = init.name
    if not rename:
        return model, False
    for node in graph.node:
        for k, name in enumerate(node.input):
            if name in rename:
                node.input[k] = rename[name]
    kept = [t for t in graph.initializer if t.name not in rename]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    kept_info = [v for v in graph.value_info if v.name not in rename]
    if len(kept_info) != len(graph.value_info):
        del graph.value_info[:]
        graph.value_info.extend(kept_info)
    return model, True


def _content_key(init: onnx.TensorProto) -> tuple:
    data = numpy_helper.to_array(init)
    digest = hashlib.blake2b(np.ascontiguousarray(data).tobytes(), digest_size=16).digest()
    return init.data_type, tuple(init.dims), digest
