"""Small int8 TFLite models for the channels-last and hls4ml tests, made with TensorFlow's own
converter (keras extra) through ``tf_models.build_tflite``: seeded weights and calibration."""

from __future__ import annotations

from tf_models import OpCase, build_tflite

CNN_SHAPE = (1, 8, 8, 2)


def _cnn(tf, xs):
    init = tf.keras.initializers.RandomUniform(-0.5, 0.5, seed=3)
    x = tf.keras.layers.Conv2D(4, 3, padding="same", activation="relu", kernel_initializer=init,
                               bias_initializer=init)(xs[0])  # fmt: skip
    x = tf.keras.layers.MaxPooling2D(2)(x)
    x = tf.keras.layers.Conv2D(4, 3, activation="relu", kernel_initializer=init,
                               bias_initializer=init)(x)  # fmt: skip
    x = tf.keras.layers.Flatten()(x)
    return tf.keras.layers.Dense(3, kernel_initializer=init, bias_initializer=init)(x)


def small_cnn(seed: int = 11) -> bytes:
    """Conv(relu) -> MaxPool -> Conv(relu) -> Flatten -> Dense, int8 with int8 I/O."""
    return build_tflite(OpCase("CONV_2D", _cnn, (CNN_SHAPE,)), True, seed=seed)


def _shared_conv(tf, xs):
    init = tf.keras.initializers.RandomUniform(-0.5, 0.5, seed=5)
    first = tf.keras.layers.Conv2D(4, 3, padding="same", activation="relu",
                                   kernel_initializer=init, bias_initializer=init)  # fmt: skip
    shared = tf.keras.layers.Conv2D(4, 3, padding="same", kernel_initializer=init,
                                    bias_initializer=init)  # fmt: skip
    fine = first(xs[0])
    coarse = tf.keras.layers.MaxPooling2D(2)(fine)
    flat = [tf.keras.layers.Flatten()(shared(t)) for t in (fine, coarse)]
    return tf.keras.layers.Concatenate()(flat)


def shared_weight_cnn(seed: int = 13) -> bytes:
    """One Conv2D layer applied at two resolutions (an SSD head's shared box / class towers):
    its int8 weight tensor is read by two CONV_2D operators; int8 with int8 I/O."""
    return build_tflite(OpCase("CONV_2D", _shared_conv, (CNN_SHAPE,)), True, seed=seed)
