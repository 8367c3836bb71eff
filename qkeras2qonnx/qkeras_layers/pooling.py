"""QAveragePooling2D / QGlobalAveragePooling2D: the Keras average, then the layer's quantizer.

QKeras multiplies the average by ``area * average_quantizer(1/area)``. When the pool area is a
power of two and the quantizer leaves 1/area unchanged, both products are exact and the factor
is 1: the average_quantizer acts on a constant only, is recorded as folded (model metadata),
and needs no node. Any other average_quantizer rescales the average and is refused by name.
The layer's activation (usually a quantizer) is applied after the pooling like any layer's.
"""

from __future__ import annotations

import functools
import inspect
import math
from typing import Any

import numpy as np

from qkeras2qonnx.environment.backend import keras, qkeras_call
from qkeras2qonnx.qkeras_layers.quantizers import describe
from qkeras2qonnx.qkeras_layers.stripped import Stripped, activation_slot, config_of
from qonnx_ingest.errors import ConversionError


def pooling_rule(plain: str):
    def strip(layer: Any, where: str) -> Stripped:
        cls = getattr(keras().layers, plain)
        keep = set(inspect.signature(cls.__init__).parameters) | {"name", "trainable", "dtype"}
        pool = {k: v for k, v in config_of(layer).items() if k in keep}
        folded = _check_average_quantizer(layer, where)
        config = {"name": layer.name, "pool": {"class_name": plain, "config": pool}}
        slots = activation_slot(layer.activation, config, where)
        config.setdefault("activation", "linear")
        return Stripped(pooled_activation_class(), config, slots, folded=folded)

    return strip


def _check_average_quantizer(layer: Any, where: str) -> dict[str, str]:
    q = layer.average_quantizer_internal
    if not layer.average_quantizer or q is None:
        return {}
    if hasattr(layer, "compute_pooling_area"):
        import tensorflow as tf

        # tf_keras layers know their input_shape; Keras 3 layers their input tensor.
        shape = layer.input_shape if hasattr(layer, "input_shape") else layer.input.shape
        area = int(layer.compute_pooling_area(tf.TensorShape(shape)))
    else:
        size = layer.pool_size
        area = int(np.prod(size)) if not isinstance(size, int) else size * size
    factor, _ = qkeras_call(q, np.float32(1.0 / area))
    if not (math.log2(area).is_integer() and float(factor) * area == 1.0):
        raise ConversionError(
            f"{describe(q)}: QKeras rescales the average by area * q(1/area) = "
            f"{float(factor) * area:g} (pool area {area}), which is not supported",
            f"{where} average_quantizer",
        )
    return {f"{where} average_quantizer": f"{describe(q)} of the constant 1/{area}: exact"}


@functools.cache
def pooled_activation_class() -> type:
    """A Keras pooling layer followed by a plain activation (pooling layers have none)."""

    class PooledActivation(keras().layers.Layer):
        def __init__(self, pool: dict, activation: str = "linear", **kwargs: Any):
            super().__init__(**kwargs)
            # By class name: Keras 3's deserialize wants a module key that tf_keras omits.
            self.pool = getattr(keras().layers, pool["class_name"]).from_config(pool["config"])
            self.activation = keras().activations.get(activation)

        def call(self, x: Any) -> Any:
            return self.activation(self.pool(x))

        def compute_output_shape(self, input_shape: Any) -> Any:
            return self.pool.compute_output_shape(input_shape)

    return PooledActivation
