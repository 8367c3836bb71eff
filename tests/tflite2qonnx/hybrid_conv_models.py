"""Seeded Keras convolutions converted with dynamic-range quantization (Optimize.DEFAULT, no
representative data): float activations, int8 filters read by TFLite's hybrid conv kernels.

Filters reach TF's 1,024-element threshold for weight quantization; each input holds a
number of values per batch that is not a multiple of 8, so the quantizer's vector blocks and
its scalar tail both occur.
"""

from __future__ import annotations

from tf_models import _tf


def _convert(tf, model, per_channel: bool = True) -> bytes:
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]  # no representative data: hybrid
    if not per_channel:
        converter._experimental_disable_per_channel = True
    return converter.convert()


def hybrid_conv(per_channel: bool = True, seed: int = 0) -> bytes:
    """CONV_2D 3x3, stride 2, SAME, RELU6, 7 -> 17 channels, batch 2 (per-channel filters
    take EvalHybridPerChannel, per-tensor ones EvalHybrid)."""
    tf = _tf()
    tf.keras.utils.set_random_seed(seed)
    x = tf.keras.Input(batch_size=2, shape=(9, 9, 7))
    conv = tf.keras.layers.Conv2D(
        17, 3, strides=2, padding="same", activation="relu6", bias_initializer="random_uniform"
    )
    return _convert(tf, tf.keras.Model(x, conv(x)), per_channel)


def hybrid_depthwise(seed: int = 0) -> bytes:
    """DEPTHWISE_CONV_2D 5x5, SAME, 45 channels, batch 2."""
    tf = _tf()
    tf.keras.utils.set_random_seed(seed)
    x = tf.keras.Input(batch_size=2, shape=(7, 7, 45))
    conv = tf.keras.layers.DepthwiseConv2D(5, padding="same", bias_initializer="random_uniform")
    return _convert(tf, tf.keras.Model(x, conv(x)))


def hybrid_convs_with_float_activations(seed: int = 5) -> bytes:
    """Conv2D(32, 3) -> TANH -> DepthwiseConv2D(3) -> LOGISTIC -> Conv2D(32, 3) -> TANH on
    [1, 12, 12, 8]: float activations between hybrid convolutions, whose input quantizers
    round what the activations computed."""
    tf = _tf()
    layers = tf.keras.layers
    tf.keras.utils.set_random_seed(seed)
    x = tf.keras.Input(batch_size=1, shape=(12, 12, 8))
    h = layers.Conv2D(32, 3, activation="tanh")(x)
    h = layers.DepthwiseConv2D(3, activation="sigmoid")(h)
    y = layers.Activation("tanh")(layers.Conv2D(32, 3)(h))
    return _convert(tf, tf.keras.Model(x, y))
