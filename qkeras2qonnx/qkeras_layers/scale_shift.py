"""qkeras-v3's QScaleShift: ``q_b(bias) + x * q_w(weight)`` with one (1, 1) weight and bias
shared by the whole tensor, then the activation.

No plain Keras layer computes this, so the stripped model gets ``ScaleShift``, a small layer
with the same two weights and the same ops in the same order; tf2onnx writes its Mul and Add,
and ``reinsert`` puts the weight and bias quantizers on them like on any other weight.
"""

from __future__ import annotations

import functools
from typing import Any

from qkeras2qonnx.qkeras_layers.stripped import Slot, Stripped, activation_slot, config_of


def strip_scale_shift(layer: Any, where: str) -> Stripped:
    full = config_of(layer)
    config = {k: full[k] for k in ("name", "trainable", "dtype") if k in full}
    config["use_bias"] = bool(layer.use_bias)
    slots = []
    # QScaleShift quantizes when the quantizer is not None (not by truthiness).
    if layer.weight_quantizer_internal is not None:
        slots.append(Slot("weight_quantizer", layer.weight_quantizer_internal, 0))
    if layer.use_bias and layer.bias_quantizer_internal is not None:
        slots.append(Slot("bias_quantizer", layer.bias_quantizer_internal, 1))
    slots += activation_slot(layer.activation, config, where)
    return Stripped(scale_shift_class(), config, slots)


@functools.cache
def scale_shift_class() -> type:
    """The plain layer (lazily: it needs Keras)."""
    from qkeras2qonnx.environment.backend import keras

    k = keras()

    class ScaleShift(k.layers.Layer):
        def __init__(self, use_bias: bool = True, activation: Any = None, **kwargs: Any):
            super().__init__(**kwargs)
            self.use_bias = use_bias
            self.activation = k.activations.get(activation)

        def build(self, input_shape: Any) -> None:
            self.weight = self.add_weight(name="weight", shape=(1, 1), initializer="ones")
            if self.use_bias:
                self.bias = self.add_weight(name="bias", shape=(1, 1), initializer="zeros")
            self.built = True

        def call(self, inputs: Any) -> Any:
            outputs = inputs * self.weight
            if self.use_bias:
                outputs = self.bias + outputs
            return self.activation(outputs)

        def compute_output_shape(self, input_shape: Any) -> Any:
            return input_shape

        def get_config(self) -> dict:
            config = super().get_config()
            config.update(
                use_bias=self.use_bias, activation=k.activations.serialize(self.activation)
            )
            return config

    return ScaleShift
