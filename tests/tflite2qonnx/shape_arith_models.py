"""Models whose integer shape arithmetic runs beside quantized (and float) tensors, generated
with TensorFlow's converter (keras extra): a detector head that reshapes by a computed shape
(SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE), and index / fill / tile arithmetic on a dynamic
dim (UNPACK, RANGE, GATHER, FILL, CONCATENATION, TILE, CAST into a quantized MUL).

The batch dim stays dynamic, so TF cannot fold the shape ops away. Each model is converted
in every MODES entry; build them in a fresh process (``control_flow_models.in_fresh_process``)
since TF's converter depends on process-wide state.
"""

from __future__ import annotations

import os

import numpy as np

# float; full integer with int8 I/O; int8 inside with uint8 I/O; 16x8 (int16 activations)
MODES = ("float", "int8", "uint8", "int16")
SHAPE = (6, 8)  # each model's input is [batch, 6, 8], batch dynamic


def _tf():
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    return tf


def _detector_head(tf):
    """Boxes and scores reshaped by [batch, -1, 4] built at run time, then joined."""
    w = tf.constant(np.random.default_rng(5).uniform(-0.5, 0.5, (8, 8)).astype(np.float32))

    def fn(x):
        y = tf.nn.relu(tf.einsum("btc,cd->btd", x, w))
        n = tf.shape(y)[0]
        shape = tf.stack([n, -1, 4])
        boxes = tf.reshape(y, shape)
        scores = tf.reshape(tf.sigmoid(x), shape)
        return tf.concat([boxes, scores], axis=1)

    return fn


def _index_arithmetic(tf):
    """Every other row gathered by a computed RANGE, a FILLed row of a computed shape, the
    dynamic size cast into a quantized product, then TILE."""

    def fn(x):
        y = x * 1.5 + 0.25
        n, t, c = tf.unstack(tf.shape(y))
        rows = tf.gather(y, tf.range(0, t, 2), axis=1)
        filler = tf.fill(tf.stack([n, 1, c]), 0.5)
        joined = tf.concat([rows, filler], axis=1)
        scaled = joined * tf.cast(n + 1, tf.float32)
        return tf.tile(scaled, tf.stack([1, 1, 2]))

    return fn


MODELS = {"detector_head": _detector_head, "index_arithmetic": _index_arithmetic}


def build(name: str, mode: str) -> bytes:
    """Model ``name`` converted in ``mode`` (one of MODES), calibrated on 16 seeded inputs."""
    tf = _tf()
    signature = [tf.TensorSpec([None, *SHAPE], tf.float32)]
    concrete = tf.function(MODELS[name](tf), input_signature=signature).get_concrete_function()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], None)
    if mode != "float":
        rng = np.random.default_rng(0)

        def representative():
            for _ in range(16):
                yield [rng.uniform(-1, 1, (1, *SHAPE)).astype(np.float32)]

        ops = tf.lite.OpsSet
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative
        # 16x8 has no CAST or RANGE: TF leaves those (integer-only here) to the builtins
        converter.target_spec.supported_ops = (
            [ops.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8, ops.TFLITE_BUILTINS]
            if mode == "int16"
            else [ops.TFLITE_BUILTINS_INT8]
        )
        io_type = {"int8": tf.int8, "uint8": tf.uint8, "int16": tf.int16}[mode]
        converter.inference_input_type = io_type
        converter.inference_output_type = io_type
    return converter.convert()
