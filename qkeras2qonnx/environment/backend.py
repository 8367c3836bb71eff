"""Lazy access to TensorFlow, tf_keras and QKeras, with the one environment check they need."""

from __future__ import annotations

import functools
from typing import Any

from qonnx_ingest.errors import ConversionError


@functools.cache
def keras() -> Any:
    """The Keras package of this process's QKeras flavour (``flavour``): Keras 3 for qkeras-v3,
    else tf_keras after checking that TensorFlow was set up to use it.

    QKeras 0.9 subclasses ``tensorflow.keras`` layers; if TensorFlow was imported before this
    package without TF_USE_LEGACY_KERAS=1, that name is Keras 3 and QKeras 0.9 cannot work.
    """
    from qkeras2qonnx.environment import flavour

    if flavour.process_flavour() == flavour.KERAS3:
        return _keras3()
    import tensorflow as tf
    import tf_keras

    if tf.keras.layers.Layer is not tf_keras.layers.Layer:
        raise ConversionError(
            "tf.keras is Keras 3, but QKeras needs Keras 2: set TF_USE_LEGACY_KERAS=1 before "
            "TensorFlow is imported (or import qkeras2qonnx first)"
        )
    from qkeras2qonnx.compat.keras import restore_qkeras09_names

    restore_qkeras09_names()
    return tf_keras


def _keras3() -> Any:
    """Keras 3, with qkeras-v3 (not QKeras 0.9) as ``qkeras`` when it is installed: HGQ2
    models need only Keras 3 and hgq2, so without qkeras-v3 no ``qkeras`` is imported."""
    from qkeras2qonnx.environment import flavour

    flavour.enter(flavour.KERAS3)
    import keras as keras3

    if not flavour.qkeras3_available():
        return keras3
    import qkeras

    if flavour.process_flavour() != flavour.KERAS3:
        raise ConversionError(
            f"qkeras {getattr(qkeras, '__version__', '?')} from {qkeras.__file__} is not "
            f"qkeras-v3 ({flavour.QKERAS3_PIN})"
        )
    return keras3


@functools.cache
def custom_objects() -> dict[str, Any]:
    """QKeras's layers and quantizers by name, as Keras deserialization needs them."""
    keras()
    from qkeras2qonnx.environment import flavour

    objects: dict[str, Any] = {}
    keras3 = flavour.process_flavour() == flavour.KERAS3
    if not keras3 or flavour.qkeras3_available():  # Keras 3 without qkeras-v3: HGQ2 only
        from qkeras2qonnx.compat.qkeras import add_supported_quantized_objects

        add_supported_quantized_objects(objects)
    if keras3:
        if flavour.qkeras3_available():
            from qkeras2qonnx.environment.keras3_compat import loading_objects

            objects.update(loading_objects())
        _register_hgq2()
    return objects


def _register_hgq2() -> None:
    """HGQ2's layers register themselves with Keras 3 when ``hgq`` is imported (its directory
    is on sys.path in Keras 3 processes, see ``flavour``); absent, its models are refused by
    ``load`` with the install command."""
    import importlib.util

    if importlib.util.find_spec("hgq") is not None:
        try:
            import hgq  # noqa: F401
        except ModuleNotFoundError as exc:  # its dependencies come with the hgq2 extra
            from qonnx_ingest.errors import InputError
            from qonnx_ingest.install_hints import missing_module_message

            hint = missing_module_message(exc.name)
            if hint is None:
                raise
            raise InputError(hint) from None


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
