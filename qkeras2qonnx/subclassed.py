"""Subclassed Keras models as Functional ones, on the same layer objects, so they can be cloned.

``clone_model`` (and so the strip step) takes Sequential and Functional models only; research
code writes ``keras.Model`` subclasses. Their topology is recovered from the call itself:

* in memory, the Python ``call`` runs on symbolic Keras inputs, which records every sublayer
  call as a node of a new Functional model;
  A subclassed model or a user-defined layer holding layers, called from that ``call``, is
  traced through as well (``_inlined``): its own ``call`` runs in place of the layer call, so
  its sublayers become nodes (Keras cannot clone a model holding a subclassed one);
* loaded from a SavedModel, the Python ``call`` is gone and Keras revives a traced function.
  Its ops carry the sublayers' name scopes (``net/conv/Conv2D``), so each op belongs to the
  sublayer it was traced in; a tensor that one sublayer's ops produce and another's read is an
  edge. The sublayers (revived from their configurations, QKeras quantizers included) are then
  called on symbolic inputs in that order.

Either way the rebuilt model must compute exactly what the original computes on seeded inputs,
or the conversion stops: a topology read wrongly is never converted.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from qkeras2qonnx.backend import keras
from qonnx_ingest.errors import ConversionError

_PASS_THROUGH = frozenset({"Identity", "IdentityN", "NoOp", "Const"})
_CALLS = frozenset({"StatefulPartitionedCall", "PartitionedCall"})
_SKIPPED = frozenset({"Placeholder", *_PASS_THROUGH})
_CHECK_SAMPLES = 4
# Layers of these packages are converted by rule, never traced through.
_LIBRARIES = frozenset({"keras", "tf_keras", "qkeras", "hgq", "tensorflow"})


def as_functional(model: Any, where: str = "") -> Any:
    """``model`` itself when Keras can clone it, else the Functional model it computes.

    Keras's cloning cannot rebuild a subclassed model or a user-defined layer holding layers
    (it loops forever on the former): a Functional or Sequential model calling one directly is
    replayed node by node with that layer replaced by the Functional model of its call."""
    where = where or model.name
    if _is_subclassed(model):
        model = _traced(model, where)
    if any(_is_container(layer) for layer in getattr(model, "layers", [])):
        model = _replayed(model, where)
    return model


def _is_subclassed(model: Any) -> bool:
    return not isinstance(model, keras().Sequential) and not getattr(
        model, "_is_graph_network", True
    )


def _replayed(model: Any, where: str) -> Any:
    """The nodes of ``model`` called again on new inputs, in its order and wiring, each
    container layer's node calling that layer's stand-in (``_stand_in``); checked against
    ``model``."""
    import tensorflow as tf

    k = keras()
    if not getattr(model, "_is_graph_network", False):
        raise ConversionError(
            "a Sequential model holding a subclassed model or custom layer must know its input "
            "shape (an Input first, or build it) to be rebuilt",
            where,
        )
    inputs = [
        k.Input(shape=t.shape[1:], dtype=t.dtype, name=name)
        for t, name in zip(model.inputs, model.input_names, strict=True)
    ]
    counts = model._tensor_usage_count
    tensors = {str(id(x)): [y] * counts[str(id(x))] for x, y in zip(model.inputs, inputs)}
    stand_ins: dict[int, Any] = {}
    try:
        for depth in sorted(model._nodes_by_depth, reverse=True):
            for node in model._nodes_by_depth[depth]:
                if node.is_input or any(i not in tensors for i in node.flat_input_ids):
                    continue
                layer = node.layer
                if _is_container(layer):
                    if id(layer) not in stand_ins:
                        stand_ins[id(layer)] = _stand_in(layer, node, f"{where}/{layer.name}")
                    flat = [tensors[i].pop() for i in node.flat_input_ids]
                    outputs = stand_ins[id(layer)](flat[0] if len(flat) == 1 else flat)
                else:
                    args, kwargs = node.map_arguments(tensors)
                    outputs = layer(*args, **kwargs)
                for i, y in zip(node.flat_output_ids, tf.nest.flatten(outputs), strict=True):
                    tensors[i] = [y] * counts[i]
        outputs = [tensors[str(id(x))].pop() for x in model.outputs]
        rebuilt = k.Model(inputs, outputs[0] if len(outputs) == 1 else outputs, name=model.name)
    except ConversionError:
        raise
    except Exception as exc:
        raise ConversionError(
            f"cannot rebuild the model around its subclassed or custom layers: "
            f"{type(exc).__name__}: {exc}",
            where,
        ) from exc
    _check_same(model, rebuilt, where)
    return rebuilt


def _stand_in(layer: Any, node: Any, where: str) -> Any:
    """A Functional model computing what ``layer`` computes at ``node``: a revived SavedModel
    one's traced call, else its Python ``call`` on inputs shaped as the node's, with the
    node's other arguments (``training``, constants) kept."""
    k = keras()
    inputs = [k.Input(shape=t.shape[1:], dtype=t.dtype) for t in node.keras_inputs]
    if _is_revived(layer):
        return _traced(layer, where, inputs)
    feed: dict[str, list[Any]] = {}
    for i, x in zip(node.flat_input_ids, inputs, strict=True):
        feed.setdefault(i, []).insert(0, x)  # map_arguments pops from the end
    args, kwargs = node.map_arguments(feed)
    try:
        with _inlined(layer):
            outputs = _plain_call(layer)(*args, **kwargs)
        return k.Model(inputs[0] if len(inputs) == 1 else inputs, outputs, name=layer.name)
    except Exception as exc:
        raise ConversionError(
            f"cannot trace the layer's call into layers: {type(exc).__name__}: {exc}", where
        ) from exc


