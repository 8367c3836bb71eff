"""Keras's and TensorFlow's internals: tf_keras's and Keras 3's node graph and layer walk,
TensorFlow's ``tensorflow.python`` modules and function graphs.

The pin is that of the Keras a model's class comes from (tf_keras or Keras 3), TensorFlow's for
TensorFlow's own objects."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from qkeras2qonnx.compat import Pin, require

TENSORFLOW = Pin("tensorflow", "tensorflow", "2.19.1")
TF_KERAS = Pin("tf_keras", "tf_keras", "2.19.0")
KERAS3 = Pin("keras", "keras", "3.15.1")
_BY_PACKAGE = {"tf_keras": TF_KERAS, "keras": KERAS3}


def _pin(obj: Any) -> Pin:
    """The Keras ``obj``'s class derives from (QKeras, HGQ2 and user layers included)."""
    for cls in type(obj).__mro__:
        pin = _BY_PACKAGE.get(cls.__module__.split(".")[0])
        if pin is not None:
            return pin
    return TENSORFLOW


def _private(obj: Any, name: str, default: Any = None) -> Any:
    require(_pin(obj), name)
    return getattr(obj, name, default)


def is_graph_network(model: Any) -> bool | None:
    """tf_keras's ``_is_graph_network`` (None in Keras 3, which has no such flag)."""
    return _private(model, "_is_graph_network")


def functional_class() -> type:
    """Keras 3's Functional model class, which it exports under no public name."""
    require(KERAS3, "keras.src.models.functional")
    from keras.src.models.functional import Functional

    return Functional


def node_graph(model: Any) -> Any:
    """The Functional graph of ``model`` (a Keras 3 Sequential holds one in ``_functional``),
    or None when it has no node graph (``_nodes_by_depth``) to replay."""
    graph = _private(model, "_functional", model)
    return graph if hasattr(graph, "_nodes_by_depth") else None


def run_through_graph(graph: Any, inputs: list[Any], layer_for: Callable[[Any], Any]) -> Any:
    """``graph``'s nodes called on ``inputs`` in order and wiring, each node calling
    ``layer_for(layer)``: Keras 3's ``_run_through_graph``, or the same walk over tf_keras's
    ``_nodes_by_depth`` and ``_tensor_usage_count``."""
    require(_pin(graph), "_run_through_graph / _nodes_by_depth")
    if hasattr(graph, "_run_through_graph"):  # Keras 3 takes a replacement per operation
        return graph._run_through_graph(inputs, operation_fn=layer_for)
    import tensorflow as tf

    counts = graph._tensor_usage_count
    tensors = {
        str(id(x)): [y] * counts[str(id(x))] for x, y in zip(graph.inputs, inputs, strict=True)
    }
    for depth in sorted(graph._nodes_by_depth, reverse=True):
        for node in graph._nodes_by_depth[depth]:
            if node.is_input or any(i not in tensors for i in node.flat_input_ids):
                continue
            args, kwargs = node.map_arguments(tensors)
            outputs = layer_for(node.layer)(*args, **kwargs)
            for i, y in zip(node.flat_output_ids, tf.nest.flatten(outputs), strict=True):
                tensors[i] = [y] * counts[i]
    return [tensors[str(id(x))].pop() for x in graph.outputs]


def flatten_layers(layer: Any, recursive: bool = True) -> Iterator[Any]:
    """The layers ``layer`` holds (``_flatten_layers``, without itself)."""
    require(_pin(layer), "_flatten_layers")
    return layer._flatten_layers(include_self=False, recursive=recursive)


def saved_inputs_spec(model: Any) -> Any:
    """tf_keras's input spec of the first call (``_saved_model_inputs_spec``), or None."""
    return _private(model, "_saved_model_inputs_spec")


def built_input_shape(model: Any) -> Any:
    """The input shape Keras 3's ``model.build`` was told (``_build_shapes_dict``), or None."""
    return (_private(model, "_build_shapes_dict") or {}).get("input_shape")


def inbound_nodes(layer: Any) -> Any:
    """The nodes calling ``layer`` (``_inbound_nodes``; empty when it has none)."""
    return _private(layer, "_inbound_nodes", ())


def has_consumers(layer: Any) -> bool:
    """Whether a layer consumes ``layer``'s output (``_outbound_nodes``; True if unknown)."""
    return bool(_private(layer, "_outbound_nodes", 1))


def compute_output_spec(fn: Callable[..., Any], specs: Any) -> Any:
    """Keras 3's ``backend.compute_output_spec`` (in ``keras.src`` only)."""
    require(KERAS3, "keras.src.backend.compute_output_spec")
    from keras.src import backend

    return backend.compute_output_spec(fn, specs)


def load_weights_from_hdf5_group(group: Any, model: Any) -> None:
    """tf_keras's legacy HDF5 weight loader (``tf_keras.src.saving.legacy.hdf5_format``)."""
    require(TF_KERAS, "tf_keras.src.saving.legacy.hdf5_format")
    from tf_keras.src.saving.legacy import hdf5_format

    hdf5_format.load_weights_from_hdf5_group(group, model)


def function_graph(graph: Any, name: str) -> Any:
    """The graph of the function ``name`` a TensorFlow FuncGraph calls (``_get_function``)."""
    require(TENSORFLOW, "FuncGraph._get_function")
    return graph._get_function(name).graph


def restore_qkeras09_names() -> None:
    """QKeras 0.9 calls names TensorFlow 2.19 moved, in ``tensorflow.python``:
    ``array_ops.stack`` (QConv2DTranspose) is in ``array_ops_stack`` only; ``nest.is_sequence``
    and ``array_ops.unstack`` (QSimpleRNN/QLSTM/QGRU) are ``nest.is_nested`` and
    ``array_ops_stack.unstack``. Without them such models cannot be built, loaded or called.
    Only missing names are added; nothing TensorFlow defines is replaced."""
    require(TENSORFLOW, "tensorflow.python.ops.array_ops")
    from tensorflow.python.ops import array_ops, array_ops_stack
    from tensorflow.python.util import nest

    if not hasattr(array_ops, "stack"):
        array_ops.stack = array_ops_stack.stack
    if not hasattr(nest, "is_sequence"):
        nest.is_sequence = nest.is_nested
    if not hasattr(array_ops, "unstack"):
        array_ops.unstack = array_ops_stack.unstack
