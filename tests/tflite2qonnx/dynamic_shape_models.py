"""Models whose shape-like operands (slice bounds and strides, reshape targets, tile multiples,
paddings, split sizes, fill / broadcast dims) are computed at run time from a dynamic batch,
generated with TensorFlow's converter: ``tf.function`` with a ``None`` batch dim, so TF cannot
fold ``tf.shape(x)`` away. Built in a fresh process (``control_flow_models.in_fresh_process``).

Each model's input is [batch, WIDTH] (STFT: [batch, SAMPLES]); the batch ranges over BATCHES
when the tests run them.
"""

from __future__ import annotations

from control_flow_models import full_integer
from shape_arith_models import _tf

WIDTH = 6
SAMPLES = 128
BATCHES = (1, 2, 3, 5)  # 5: past WIDTH - 2, so a computed end clamps


def _strided(tf):
    """STRIDED_SLICE with computed begin / end / strides: an end past the dim (clamped), a
    negative stride from a computed begin (below -dim at batches 1 and 2: empty), a shrunk
    computed index, a negative computed begin, a computed stride beside an ellipsis and a
    new axis."""

    def fn(x):
        n = tf.shape(x)[0]
        return {
            "end_past_dim": x[:, : n + 2],
            "reversed_from": tf.concat([x[:, n - 9 :: -1], x[:, :1]], axis=1),
            "shrunk_at": x[:, n - 1],
            "last_n": x[:, -n:],
            "strided": tf.reshape(x[..., 1::n], tf.stack([n, -1])),
            "new_axis": x[tf.newaxis, :, n - 3 :],
            "rows_reversed": x[n - 1 :: -1],
        }

    return fn


def _reshape_tile_pad(tf):
    """RESHAPE to [batch, -1] and to [-1, batch], TILE by the batch, PAD / PADV2 by paddings
    computed from the batch, MIRROR_PAD of the dynamic dim."""

    def fn(x):
        n = tf.shape(x)[0]
        y = x * 1.5 - 0.25
        return {
            "flat": tf.reshape(tf.reshape(y, [n, 2, 3]), [n, -1]),
            "by_batch": tf.reshape(y, tf.stack([-1, n])),
            "tiled": tf.tile(y[:, :2], tf.stack([1, n])),
            "padded": tf.pad(y, tf.stack([[0, 0], [n, 1]])),
            "padded_value": tf.pad(y, tf.stack([[n - 1, 0], [0, 2]]), constant_values=0.5),
            "symmetric": tf.pad(y, [[1, 1], [0, 0]], mode="SYMMETRIC"),
        }

    return fn


def _fill_split(tf):
    """FILL and RANGE of computed dims, SPLIT_V by computed sizes (one -1), SPLIT of the
    dynamic (doubled) batch, SLICE with a computed begin and size."""

    def fn(x):
        n = tf.shape(x)[0]
        ramp = tf.cast(tf.range(n * 2), tf.float32)
        head, rest = tf.split(x, tf.stack([n, -1]), num=2, axis=1)
        return {
            "filled": tf.fill(tf.stack([n, n + 1]), 0.75) + x[0, 0],
            "broadcast": tf.broadcast_to(x[:, :1], tf.stack([n, n])),
            "ramp": ramp * x[0, 0],
            "head": head * 2.0,
            "rest": rest - 1.0,
            "halves": tf.split(tf.concat([x, x * 2.0], axis=0), 2, axis=0)[1],
            "sliced": tf.slice(x, tf.stack([0, n - 1]), tf.stack([-1, WIDTH - n])),
        }

    return fn


def _stft(tf):
    """The magnitude STFT of [batch, SAMPLES] audio: TF computes the frame count with shape
    arithmetic on the dynamic batch."""

    def fn(x):
        return tf.abs(tf.signal.stft(x, frame_length=32, frame_step=16, fft_length=32))

    return fn


MODELS = {
    "strided": (_strided, WIDTH),
    "reshape_tile_pad": (_reshape_tile_pad, WIDTH),
    "fill_split": (_fill_split, WIDTH),
    "stft": (_stft, SAMPLES),
}
INT8_MODELS = ("strided", "reshape_tile_pad")


def build(name: str, mode: str) -> bytes:
    """Model ``name`` in ``mode`` ("float"; "int8": full integer, int8 I/O, calibrated on 16
    seeded inputs of batch 3)."""
    tf = _tf()
    make, width = MODELS[name]
    signature = [tf.TensorSpec([None, width], tf.float32)]
    concrete = tf.function(make(tf), input_signature=signature).get_concrete_function()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], None)
    if mode == "int8":
        full_integer(converter, (3, width))
    return converter.convert()
