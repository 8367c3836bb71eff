"""Keras 3 operation nodes between layers: kept as they are when a model is stripped.

A Keras 3 functional model records ``x[:, 0]`` (``GetItem``), ``keras.ops.*`` calls and
arithmetic on symbolic tensors (``x * 2 + y``) as nodes of ``keras.Operation`` objects that
are not layers: they hold no weights and no quantizer, so the stripped model calls the same
operation on the stripped inputs (Keras's cloning replays it with the node's own arguments),
and tf2onnx converts the TensorFlow ops it runs. Only Keras's own operations pass: one from
other code (a user's ``Operation`` subclass) could compute anything, and is refused by name.
Like plain Keras layers between quantized ones, they are not checked for float functions
whose last bit may differ between runtimes (docs/keras.md).
"""

from __future__ import annotations

from typing import Any

from qonnx_ingest.errors import ConversionError

_KERAS_OPS = "keras.src.ops."


def is_operation_node(operation: Any, keras: Any) -> bool:
    """True for a node of a Keras 3 functional model that is an operation, not a layer
    (``keras``: this process's Keras; tf_keras has no operations, its op nodes are layers)."""
    operation_class = getattr(keras, "Operation", None)
    return (
        operation_class is not None
        and isinstance(operation, operation_class)
        and not isinstance(operation, keras.layers.Layer)
    )


def keep_operation(operation: Any, where: str) -> Any:
    """``operation`` itself, for the stripped model; one not from Keras is refused."""
    module = type(operation).__module__
    if not module.startswith(_KERAS_OPS):
        raise ConversionError(
            f"unsupported operation {type(operation).__name__} from {module} (only Keras's own "
            "operations, keras.ops and tensor slicing, are converted between layers)",
            where,
        )
    if getattr(operation, "weights", None):
        raise ConversionError("an operation holding weights: not supported", where)
    return operation
