"""Small attention blocks between convolutions, as TensorFlow's TFLite converter writes them
(keras extra): BATCH_MATMUL with RESHAPE / TRANSPOSE around it, LayerNormalization lowered
to RESHAPE -> TRANSPOSE -> MEAN ... -> TRANSPOSE -> RESHAPE. Seeded weights and calibration."""

from __future__ import annotations

import os

import numpy as np


def _tf():
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    return tf


def vit(tf, x):
    """Conv -> tokens [1, 16, 8] -> MultiHeadAttention + residual -> LayerNorm -> Conv."""
    layers = tf.keras.layers
    x = layers.Conv2D(8, 3, padding="same", activation="relu")(x)
    t = layers.Reshape((16, 8))(x)
    t = layers.Add()([t, layers.MultiHeadAttention(num_heads=2, key_dim=4)(t, t)])
    t = layers.LayerNormalization()(t)
    return layers.Conv2D(4, 1)(layers.Reshape((4, 4, 8))(t))


def mobilevit(tf, x):
    """MobileViT's unfold into 2x2 patches [4, 4, 8], attention, fold back, Conv."""
    layers = tf.keras.layers

    def unfold(x):
        x = tf.transpose(tf.reshape(x, (1, 2, 2, 2, 2, 8)), (0, 2, 4, 1, 3, 5))
        return tf.reshape(x, (4, 4, 8))

    def fold(x):
        x = tf.transpose(tf.reshape(x, (1, 2, 2, 2, 2, 8)), (0, 3, 1, 4, 2, 5))
        return tf.reshape(x, (1, 4, 4, 8))

    x = layers.Conv2D(8, 3, padding="same", activation="relu")(x)
    t = layers.Lambda(unfold)(x)
    t = layers.Add()([t, layers.MultiHeadAttention(num_heads=2, key_dim=4)(t, t)])
    return layers.Conv2D(4, 1)(layers.Lambda(fold)(t))


def speech(tf, x):
    """Conv1D -> attention over 12 frames -> LayerNorm -> Conv1D -> average -> Dense."""
    layers = tf.keras.layers
    x = layers.Conv1D(8, 3, padding="same", activation="relu")(x)
    x = layers.Add()([x, layers.MultiHeadAttention(num_heads=2, key_dim=4)(x, x)])
    x = layers.LayerNormalization()(x)
    x = layers.Conv1D(8, 3, padding="same", activation="relu")(x)
    return layers.Dense(4)(layers.GlobalAveragePooling1D()(x))


def spatial(tf, x):
    """Attention over the H x W axes of a 4D tensor (attention_axes=(1, 2)), pre-norm, MLP."""
    layers = tf.keras.layers
    x = layers.Conv2D(8, 3, padding="same", activation="relu")(x)
    y = layers.LayerNormalization()(x)
    x = layers.Add()([x, layers.MultiHeadAttention(2, 4, attention_axes=(1, 2))(y, y)])
    y = layers.Dense(8)(layers.Dense(16, activation="gelu")(layers.LayerNormalization()(x)))
    return layers.Conv2D(4, 1)(layers.Add()([x, y]))


BUILDERS = {"vit": vit, "mobilevit": mobilevit, "speech": speech, "spatial": spatial}
SHAPES = {
    "vit": (1, 4, 4, 3),
    "mobilevit": (1, 4, 4, 3),
    "speech": (1, 12, 5),
    "spatial": (1, 4, 4, 3),
}


def build(name: str, quantized: bool, seed: int = 1) -> bytes:
    """The TFLite flatbuffer; full integer (int8 I/O) when ``quantized``."""
    tf = _tf()
    tf.keras.utils.set_random_seed(7)
    shape = SHAPES[name]
    x = tf.keras.Input(batch_size=shape[0], shape=shape[1:], name="x")
    model = tf.keras.Model(x, BUILDERS[name](tf, x))
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if quantized:
        rng = np.random.default_rng(seed)

        def representative():
            for _ in range(32):
                yield {"x": rng.uniform(-1, 1, shape).astype(np.float32)}

        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
    return converter.convert()
