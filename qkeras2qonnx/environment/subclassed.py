"""Subclassed Keras models as Functional ones, on the same layer objects, so they can be cloned.

``clone_model`` (and so the strip step) takes Sequential and Functional models only; research
code writes ``keras.Model`` subclasses. Their topology is recovered from the call itself:

* in memory, the Python ``call`` runs on symbolic Keras inputs, which records every sublayer
  call as a node of a new Functional model. A subclassed model or a user-defined layer holding
  layers, called from that ``call``, is traced through as well (``_inlined``): its own ``call``
  runs in place of the layer call, so its sublayers become nodes;
* loaded from a SavedModel, the Python ``call`` is gone: ``revived`` rebuilds it from the
  traced function's name scopes;
* a Functional or Sequential model calling such a layer directly (which Keras's cloning cannot
  rebuild) is replayed node by node, the layer replaced by the Functional model of its call;
* Keras 3 (qkeras-v3) likewise, given an input shape (``model.build``); a trace that would
  create weights (a layer Keras never built or never restored) is refused by name.

Every rebuilt model must compute exactly what the original computes on seeded inputs, or the
conversion stops: a topology read wrongly is never converted.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from qkeras2qonnx.compat import keras as compat_keras
from qkeras2qonnx.environment.backend import keras
from qkeras2qonnx.environment.revived import is_revived, replay_trace
from qonnx_ingest.errors import ConversionError

_CHECK_SAMPLES = 4
# Layers of these packages are converted by rule, never traced through (this package's own:
# keras3_compat's loading fixes of qkeras-v3 classes).
_LIBRARIES = frozenset(
    {"keras", "tf_keras", "qkeras", "hgq", "tensorflow", "tensorflow_model_optimization"}
    | {"qkeras2qonnx"}
)


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
    k = keras()
    if isinstance(model, k.Sequential) or not isinstance(model, k.Model):
        return False
    graph = compat_keras.is_graph_network(model)  # tf_keras
    if graph is not None:
        return not graph
    return not isinstance(model, compat_keras.functional_class())


def _replayed(model: Any, where: str) -> Any:
    """The nodes of ``model`` called again on new inputs, in its order and wiring, a container
    layer's node calling that layer's stand-in (``_StandIns``); checked against ``model``."""
    k = keras()
    graph = compat_keras.node_graph(model)  # a Keras 3 Sequential holds a Functional
    if graph is None or not getattr(graph, "inputs", None):
        raise ConversionError(
            "a Sequential model holding a subclassed model or custom layer must know its input "
            "shape (an Input first, or build it) to be rebuilt",
            where,
        )
    names = getattr(graph, "input_names", None) or [t.name for t in graph.inputs]
    inputs = [
        k.Input(shape=t.shape[1:], dtype=t.dtype, name=name)
        for t, name in zip(graph.inputs, names, strict=True)
    ]
    stand_ins = _StandIns(where)
    try:
        outputs = compat_keras.run_through_graph(graph, inputs, stand_ins.for_layer)
        outputs = list(outputs) if isinstance(outputs, list | tuple) else [outputs]
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


class _StandIns:
    """Each container layer's stand-in: a Functional model (named as the layer, so its layers
    keep their place in the paths) of a revived layer's traced call, or of its Python ``call``
    on inputs shaped as at its first node, with that node's other arguments kept."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.models: dict[int, Any] = {}

    def for_layer(self, layer: Any) -> Any:
        if not _is_container(layer):
            return layer

        def call(*args: Any, **kwargs: Any) -> Any:
            import tensorflow as tf

            flat = tf.nest.flatten((args, kwargs))
            tensors = [x for x in flat if keras().backend.is_keras_tensor(x)]
            if id(layer) not in self.models:
                self.models[id(layer)] = self._model(layer, flat, tensors, (args, kwargs))
            return self.models[id(layer)](tensors[0] if len(tensors) == 1 else tensors)

        return call

    def _model(self, layer: Any, flat: list, tensors: list, structure: Any) -> Any:
        k = keras()
        where = f"{self.where}/{layer.name}"
        inputs = [k.Input(shape=t.shape[1:], dtype=t.dtype) for t in tensors]
        if is_revived(layer):
            return _traced(layer, where, inputs)
        import tensorflow as tf

        fed = iter(inputs)
        filled = [next(fed) if k.backend.is_keras_tensor(x) else x for x in flat]
        args, kwargs = tf.nest.pack_sequence_as(structure, filled)
        try:
            with _inlined(layer), _trained_weights_only(layer, where):
                outputs = _plain_call(layer)(*args, **kwargs)
            return k.Model(inputs[0] if len(inputs) == 1 else inputs, outputs, name=layer.name)
        except ConversionError:
            raise
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
        if is_revived(model):
            outputs = replay_trace(model, inputs, where)
        else:
            with _inlined(model), _trained_weights_only(model, where):
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


@contextmanager
def _trained_weights_only(model: Any, where: str) -> Iterator[None]:
    """Refuse a trace that created weights: a layer never built had none to convert (Keras 3
    leaves the layers a subclassed model's ``build_from_config`` does not build empty when it
    loads a .keras file, and fills them with fresh initial values on the first call)."""
    unbuilt = [
        layer
        for layer in compat_keras.flatten_layers(model)
        if not layer.built and not any(True for _ in compat_keras.flatten_layers(layer))
    ]
    yield
    fresh = [layer.name for layer in unbuilt if layer.weights]
    if fresh:
        raise ConversionError(
            f"layer(s) {', '.join(fresh)} had no weights before the converter called the model "
            "(never built, or not restored when the file was loaded: Keras 3 restores a "
            "subclassed model only into the layers its build_from_config builds); the weights "
            "would be fresh initial values, not the trained ones",
            where,
        )


def _is_container(value: Any) -> bool:
    k = keras()
    if not isinstance(value, k.layers.Layer):
        return False
    if isinstance(value, k.Model):
        return _is_subclassed(value)
    if type(value).__module__.split(".")[0] in _LIBRARIES and not is_revived(value):
        return False
    return any(True for _ in compat_keras.flatten_layers(value, recursive=False))


def _plain_call(layer: Any) -> Any:
    """``layer.call`` given only the keywords it takes (``training``, ``mask``)."""
    accepted = inspect.signature(layer.call).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())

    def call(*args: Any, **kwargs: Any) -> Any:
        kept = {k: v for k, v in kwargs.items() if takes_any or k in accepted}
        return layer.call(*args, **kept)

    return call


def _symbolic_inputs(model: Any, where: str) -> list[Any]:
    """Inputs shaped as the batch tf_keras saw first, or as Keras 3's ``model.build`` was told
    (Keras 3 records no input shape for a subclassed model it only called)."""
    spec = compat_keras.saved_inputs_spec(model)
    built = compat_keras.built_input_shape(model)
    if spec is None and built is not None:
        shapes = built if isinstance(built[0], list | tuple) else [built]
        return [keras().Input(shape=tuple(s[1:])) for s in shapes]
    if spec is None and compat_keras.is_graph_network(model) is None:
        raise ConversionError(
            "Keras 3 records no input shape for a subclassed model it only called: call "
            "model.build(input_shape) before converting (and saving)",
            where,
        )
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
