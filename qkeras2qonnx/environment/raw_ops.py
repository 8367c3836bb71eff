"""TensorFlow ops a revived subclassed model's ``call`` runs between its layers, rebuilt.

A SavedModel keeps the traced function of ``call``, not its Python: ``revived`` finds the
sublayer calls by name scope, and an op outside every sublayer is one the Python ran itself
(``tf.reduce_mean`` pooling a Deep Sets model's set axis, a ``tf.nn.relu``, an add). Each rule
calls the op's TensorFlow function on the symbolic Keras tensors, which tf_keras records as a
``TFOpLambda`` layer: the rebuilt model holds it like any other layer, the quantizers stay in
the sublayers around it, and tf2onnx converts the op. The rebuilt model is checked against the
original on seeded inputs (``subclassed``), so a rule read wrongly stops the conversion.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from qonnx_ingest.errors import ConversionError


def constant(op: Any) -> np.ndarray:
    """The value of a Const op of the traced graph."""
    import tensorflow as tf

    return tf.make_ndarray(op.get_attr("value"))


def _reduce(name: str) -> Callable[[Any, list[Any]], Any]:
    def call(op: Any, args: list[Any]) -> Any:
        import tensorflow as tf

        x, axis = args
        axis = np.asarray(axis).reshape(-1).tolist()
        keepdims = bool(op.get_attr("keep_dims"))
        return getattr(tf.math, name)(x, axis=axis, keepdims=keepdims)

    return call


def _function(path: str) -> Callable[[Any, list[Any]], Any]:
    def call(op: Any, args: list[Any]) -> Any:
        import tensorflow as tf

        target: Any = tf
        for part in path.split("."):
            target = getattr(target, part)
        return target(*args)

    return call


def _concat(op: Any, args: list[Any]) -> Any:
    import tensorflow as tf

    *values, axis = args
    return tf.concat(values, axis=int(np.asarray(axis)))


def _expand_dims(op: Any, args: list[Any]) -> Any:
    import tensorflow as tf

    x, axis = args
    return tf.expand_dims(x, axis=int(np.asarray(axis)))


def _squeeze(op: Any, args: list[Any]) -> Any:
    import tensorflow as tf

    return tf.squeeze(args[0], axis=list(op.get_attr("squeeze_dims")) or None)


# TensorFlow op type -> its rule: (op, arguments: symbolic tensors or numpy constants) -> value.
RAW_OPS: dict[str, Callable[[Any, list[Any]], Any]] = {
    "Mean": _reduce("reduce_mean"),
    "Sum": _reduce("reduce_sum"),
    "Max": _reduce("reduce_max"),
    "Min": _reduce("reduce_min"),
    "Relu": _function("nn.relu"),
    "Sigmoid": _function("math.sigmoid"),
    "Tanh": _function("math.tanh"),
    "Neg": _function("math.negative"),
    "AddV2": _function("math.add"),
    "Sub": _function("math.subtract"),
    "Mul": _function("math.multiply"),
    "RealDiv": _function("math.divide"),
    "Maximum": _function("math.maximum"),
    "Minimum": _function("math.minimum"),
    "ConcatV2": _concat,
    "ExpandDims": _expand_dims,
    "Squeeze": _squeeze,
}


def raw_call(op: Any, args: list[Any], where: str) -> Any:
    """``op`` called on ``args``; refused when an input is neither a tensor of the call nor a
    constant, or when every input is a constant (nothing of the model's input flows in)."""
    if any(a is None for a in args) or all(isinstance(a, np.ndarray) for a in args):
        raise ConversionError(
            f"op '{op.name}' ({op.type}) in the subclassed model's own call reads no tensor of "
            "the call: cannot rebuild it",
            where,
        )
    return RAW_OPS[op.type](op, args)
