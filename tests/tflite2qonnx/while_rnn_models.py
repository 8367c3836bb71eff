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


def conv_gru_model(front: str = "conv1d") -> bytes:
    """A convolution front-end (stored channels-first by the layout pass) feeding a GRU's
    WHILE, float, seed 9: "conv1d": Conv1D(8, 3) on x [1, 7, 4] then GRU(6, return_sequences);
    "conv2d": Conv2D(4, 3) on x [1, 6, 5, 2], Reshape to [1, 4, 12], GRU(6)."""
    tf = _tf()
    layers = tf.keras.layers
    tf.keras.utils.set_random_seed(9)
    if front == "conv1d":
        x = tf.keras.Input((7, 4), batch_size=1)
        h = layers.Conv1D(8, 3, activation="relu")(x)
        y = layers.GRU(6, return_sequences=True)(h)
    else:
        x = tf.keras.Input((6, 5, 2), batch_size=1)
        h = layers.Conv2D(4, 3, activation="relu")(x)
        y = layers.GRU(6)(layers.Reshape((4, 12))(h))
    converter = tf.lite.TFLiteConverter.from_keras_model(tf.keras.Model(x, y))
    return converter.convert()
