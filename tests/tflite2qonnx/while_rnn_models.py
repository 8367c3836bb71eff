"""Keras GRU and SimpleRNN layers through TF's TFLiteConverter: TF fuses only LSTM into a
builtin, these become a WHILE over rank-3 values. ``mode`` "float" or "dynamic" (int8
weights, float activations: 32 units on 32 features give kernels of at least 1024 elements,
the converter's threshold, so the WHILE bodies' FULLY_CONNECTEDs are hybrid)."""

from __future__ import annotations

from control_flow_models import _tf


def recurrent_model(mode: str = "float") -> bytes:
    """On x [1, 5, 32], seed 7, three outputs: GRU(32, return_sequences, reset_after) of x;
    GRU(16, reset_after=False) of that sequence; SimpleRNN(32, return_sequences) then
    SimpleRNN(8) of x."""
    tf = _tf()
    layers = tf.keras.layers
    tf.keras.utils.set_random_seed(7)
    x = tf.keras.Input((5, 32), batch_size=1)
    seq = layers.GRU(32, return_sequences=True, bias_initializer="random_uniform")(x)
    last = layers.GRU(16, reset_after=False, bias_initializer="random_uniform")(seq)
    rnn = layers.SimpleRNN(8)(layers.SimpleRNN(32, return_sequences=True)(x))
    converter = tf.lite.TFLiteConverter.from_keras_model(tf.keras.Model(x, [seq, last, rnn]))
    if mode == "dynamic":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    return converter.convert()


def conv_gru_model() -> bytes:
    """Convolution front-ends (stored channels-first by the layout pass) feeding GRU WHILEs,
    float, seed 9: Conv1D(8, 3) on a [1, 7, 4] then GRU(6, return_sequences); Conv2D(4, 3)
    on b [1, 6, 5, 2], Reshape to [1, 4, 12], GRU(6)."""
    tf = _tf()
    layers = tf.keras.layers
    tf.keras.utils.set_random_seed(9)
    a = tf.keras.Input((7, 4), batch_size=1)
    b = tf.keras.Input((6, 5, 2), batch_size=1)
    ya = layers.GRU(6, return_sequences=True)(layers.Conv1D(8, 3, activation="relu")(a))
    hb = layers.Conv2D(4, 3, activation="relu")(b)
    yb = layers.GRU(6)(layers.Reshape((4, 12))(hb))
    converter = tf.lite.TFLiteConverter.from_keras_model(tf.keras.Model([a, b], [ya, yb]))
    return converter.convert()


def conv_in_while_model() -> bytes:
    """tf.while_loop applying a 1x1 convolution to an image [1, 4, 4, 2] three times: the
    WHILE body holds a CONV_2D."""
    import numpy as np

    tf = _tf()
    w = tf.constant(np.random.default_rng(2).normal(size=(1, 1, 2, 2)).astype(np.float32))

    def fn(x):
        def body(i, v):
            return i + 1, tf.nn.conv2d(v, w, 1, "VALID")

        return tf.while_loop(lambda i, v: i < 3, body, [tf.constant(0), x])[1]

    spec = [tf.TensorSpec([1, 4, 4, 2], tf.float32)]
    concrete = tf.function(fn, input_signature=spec).get_concrete_function()
    return tf.lite.TFLiteConverter.from_concrete_functions([concrete], None).convert()
