"""Exact lookup tables for HGQ2's float functions of a quantized input (QUnaryFunctionLUT,
QAffinedUnaryFunctionLUT, QSoftmax's exp and inverse tables).

A float function (tanh, exp, 1/x) computed by two runtimes can differ in the last bit, and a
quantizer after it can round that bit away; but its input is quantized, so it takes finitely
many values. HGQ2 itself is run (in Keras, at conversion) on every value of the input
quantizer's grid; the graph computes the grid index of the quantized input,
``(x - low) * 2^F`` (exact: x is on the grid), and Gathers the result HGQ2 computed. With
per-element widths the table has one column per element (flat index ``index * n + element``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from qkeras2qonnx.hgq2_layers.hgq2_quantizer import Fixed
from qonnx_ingest.errors import ConversionError

MAX_ROWS = 1 << 16  # grid points of one input quantizer
MAX_ENTRIES = 1 << 22  # rows x elements (16 MiB of float32)


@dataclass(eq=False)
class Table:
    """``values[index]`` (or ``values[index, element]``) for the input ``low + index 2^-F``."""

    low: float
    exponent: int  # F
    values: np.ndarray  # (rows,) or (rows, elements), float32


def grid(q: Fixed, where: str) -> tuple[float, int, int]:
    """(low, F, rows): the union of the per-element grids of ``q``'s outputs, step 2^-F."""
    if not q.bounded:
        raise ConversionError("a rounding-only HGQ2 quantizer before a table", where)
    active = np.broadcast_to(q.active, q.k.shape)
    if not np.any(active):
        return 0.0, 0, 1
    k, i, f = q.k[active], q.i_eff[active], q.f[active]
    top = int(f.max())
    low = min(0.0, float((-k * 2.0**i).min()))
    high = max(0.0, float((2.0**i - 2.0**-f).max()))
    rows = int(round((high - low) * 2.0**top)) + 1
    if rows > MAX_ROWS:
        raise ConversionError(
            f"the table's input quantizer has {rows} values (more than {MAX_ROWS}): "
            "refused rather than a table this large",
            where,
        )
    return low, top, rows


def build_table(call: Any, q: Fixed, shape: tuple[int, ...], where: str) -> Table:
    """The table of ``call`` (the HGQ2 layer at inference) over ``q``'s grid, per element of
    a tensor of ``shape`` (no batch axis)."""
    if any(d is None for d in shape):
        raise ConversionError(f"a table needs a static input shape, not {shape}", where)
    low, top, rows = grid(q, where)
    elements = int(np.prod(shape, dtype=np.int64))
    if rows * elements > MAX_ENTRIES:
        raise ConversionError(
            f"a table of {rows} x {elements} entries (more than {MAX_ENTRIES}): refused", where
        )
    points = (low + np.arange(rows, dtype=np.float64) * 2.0**-top).astype(np.float32)
    x = np.broadcast_to(points.reshape((rows,) + (1,) * len(shape)), (rows, *shape))
    from keras import ops

    y = np.asarray(ops.convert_to_numpy(call(np.ascontiguousarray(x))), dtype=np.float32)
    y = y.reshape(rows, elements)
    if not np.all(np.isfinite(y)):
        raise ConversionError("the function is not finite on its input grid", where)
    values = y[:, 0].copy() if np.all(y == y[:, :1]) else y
    return Table(low, top, values)


def tf_lookup(table: Table, x: Any) -> Any:
    """``table`` at the (quantized) ``x``, as TensorFlow ops (Gather in ONNX)."""
    import tensorflow as tf

    shifted = tf.subtract(x, tf.constant(np.float32(table.low)))
    index = tf.cast(tf.round(tf.multiply(shifted, np.float32(2.0**table.exponent))), tf.int32)
    if table.values.ndim == 2:
        elements = table.values.shape[1]
        positions = np.arange(elements, dtype=np.int32).reshape((1, *x.shape[1:]))
        index = tf.add(tf.multiply(index, np.int32(elements)), tf.constant(positions))
    return tf.gather(tf.constant(table.values.ravel()), index)


@functools.cache
def lookup_class() -> type:
    """A Keras 3 layer: the table of a unary function at its quantized input."""
    import keras

    class HGQ2Lookup(keras.layers.Layer):
        def __init__(self, table: Table, **kwargs: Any):
            super().__init__(**kwargs)
            self.table = table

        def call(self, inputs: Any) -> Any:
            return tf_lookup(self.table, inputs)

        def compute_output_shape(self, input_shape: Any) -> Any:
            return input_shape

    return HGQ2Lookup


@dataclass(eq=False)
class SoftmaxTables:
    """QSoftmax at inference: stable: d = max(x) - x; e = exp_table(exp_iq(d)); s = sum(e);
    y = e * inv_table(inv_iq(s)) (``exp_iq`` None when not stable: x is quantized already)."""

    axes: tuple[int, ...]
    stable: bool
    exp_iq: Fixed | None
    exp: Table
    inv_iq: Fixed
    inv: Table


@functools.cache
def softmax_class() -> type:
    import keras
    import tensorflow as tf

    from qkeras2qonnx.hgq2_layers.hgq2_quantizer import tf_apply

    class HGQ2Softmax(keras.layers.Layer):
        def __init__(self, tables: SoftmaxTables, **kwargs: Any):
            super().__init__(**kwargs)
            self.tables = tables

        def call(self, inputs: Any) -> Any:
            t = self.tables
            x = inputs
            if t.stable:
                x = tf.subtract(tf.reduce_max(x, axis=t.axes, keepdims=True), x)
            if t.exp_iq is not None:
                x = tf_apply(t.exp_iq, x)
            e = tf_lookup(t.exp, x)
            s = tf_apply(t.inv_iq, tf.reduce_sum(e, axis=t.axes, keepdims=True))
            return tf.multiply(e, tf_lookup(t.inv, s))

        def compute_output_shape(self, input_shape: Any) -> Any:
            return input_shape

    return HGQ2Softmax
