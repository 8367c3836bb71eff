"""Single-op TFLite models generated with TensorFlow's own converter (keras extra).

Each case is a small Keras model around one TFLite operator, converted twice: float, and full
integer (int8 activations and I/O, per-channel int8 weights) with a seeded representative set.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class OpCase:
    """A model builder, its input shapes and range, and the TFLite op it must contain."""

    op: str
    build: Callable  # (tf, inputs) -> output tensor
    shapes: tuple[tuple[int, ...], ...] = ((1, 8, 8, 4),)
    low: float = -1.0
    high: float = 1.0
    quantized: bool = True  # also convert with full-integer quantization


def _tf():
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    return tf


def _const(shape, seed):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def _layer(make):
    """A Keras layer (seeded weights) applied to the first input."""

    def build(tf, xs):
        tf.keras.utils.set_random_seed(7)
        return make(tf)(xs[0])

    return build


def _fn(f):
    """Raw TF ops wrapped in a Lambda so the Keras model traces them."""

    def build(tf, xs):
        return tf.keras.layers.Lambda(lambda t: f(tf, t))(xs if len(xs) > 1 else xs[0])

    return build


def _resize(align_corners: bool, half_pixel: bool, size=(12, 10)):
    return _fn(
        lambda tf, x: tf.compat.v1.image.resize_bilinear(
            x, size, align_corners=align_corners, half_pixel_centers=half_pixel
        )
    )


CASES: dict[str, OpCase] = {
    "add": OpCase("ADD", _fn(lambda tf, t: t[0] + t[1]), ((1, 8, 8, 4), (1, 8, 8, 4))),
    "add_relu_broadcast_constant": OpCase(
        "ADD", _fn(lambda tf, x: tf.nn.relu(x + _const((4,), 1))), ((1, 8, 8, 4),)
    ),
    "add_lower_rank_input": OpCase(
        "ADD", _fn(lambda tf, t: t[0] + t[1]), ((1, 6, 6, 4), (1, 4)), quantized=False
    ),
    "sub": OpCase("SUB", _fn(lambda tf, t: t[0] - t[1]), ((1, 8, 8, 4), (1, 1, 1, 4))),
    "mul": OpCase("MUL", _fn(lambda tf, t: t[0] * t[1]), ((1, 8, 8, 4), (1, 8, 8, 4))),
    "mul_broadcast_constant": OpCase(
        "MUL", _fn(lambda tf, x: x * _const((1, 1, 1, 4), 2)), ((1, 8, 8, 4),)
    ),
    "prelu": OpCase(
        "PRELU",
        _layer(
            lambda tf: tf.keras.layers.PReLU(
                alpha_initializer=tf.keras.initializers.RandomUniform(0.05, 0.5), shared_axes=[1, 2]
            )
        ),
    ),
    "hard_swish": OpCase(
        "HARD_SWISH", _fn(lambda tf, x: x * tf.nn.relu6(x + 3.0) * (1.0 / 6.0)), low=-5, high=5
    ),
    "logistic": OpCase("LOGISTIC", _fn(lambda tf, x: tf.sigmoid(x)), low=-6, high=6),
    "concat_channels": OpCase(
        "CONCATENATION",
        _fn(lambda tf, t: tf.concat([t[0], t[1]], axis=3)),
        ((1, 8, 8, 4), (1, 8, 8, 3)),
    ),
    "concat_height": OpCase(
        "CONCATENATION",
        _fn(lambda tf, t: tf.concat([t[0], t[1]], axis=1)),
        ((1, 8, 8, 4), (1, 5, 8, 4)),
    ),
    "pad": OpCase("PAD", _fn(lambda tf, x: tf.pad(x, [[0, 0], [1, 2], [3, 0], [0, 1]]))),
    "padv2": OpCase(
        "PADV2",
        _fn(lambda tf, x: tf.pad(x, [[0, 0], [2, 1], [0, 1], [0, 0]], constant_values=0.5)),
        quantized=False,
    ),
    "transpose": OpCase("TRANSPOSE", _fn(lambda tf, x: tf.transpose(x, [0, 2, 3, 1]))),
    "mean_spatial_keepdims": OpCase(
        "MEAN", _fn(lambda tf, x: tf.reduce_mean(x, [1, 2], keepdims=True))
    ),
    "mean_spatial": OpCase("MEAN", _fn(lambda tf, x: tf.reduce_mean(x, [1, 2]))),
    "mean_channels": OpCase("MEAN", _fn(lambda tf, x: tf.reduce_mean(x, [3], keepdims=True))),
    "resize_bilinear_asymmetric": OpCase("RESIZE_BILINEAR", _resize(False, False)),
    "resize_bilinear_align_corners": OpCase("RESIZE_BILINEAR", _resize(True, False)),
    "resize_bilinear_half_pixel": OpCase("RESIZE_BILINEAR", _resize(False, True)),
    "resize_bilinear_half_pixel_down": OpCase("RESIZE_BILINEAR", _resize(False, True, (5, 3))),
    "conv_same_stride2_relu6": OpCase(
        "CONV_2D",
        _layer(lambda tf: tf.keras.layers.Conv2D(6, 3, 2, padding="same", activation="relu6")),
        ((1, 9, 9, 4),),
    ),
    "conv_dilated_valid": OpCase(
        "CONV_2D",
        _layer(lambda tf: tf.keras.layers.Conv2D(5, 3, padding="valid", dilation_rate=2)),
        ((1, 10, 10, 3),),
    ),
    "depthwise_multiplier2": OpCase(
        "DEPTHWISE_CONV_2D",
        _layer(lambda tf: tf.keras.layers.DepthwiseConv2D(3, padding="same", depth_multiplier=2)),
    ),
    "fully_connected": OpCase(
        "FULLY_CONNECTED",
        _layer(lambda tf: tf.keras.layers.Dense(7, activation="relu")),
        ((1, 12),),
    ),
    "fully_connected_keep_num_dims": OpCase(
        "FULLY_CONNECTED", _layer(lambda tf: tf.keras.layers.Dense(5)), ((1, 3, 12),)
    ),
    "max_pool_same": OpCase(
        "MAX_POOL_2D", _layer(lambda tf: tf.keras.layers.MaxPool2D(3, 2, padding="same"))
    ),
    # int8 averages over 4 or 6 padded cells hit exact ties of integer division, which float
    # evaluation rounds either way: the padded case is checked in float, the int8 one on 3x3.
    "average_pool_same": OpCase(
        "AVERAGE_POOL_2D",
        _layer(lambda tf: tf.keras.layers.AveragePooling2D(3, 2, padding="same")),
        ((1, 9, 9, 4),),
        quantized=False,
    ),
    "average_pool_valid": OpCase(
        "AVERAGE_POOL_2D",
        _layer(lambda tf: tf.keras.layers.AveragePooling2D(3, 2, padding="valid")),
        ((1, 9, 9, 4),),
    ),
    "softmax": OpCase("SOFTMAX", _fn(lambda tf, x: tf.nn.softmax(x * 3.0)), ((1, 10),)),
    "reshape_after_nhwc": OpCase("RESHAPE", _fn(lambda tf, x: tf.reshape(x, [1, 16, 16]))),
    "relu": OpCase("RELU", _fn(lambda tf, x: tf.nn.relu(x))),
    "relu6": OpCase("RELU6", _fn(lambda tf, x: tf.nn.relu6(x)), low=-3, high=8),
}


def build_tflite(case: OpCase, quantized: bool, seed: int = 0, float_input: bool = False) -> bytes:
    """Convert the case's Keras model with TFLiteConverter (full integer when ``quantized``).

    ``float_input`` keeps a float input, so the model starts with a QUANTIZE op.
    """
    tf = _tf()
    inputs = [tf.keras.Input(batch_size=s[0], shape=s[1:]) for s in case.shapes]
    model = tf.keras.Model(inputs, case.build(tf, inputs))
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if quantized:
        rng = np.random.default_rng(seed)

        def representative():
            for _ in range(32):
                yield [rng.uniform(case.low, case.high, s).astype(np.float32) for s in case.shapes]

        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.float32 if float_input else tf.int8
        converter.inference_output_type = tf.int8
    return converter.convert()
