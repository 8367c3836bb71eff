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
