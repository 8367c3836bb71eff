"""Lazy access to TensorFlow, tf_keras and QKeras, with the one environment check they need."""

from __future__ import annotations

import functools
from typing import Any

from qonnx_ingest.errors import ConversionError


@functools.cache
def keras() -> Any:
    """The Keras 2 package (tf_keras), after checking that TensorFlow was set up to use it.

    QKeras subclasses ``tensorflow.keras`` layers; if TensorFlow was imported before this
    package without TF_USE_LEGACY_KERAS=1, that name is Keras 3 and QKeras cannot work.
    """
    import tensorflow as tf
    import tf_keras

    if tf.keras.layers.Layer is not tf_keras.layers.Layer:
        raise ConversionError(
            "tf.keras is Keras 3, but QKeras needs Keras 2: set TF_USE_LEGACY_KERAS=1 before "
            "TensorFlow is imported (or import qkeras2qonnx first)"
        )
    return tf_keras


@functools.cache
def custom_objects() -> dict[str, Any]:
    """QKeras's layers and quantizers by name, as Keras deserialization needs them."""
    keras()
    from qkeras.utils import _add_supported_quantized_objects

    objects: dict[str, Any] = {}
    _add_supported_quantized_objects(objects)
    return objects


def is_qkeras_object(obj: Any) -> bool:
    """True for QKeras layers, quantizer objects and QKeras activation functions."""
    module = getattr(obj, "__module__", None) or type(obj).__module__
    return module.split(".")[0] == "qkeras"


def qkeras_call(quantizer: Any, x: Any) -> tuple[Any, Any]:
    """Run a QKeras quantizer eagerly on ``x``; return (output, the quantizer's ``scale``)."""
    import numpy as np
    import tensorflow as tf

    keras()
    y = quantizer(tf.constant(np.asarray(x, dtype=np.float32)))
    scale = getattr(quantizer, "scale", None)
    if scale is not None:
        scale = np.asarray(scale.numpy() if hasattr(scale, "numpy") else scale, dtype=np.float32)
    return np.asarray(y.numpy(), dtype=np.float32), scale
