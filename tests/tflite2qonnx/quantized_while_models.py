"""tf.while_loop models for the quantized WHILE tests, built in a fresh process
(``control_flow_models.in_fresh_process(..., module="quantized_while_models")``).

TF's converter (2.x here) segfaulted calibrating full-integer WHILE loops whose body reads a
captured input, that carry a third loop variable, or Keras' SimpleRNN(unroll=False); these
loops carry an iteration count and one value only.
"""

from __future__ import annotations

import numpy as np
from control_flow_models import _convert, _tf


def counted_while_model() -> bytes:
    """v <- 0.75 v + 0.5 until max(v) >= 1.2 (at most 12 times), returning v and the count,
    on x of shape [3]; full integer. Calibrated on [-1, 1], v stays within [-1, 2] and the
    count depends on x (control_flow_models.while_model's doubling outgrows its int8 grid:
    quantized, every input runs to its cap). REDUCE_MAX, not SUM: the builtin reference
    kernel's int8 SUM over all axes is off by up to the whole range (it ran this loop to its
    cap where the sum had passed the bound after one step)."""
    tf = _tf()

    def fn(x):
        def cond(i, v):
            return tf.logical_and(i < 12, tf.reduce_max(v) < 1.2)

        i, v = tf.while_loop(cond, lambda i, v: (i + 1, v * 0.75 + 0.5), [tf.constant(0), x])
        return v, i

    return _convert(tf, fn, [tf.TensorSpec([3], tf.float32)], quantized=True)


def dense_tanh_while_model() -> bytes:
    """h <- tanh(h @ W + 0.5) five times from h = x, on x of shape [1, 8]; full integer (the
    body is QUANTIZE, ADD, FULLY_CONNECTED, TANH, DEQUANTIZE)."""
    tf = _tf()
    w = tf.constant(np.random.default_rng(5).normal(0, 0.4, (8, 8)).astype(np.float32))

    def fn(x):
        def body(i, h):
            return i + 1, tf.tanh(tf.matmul(h, w) + 0.5)

        _, h = tf.while_loop(lambda i, h: i < 5, body, [tf.constant(0), x])
        return h

    return _convert(tf, fn, [tf.TensorSpec([1, 8], tf.float32)], quantized=True)


def conv_then_while_model() -> bytes:
    """A float CONV_2D (so the layout pass permutes) and then a WHILE on its channel means:
    v <- 2 v + 0.5 until sum(v) >= 10 (at most 20 times), on x of shape [1, 4, 4, 2]."""
    tf = _tf()
    k = tf.constant(np.random.default_rng(6).normal(size=(3, 3, 2, 3)).astype(np.float32))

    def fn(x):
        s = tf.reduce_mean(tf.nn.conv2d(x, k, 1, "SAME"), axis=[1, 2])

        def cond(i, v):
            return tf.logical_and(i < 20, tf.reduce_sum(v) < 10.0)

        _, v = tf.while_loop(cond, lambda i, v: (i + 1, v * 2.0 + 0.5), [tf.constant(0), s])
        return v

    return _convert(tf, fn, [tf.TensorSpec([1, 4, 4, 2], tf.float32)])
