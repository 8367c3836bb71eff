"""The HGQ2 layer kinds of docs/keras.md's table, one small seeded model each, for
``hgq2_hls4ml.py`` (Keras 3 with hgq2; never imported by pytest).

Every quantizer is uniform and saturating (a plain Quant), so what hls4ml's QONNX frontend
meets is the layer's own arithmetic. ``LAYERS_SAT`` holds the kinds hls4ml 1.3.0 accepts, all
in one model (one g++ build per frontend); each ``REFUSED`` model holds one kind, and hls4ml
stops at the first node it has no handler for, so its refusal names that kind's node.
"""

from __future__ import annotations

import keras
from hgq.config import QuantizerConfig
from hgq.layers import (
    QAdd,
    QAffinedUnaryFunctionLUT,
    QAveragePooling1D,
    QAveragePooling2D,
    QAveragePooling3D,
    QBatchNormalization,
    QConv3D,
    QDense,
    QDot,
    QEinsum,
    QEinsumDense,
    QEinsumDenseBatchnorm,
    QGlobalAveragePooling1D,
    QGlobalAveragePooling2D,
    QGlobalAveragePooling3D,
    QMeanPow2,
    QMultiHeadAttention,
    QMultiply,
    QSubtract,
    QSum,
)
from hgq2_models import _trained_statistics


def uniform_sat() -> QuantizerConfig:
    """One (k, i, f) = (1, 2, 4) for the whole tensor, saturating, ties to even."""
    return QuantizerConfig(
        "kif",
        "datalane",
        i0=2,
        f0=4,
        round_mode="RND_CONV",
        overflow_mode="SAT",
        homogeneous_axis=None,
        heterogeneous_axis=(),
    )


def _head(name: str, inputs, h) -> keras.Model:
    """A flatten (when needed) and a QDense(2) after ``h``: the model's output."""
    if len(h.shape) > 2:
        h = keras.layers.Flatten(name="flat")(h)
    return keras.Model(inputs, QDense(2, iq_conf=uniform_sat(), name="out")(h), name=name)


def layers_sat() -> keras.Model:
    """QEinsumDense, QEinsumDenseBatchnorm, QBatchNormalization (trained-looking statistics,
    folded / applied by HGQ2), QSubtract, QMultiply and QAdd of two inputs."""
    a = keras.Input((6,), name="a")
    b = keras.Input((6,), name="b")
    sat = uniform_sat
    ea = QEinsumDense("ab,bc->ac", output_shape=4, bias_axes="c", iq_conf=sat(), name="ed")(a)
    eb = QEinsumDenseBatchnorm(
        "ab,bc->ac", output_shape=4, bias_axes="c", iq_conf=sat(), name="ed_bn"
    )(b)
    n = QBatchNormalization(iq_conf=sat(), name="bn")(ea)
    d = QSubtract(iq_confs=sat(), name="sub")([n, eb])
    m = QMultiply(iq_confs=sat(), name="mul")([d, eb])
    s = QAdd(iq_confs=sat(), name="add")([m, ea])
    model = _head("layers_sat", [a, b], s)
    _trained_statistics(model, seed=6)
    return model


def _pool(name: str, layer: type, shape: tuple[int, ...], **kwargs) -> keras.Model:
    x = keras.Input(shape, name="x")
    return _head(name, x, layer(iq_conf=uniform_sat(), name="pool", **kwargs)(x))


def _pair(name: str, layer: type, shape: tuple[int, ...], **kwargs) -> keras.Model:
    a, b = keras.Input(shape, name="a"), keras.Input(shape, name="b")
    return _head(name, [a, b], layer(iq_confs=uniform_sat(), name="op", **kwargs)([a, b]))


def _reduce(name: str, layer: type, **kwargs) -> keras.Model:
    x = keras.Input((4, 6), name="x")
    return _head(name, x, layer(axes=-1, iq_conf=uniform_sat(), name="op", **kwargs)(x))


def conv3d_sat() -> keras.Model:
    x = keras.Input((4, 4, 4, 2), name="volume")
    return _head("conv3d_sat", x, QConv3D(2, 2, iq_conf=uniform_sat(), name="conv")(x))


def affine_lut_sat() -> keras.Model:
    x = keras.Input((6,), name="x")
    h = QDense(4, iq_conf=uniform_sat(), name="fc")(x)
    h = QAffinedUnaryFunctionLUT("tanh", iq_conf=uniform_sat(), name="lut")(h)
    return _head("affine_lut_sat", x, h)


def attention_sat() -> keras.Model:
    """QMultiHeadAttention (self-attention, seq 4, dim 8, two heads), its projections' and
    softmax's activation quantizers uniform SAT (the softmax tables are Gathers)."""
    x = keras.Input((4, 8), name="x")
    sat = {"qkvo_iq_conf": uniform_sat(), "qkvo_oq_conf": uniform_sat()}
    h = QMultiHeadAttention(2, 4, softmax_oq_conf=uniform_sat(), name="mha", **sat)(x, x)
    return _head("attention_sat", x, h)


REFUSED = {
    "avg_pool1d_sat": lambda: _pool("avg_pool1d_sat", QAveragePooling1D, (8, 2), pool_size=2),
    "avg_pool2d_sat": lambda: _pool("avg_pool2d_sat", QAveragePooling2D, (4, 4, 2), pool_size=2),
    "avg_pool3d_sat": lambda: _pool("avg_pool3d_sat", QAveragePooling3D, (4, 4, 4, 2), pool_size=2),
    "global_avg1d_sat": lambda: _pool("global_avg1d_sat", QGlobalAveragePooling1D, (8, 2)),
    "global_avg2d_sat": lambda: _pool("global_avg2d_sat", QGlobalAveragePooling2D, (4, 4, 2)),
    "global_avg3d_sat": lambda: _pool("global_avg3d_sat", QGlobalAveragePooling3D, (4, 4, 4, 2)),
    "dot_sat": lambda: _pair("dot_sat", QDot, (6,), axes=-1),
    "einsum_sat": lambda: _pair("einsum_sat", QEinsum, (4, 6), equation="bij,bkj->bik"),
    "sum_sat": lambda: _reduce("sum_sat", QSum, scale=0.5),
    "mean_pow2_sat": lambda: _reduce("mean_pow2_sat", QMeanPow2),
    "conv3d_sat": conv3d_sat,
    "affine_lut_sat": affine_lut_sat,
    "attention_sat": attention_sat,
}
