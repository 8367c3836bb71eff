"""QBatchNormalization: a batch normalization whose gamma, beta, mean and variance are quantized.

QKeras computes ``tf.nn.batch_normalization(x, q(mean), q(var), q(beta), q(gamma), eps)`` at
inference (``fused`` is always off; its ``activation`` is never applied). Without quantizers,
or with only non-uniform ones (whose quantized constants are written in place), a plain
non-fused BatchNormalization computes exactly that. Otherwise the four parameters must stay
separate tensors for their Quant nodes, so the layer becomes one FusedBatchNormV3 (tf2onnx: one
ONNX BatchNormalization on quantized inputs), which agrees with QKeras's op order up to float32
rounding.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from qkeras2qonnx.environment.backend import keras
from qkeras2qonnx.qkeras_layers.quantizers import makes_node
from qkeras2qonnx.qkeras_layers.stripped import Slot, Stripped, config_of
from qonnx_ingest.errors import ConversionError

_FUSED_MIN_EPSILON = 1.001e-5  # tf.nn.fused_batch_norm raises smaller epsilons to this


def strip_qbatchnorm(layer: Any, where: str) -> Stripped:
    slots = _slots(layer)
    bn = keras().layers.BatchNormalization
    keep = set(inspect.signature(bn.__init__).parameters) | {"name", "trainable", "dtype"}
    full = config_of(layer)
    config = {k: v for k, v in full.items() if k in keep and not k.endswith("_constraint")}
    # Keras 2 only: Keras 3's BatchNormalization has none of these (and refuses them).
    inference = {"fused": False, "renorm": False, "virtual_batch_size": None, "adjustment": None}
    config.update({k: v for k, v in inference.items() if k in keep})
    if not any(makes_node(s.quantizer) for s in slots):
        return Stripped(bn, config, slots)
    axis = layer.axis if isinstance(layer.axis, int) else list(layer.axis)
    if isinstance(axis, list):
        if len(axis) != 1:
            raise ConversionError(f"quantized batch normalization over axes {axis}", where)
        axis = axis[0]
    if layer.epsilon < _FUSED_MIN_EPSILON:
        raise ConversionError(
            f"epsilon={layer.epsilon:g} below {_FUSED_MIN_EPSILON:g} is not supported with "
            "quantized parameters",
            where,
        )
    fused = {
        "name": layer.name,
        "axis": axis,
        "epsilon": float(layer.epsilon),
        "center": bool(layer.center),
        "scale": bool(layer.scale),
    }
    return Stripped(fused_batchnorm_class(), fused, slots)


def _slots(layer: Any) -> list[Slot]:
    """Quantizer slots in the order of ``get_weights()``: [gamma], [beta], mean, variance,
    with QKeras's own conditions for applying each quantizer."""
    slots, index = [], 0
    for role, present in (
        ("gamma_quantizer", layer.scale),
        ("beta_quantizer", layer.center),
        ("mean_quantizer", True),
        ("variance_quantizer", True),
    ):
        if not present:
            continue
        if getattr(layer, role):
            slots.append(Slot(role, getattr(layer, f"{role}_internal"), index))
        index += 1
    return slots


@functools.cache
def fused_batchnorm_class() -> type:
    """A Keras layer computing inference batch normalization as one FusedBatchNormV3."""
    import tensorflow as tf

    class FusedBatchNorm(keras().layers.Layer):
        def __init__(self, axis: int, epsilon: float, center: bool, scale: bool, **kwargs: Any):
            super().__init__(**kwargs)
            self.axis, self.epsilon, self.center, self.scale = axis, epsilon, center, scale

        def build(self, input_shape: Any) -> None:
            self.rank = len(input_shape)
            self.axis %= self.rank
            c = (int(input_shape[self.axis]),)
            if self.scale:
                self.gamma = self.add_weight(name="gamma", shape=c)
            if self.center:
                self.beta = self.add_weight(name="beta", shape=c)
            self.moving_mean = self.add_weight(name="moving_mean", shape=c, trainable=False)
            self.moving_variance = self.add_weight(name="moving_variance", shape=c, trainable=False)

        def call(self, x: Any) -> Any:
            channels = self.moving_mean.shape[0]
            gamma = self.gamma if self.scale else tf.ones((channels,))
            beta = self.beta if self.center else tf.zeros((channels,))
            last = self.axis == self.rank - 1
            if not last:
                perm = [i for i in range(self.rank) if i != self.axis] + [self.axis]
                x = tf.transpose(x, perm)
            shape = tf.shape(x)
            y = x if self.rank == 4 else tf.reshape(x, [-1, 1, 1, channels])
            y, _, _ = tf.compat.v1.nn.fused_batch_norm(
                y,
                gamma,
                beta,
                self.moving_mean,
                self.moving_variance,
                epsilon=self.epsilon,
                is_training=False,
            )
            if self.rank != 4:
                y = tf.reshape(y, shape)
            if not last:
                y = tf.transpose(y, [perm.index(i) for i in range(self.rank)])
            return y

        def compute_output_shape(self, input_shape: Any) -> Any:
            return input_shape

    return FusedBatchNorm
