"""Graph forms of docs/keras.md beyond one layer, one small seeded model each, for
``hgq2_hls4ml.py`` (Keras 3 with hgq2; never imported by pytest): QEinsumDense on a rank-3
input (contracting the first or the last axis) and Keras 3 operation nodes between layers
(slicing, arithmetic). Every quantizer is uniform and saturating (a plain Quant), so what the
recipe meets is the form itself; each is refused, as ``test_hgq2_hls4ml`` pins.
"""

from __future__ import annotations

import keras
from hgq.layers import QDense, QEinsumDense
from hgq2_hls4ml_layers import _head, uniform_sat


def _einsum(name: str, equation: str, output_shape: tuple[int, int], bias_axes: str):
    x = keras.Input((4, 6), name="x")
    h = QEinsumDense(equation, output_shape, bias_axes=bias_axes, iq_conf=uniform_sat(),
                     name="einsum")(x)  # fmt: skip
    return _head(name, x, h)


def _between(name: str, op) -> keras.Model:
    x = keras.Input((8,), name="x")
    h = op(QDense(4, iq_conf=uniform_sat(), name="fc")(x))
    return _head(name, x, h)


GRAPH_REFUSED = {
    "einsum_first_sat": lambda: _einsum("einsum_first_sat", "bnc,nN->bNc", (5, 6), "N"),
    "einsum_last_rank3_sat": lambda: _einsum("einsum_last_rank3_sat", "bnc,cC->bnC", (4, 3), "C"),
    "slice_sat": lambda: _between("slice_sat", lambda h: h[:, 1:3]),
    "arithmetic_sat": lambda: _between("arithmetic_sat", lambda h: h * 2 + h),
}
