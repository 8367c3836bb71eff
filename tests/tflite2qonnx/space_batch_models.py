"""A dilated convolution on dynamic height and width, as TensorFlow writes it when it cannot
fold the shapes: SHAPE -> required_space_to_batch_paddings arithmetic -> SPACE_TO_BATCH_ND
with run-time paddings -> CONV_2D -> BATCH_TO_SPACE_ND with run-time crops (tflite-support's
``dilated_conv.tflite`` is this pattern). Generated with TensorFlow's converter, float and
full-integer int8; build in a fresh process (``control_flow_models.in_fresh_process``).
"""

from __future__ import annotations

import os

import numpy as np
from control_flow_models import full_integer

MODES = ("float", "int8")
CHANNELS = 3
BLOCK = (2, 3)  # the dilation rates, different per axis so the two spatial dims differ


def _fn(tf):
    w = tf.constant(np.random.default_rng(3).uniform(-0.5, 0.5, (3, 3, CHANNELS, 4)), tf.float32)

    def fn(x):
        spatial = tf.shape(x)[1:3]
        pads, crops = tf.required_space_to_batch_paddings(spatial, BLOCK, [[1, 1], [1, 1]])
        y = tf.space_to_batch_nd(x, BLOCK, pads)
        y = tf.nn.conv2d(y, w, strides=1, padding="VALID")
        return tf.nn.relu(tf.batch_to_space(y, BLOCK, crops))

    return fn


def build(mode: str) -> bytes:
    """The model in ``mode`` (one of MODES), calibrated on 8 seeded inputs of varied sizes."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    import tensorflow as tf

    signature = [tf.TensorSpec([None, None, None, CHANNELS], tf.float32)]
    concrete = tf.function(_fn(tf), input_signature=signature).get_concrete_function()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], None)
    if mode == "int8":
        full_integer(converter, lambda i: (1, 6 + i, 9 - i % 3, CHANNELS), count=8)
    return converter.convert()