def _traced(model: Any, where: str, inputs: list[Any] | None = None) -> Any:
    """The Functional model of a subclassed one's call (or a revived layer's), checked against
    the model; ``inputs`` default to the shapes of the batch it was first called on."""
    k = keras()
    inputs = inputs or _symbolic_inputs(model, where)
    try:
        if _is_revived(model):
            outputs = _replay_trace(model, inputs, where)
        else:
            with _inlined(model):
                outputs = model.call(inputs[0] if len(inputs) == 1 else inputs)
        rebuilt = k.Model(inputs, outputs, name=model.name)
    except ConversionError:
        raise
    except Exception as exc:
        raise ConversionError(
            f"cannot trace the subclassed model's call into layers: {type(exc).__name__}: {exc}",
            where,
        ) from exc
    _check_same(model, rebuilt, where)
    return rebuilt


@contextmanager
def _inlined(model: Any) -> Iterator[None]:
    """While ``model``'s call is traced, each nested subclassed model or user-defined layer
    holding layers (an attribute of ``model``, at any depth) is replaced by its own ``call``."""
    patched: list[tuple[Any, str, Any]] = []

    def patch(owner: Any) -> None:
        for name, value in list(vars(owner).items()):
            if _is_container(value):
                patch(value)
                object.__setattr__(owner, name, _plain_call(value))
                patched.append((owner, name, value))

    try:
        patch(model)
        yield
    finally:
        for owner, name, value in reversed(patched):
            object.__setattr__(owner, name, value)


def _is_container(value: Any) -> bool:
    k = keras()
    if not isinstance(value, k.layers.Layer):
        return False
    if isinstance(value, k.Model):
        return _is_subclassed(value)
    if type(value).__module__.split(".")[0] in _LIBRARIES and not _is_revived(value):
        return False
    return any(True for _ in value._flatten_layers(include_self=False, recursive=False))


def _plain_call(layer: Any) -> Any:
    """``layer.call`` given only the keywords it takes (``training``, ``mask``)."""
    accepted = inspect.signature(layer.call).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())

    def call(*args: Any, **kwargs: Any) -> Any:
        kept = {k: v for k, v in kwargs.items() if takes_any or k in accepted}
        return layer.call(*args, **kept)

    return call


def _is_revived(model: Any) -> bool:
    """Loaded from a SavedModel without its Python class: the call is a traced function."""
    return ".saved_model.load" in type(model).__module__


