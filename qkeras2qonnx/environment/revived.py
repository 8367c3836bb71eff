"""Subclassed models revived from a SavedModel without their Python class, rebuilt from the
traced function Keras revives in place of their ``call``.

Its ops carry the sublayers' name scopes (``net/conv/Conv2D``), so each op belongs to the
sublayer it was traced in; a tensor that one sublayer's ops produce and another's read is an
edge. The sublayers (revived from their configurations, QKeras quantizers included) are then
called on symbolic inputs in that order. A raw op between them (a ``tf.reduce_mean`` over a
Deep Sets model's set axis) is called as its TensorFlow function (``raw_ops``); one without
a rule is refused by name.
"""

from __future__ import annotations

from typing import Any

from qkeras2qonnx.compat import keras as compat_keras
from qonnx_ingest.errors import ConversionError

_PASS_THROUGH = frozenset({"Identity", "IdentityN", "NoOp", "Const"})
_CALLS = frozenset({"StatefulPartitionedCall", "PartitionedCall"})
_SKIPPED = frozenset({"Placeholder", *_PASS_THROUGH})


def is_revived(model: Any) -> bool:
    """Loaded from a SavedModel without its Python class: the call is a traced function."""
    return ".saved_model.load" in type(model).__module__


def _call_graph(model: Any, inputs: list[Any]) -> Any:
    """The graph of the revived call, descending through the wrapping function calls."""
    import tensorflow as tf

    specs = [tf.TensorSpec(i.shape, i.dtype) for i in inputs]
    fn = tf.function(lambda *xs: model(xs[0] if len(xs) == 1 else list(xs), training=False))
    graph = fn.get_concrete_function(*specs).graph
    while True:
        ops = [
            op for op in graph.get_operations() if op.type not in {"Placeholder", *_PASS_THROUGH}
        ]
        if len(ops) != 1 or ops[0].type not in _CALLS:
            return graph
        graph = compat_keras.function_graph(graph, ops[0].get_attr("f").name)


def replay_trace(model: Any, inputs: list[Any], where: str) -> Any:
    """Call the revived sublayers on ``inputs`` in the order and wiring of the traced call; a
    raw op between them (``raw_ops.RAW_OPS``: a mean over a set, a relu, an add) is called as
    its TensorFlow function on the symbolic tensors, which Keras records as a layer."""
    from qkeras2qonnx.environment.raw_ops import RAW_OPS, constant, raw_call

    graph = _call_graph(model, inputs)
    children = {layer.name: layer for layer in compat_keras.flatten_layers(model, recursive=False)}
    data = [op.outputs[0] for op in graph.get_operations() if op.type == "Placeholder"]
    data = [t for t in data if t.dtype != _resource()][: len(inputs)]
    source: dict[str, Any] = {t.name: ("input", i) for i, t in enumerate(data)}
    units: list[tuple[str, Any]] = []  # ("layer", sublayer name) or ("raw", op), in call order
    reads: dict[str, list[str]] = {}  # sublayer -> tensors of other owners it reads, in order
    for op in graph.get_operations():
        owner = _owner(op.name, model.name, children)
        if owner is None:
            if op.type in _PASS_THROUGH and op.inputs and op.inputs[0].name in source:
                source[op.outputs[0].name] = source[op.inputs[0].name]
            elif op.type == "Const":
                source[op.outputs[0].name] = ("const", constant(op))
            elif op.type in RAW_OPS:
                units.append(("raw", op))
                source[op.outputs[0].name] = ("raw", op.outputs[0].name)
            elif op.type not in _SKIPPED:
                raise ConversionError(
                    f"op '{op.name}' ({op.type}) in the subclassed model's own call, between its "
                    "layers: no rule rebuilds it (qkeras2qonnx/environment/raw_ops.py)",
                    where,
                )
            continue
        if owner not in reads:
            units.append(("layer", owner))
            reads[owner] = []
        for t in op.inputs:
            origin = source.get(t.name)
            if origin is not None and origin != ("layer", owner) and t.name not in reads[owner]:
                reads[owner].append(t.name)
        for t in op.outputs:
            source[t.name] = ("layer", owner)
    called: dict[str, Any] = {}  # sublayer -> its symbolic output
    raw_values: dict[str, Any] = {}  # raw op output -> its symbolic value
    handed_on: dict[str, str] = {}  # sublayer -> the one tensor of it that others read

    def value(name: str) -> Any:
        kind, who = source[name]
        if kind == "input":
            return inputs[who]
        if kind in ("const", "raw"):
            return who if kind == "const" else raw_values[who]
        if handed_on.setdefault(who, name) != name:
            raise ConversionError(
                f"layer '{who}' hands on more than one tensor: cannot rebuild its call", where
            )
        return called[who]

    for kind, unit in units:
        if kind == "raw":
            args = [value(t.name) if t.name in source else None for t in unit.inputs]
            raw_values[unit.outputs[0].name] = raw_call(unit, args, where)
            continue
        args = [value(name) for name in reads[unit]]
        if not args:
            raise ConversionError(f"layer '{unit}' reads no input in the traced call", where)
        called[unit] = children[unit](args[0] if len(args) == 1 else args)
    results = []
    for t in graph.outputs:
        origin = source.get(t.name)
        if origin is None or origin[0] not in ("layer", "raw"):
            raise ConversionError(f"output '{t.name}' does not come from a layer", where)
        results.append(value(t.name))
    return results[0] if len(results) == 1 else results


def _owner(op_name: str, model_name: str, children: dict[str, Any]) -> str | None:
    """The sublayer whose name scope holds the op (scopes may start with the model's name)."""
    parts = op_name.split("/")
    if parts[0] == model_name and len(parts) > 2:
        parts = parts[1:]
    if len(parts) > 1 and parts[0] in children:
        return parts[0]
    return None


def _resource() -> Any:
    import tensorflow as tf

    return tf.resource