def _symbolic_inputs(model: Any, where: str) -> list[Any]:
    spec = getattr(model, "_saved_model_inputs_spec", None)
    if spec is None:
        raise ConversionError(
            "a subclassed model that was never called has no input shape: call it once on a "
            "batch (or build it) before converting",
            where,
        )
    specs = list(spec) if isinstance(spec, list | tuple) else [spec]
    if not all(hasattr(s, "shape") for s in specs):
        raise ConversionError(
            f"subclassed model inputs {spec!r}: only tensors are supported", where
        )
    return [keras().Input(shape=s.shape[1:], dtype=s.dtype, name=s.name) for s in specs]


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
        graph = graph._get_function(ops[0].get_attr("f").name).graph


def _replay_trace(model: Any, inputs: list[Any], where: str) -> Any:
    """Call the revived sublayers on ``inputs`` in the order and wiring of the traced call."""
    graph = _call_graph(model, inputs)
    children = {
        layer.name: layer for layer in model._flatten_layers(include_self=False, recursive=False)
    }
    data = [op.outputs[0] for op in graph.get_operations() if op.type == "Placeholder"]
    data = [t for t in data if t.dtype != _resource()][: len(inputs)]
    source: dict[str, Any] = {t.name: ("input", i) for i, t in enumerate(data)}
    order: list[str] = []
    reads: dict[str, list[str]] = {}  # sublayer -> tensors of other owners it reads, in order
    for op in graph.get_operations():
        owner = _owner(op.name, model.name, children)
        if owner is None:
            if op.type in _PASS_THROUGH and op.inputs and op.inputs[0].name in source:
                source[op.outputs[0].name] = source[op.inputs[0].name]
            elif op.type not in _SKIPPED:
                raise ConversionError(
                    f"op '{op.name}' ({op.type}) in the subclassed model's own call, between its "
                    "layers: only calls of its layers can be rebuilt",
                    where,
                )
            continue
        if owner not in reads:
            order.append(owner)
            reads[owner] = []
        for t in op.inputs:
            origin = source.get(t.name)
            if origin is not None and origin != ("layer", owner) and t.name not in reads[owner]:
                reads[owner].append(t.name)
        for t in op.outputs:
            source[t.name] = ("layer", owner)
    called: dict[str, Any] = {}  # sublayer -> its symbolic output
    handed_on: dict[str, str] = {}  # sublayer -> the one tensor of it that others read
    for owner in order:
        args = []
        for name in reads[owner]:
            kind, who = source[name]
            if kind == "input":
                args.append(inputs[who])
                continue
            if handed_on.setdefault(who, name) != name:
                raise ConversionError(
                    f"layer '{who}' hands on more than one tensor: cannot rebuild its call", where
                )
            args.append(called[who])
        if not args:
            raise ConversionError(f"layer '{owner}' reads no input in the traced call", where)
        called[owner] = children[owner](args[0] if len(args) == 1 else args)
    results = []
    for t in graph.outputs:
        origin = source.get(t.name)
        if origin is None or origin[0] != "layer":
            raise ConversionError(f"output '{t.name}' does not come from a layer", where)
        results.append(called[origin[1]])
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


def _check_same(model: Any, rebuilt: Any, where: str) -> None:
    """The rebuilt model computes, bit for bit, what the original does on seeded inputs."""
    rng = np.random.default_rng(0)
    shapes = [tuple(d or 2 for d in t.shape) for t in rebuilt.inputs]
    xs = [rng.uniform(-2, 2, s).astype(np.float32) for s in shapes]
    for _ in range(_CHECK_SAMPLES):
        feed = xs[0] if len(xs) == 1 else xs
        ours = rebuilt(feed, training=False)
        theirs = model(feed, training=False)
        ours = ours if isinstance(ours, list | tuple) else [ours]
        theirs = theirs if isinstance(theirs, list | tuple) else [theirs]
        same = len(ours) == len(theirs) and all(
            np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(ours, theirs, strict=True)
        )
        if not same:
            raise ConversionError(
                "the layers traced from the subclassed model's call do not compute what the "
                "model computes: its topology cannot be recovered",
                where,
            )
        xs = [rng.uniform(-2, 2, s).astype(np.float32) for s in shapes]
