#!/usr/bin/env python
"""Generalisation sweep of qkeras2qonnx over seeded QKeras models of the kinds people ship.

Builds small models (jet-tagging MLPs, CNNs, folded batchnorm, autoencoders, residual graphs,
plain Keras layers mixed with Q-layers, every quantizer family) in BOTH generations: QKeras 0.9
on tf_keras and qkeras-v3 on Keras 3, each generation in its own process (one process can import
only one ``qkeras``). Per model: ``qkeras2qonnx.convert`` in memory and after a save/load round
trip (.h5 + SavedModel on Keras 2, .keras + .h5 on Keras 3; ``--cli`` adds the CLI on the
file), ``onnx.checker``, then QONNX (qonnx executor) vs QKeras ``predict`` at batch 1 and 8
within 1e-6 relative. Prints a table: model x generation x source -> exact / max error /
refusal / crash.

    python scripts/sweep_qkeras.py [--only NAME,...] [--gen keras2|keras3] [--cli] [--no-files]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

STEP = 1 / 16  # inputs on a grid: exact first-layer products whatever the summation order
SAMPLES = 16


def builders(K, Q):  # noqa: C901, PLR0915 - one table of small model builders
    """name -> zero-argument builder of a model; ``K`` is the Keras module, ``Q`` qkeras."""
    L = K.layers
    qb, qr = Q.quantized_bits, Q.quantized_relu

    def dense(n, kq, name, bq=None, **kw):
        return Q.QDense(n, kernel_quantizer=kq, bias_quantizer=bq, name=name, **kw)

    def jet_mlp():
        x = K.Input((16,), name="jets")
        h = dense(32, qb(6, 0, alpha=1), "fc1", qb(6, 0, alpha=1))(x)
        h = Q.QBatchNormalization(name="bn1")(h)
        h = Q.QActivation("quantized_relu(6,0)", name="relu1")(h)
        h = dense(16, qb(6, 0, alpha=1), "fc2", qb(6, 0, alpha=1))(h)
        h = Q.QActivation(qr(6, 0), name="relu2")(h)
        h = dense(5, qb(6, 0, alpha=1), "out", qb(6, 0, alpha=1))(h)
        h = L.Activation("softmax", name="softmax")(h)
        return K.Model(x, h, name="jet_mlp")

    def jet_mlp_auto():
        x = K.Input((16,), name="jets")
        h = dense(16, qb(4, 0, alpha="auto"), "fc1", qb(8, 3))(x)
        h = Q.QActivation("quantized_relu(4,0)", name="relu1")(h)
        h = dense(12, qb(4, 0, alpha="auto_po2"), "fc2")(h)
        h = Q.QBatchNormalization(
            gamma_quantizer=qb(6, 2, alpha=1),
            beta_quantizer=qb(6, 2, alpha=1),
            mean_quantizer=qb(6, 2, alpha=1),
            variance_quantizer=qb(6, 2, alpha=1),
            name="qbn",
        )(h)
        h = Q.QActivation(qb(8, 3, alpha=1), name="act2")(h)
        h = dense(5, qb(3, 0, alpha=1, symmetric=1), "out")(h)
        return K.Model(x, h, name="jet_mlp_auto")

    def bits_combos():
        x = K.Input((10,), name="x")
        h = dense(8, qb(4, 0, symmetric=1, alpha=1), "sym")(x)
        h = Q.QActivation(qb(4, 2, keep_negative=False), name="unsigned")(h)
        h = dense(8, qb(4, 2, keep_negative=False, alpha=1), "kunsigned")(h)
        h = Q.QActivation(qb(6, 2, symmetric=1), name="act_sym")(h)
        h = dense(8, qb(3, 1, alpha="auto", symmetric=1), "auto_sym")(h)
        h = Q.QActivation(qb(2, 1), name="act_2bit")(h)
        h = dense(8, qb(8, 0, alpha="auto_po2", keep_negative=False), "po2_unsigned")(h)
        h = Q.QActivation(qb(8, 4, alpha=1), name="act8")(h)
        h = dense(6, qb(1, 0, alpha=1), "one_bit")(h)
        h = Q.QActivation(qb(5, 5, keep_negative=False, alpha=1), name="act_int")(h)
        h = dense(4, qb(6, 2, alpha=1, symmetric=1, keep_negative=True), "wide")(h)
        return K.Model(x, h, name="bits_combos")

    def per_channel():
        x = K.Input((8, 8, 2), name="image")
        h = Q.QConv2D(4, 3, kernel_quantizer=qb(4, 0, alpha="auto"), name="c1")(x)
        h = Q.QActivation(qr(6, 2), name="r1")(h)
        h = Q.QConv2D(4, 3, kernel_quantizer=qb(4, 0, alpha="auto_po2"), name="c2")(h)
        h = Q.QActivation(qb(8, 3, alpha=1), name="act")(h)
        h = L.Flatten(name="flat")(h)
        h = dense(3, qb(5, 0, alpha="auto", keep_negative=False), "fc")(h)
        return K.Model(x, h, name="per_channel")

    def dynamic_alpha():
        """alpha='auto_po2' on an activation: the scale follows each batch's values."""
        x = K.Input((8,), name="x")
        h = dense(8, qb(6, 0, alpha=1), "fc1")(x)
        h = Q.QActivation(qb(8, 3, alpha="auto_po2"), name="act_auto_po2")(h)
        return K.Model(x, h, name="dynamic_alpha")

    def po2():
        x = K.Input((8,), name="x")
        h = dense(8, Q.quantized_po2(4), "po2_k")(x)
        h = Q.QActivation(Q.quantized_relu_po2(4, max_value=4), name="relu_po2")(h)
        h = dense(8, Q.quantized_po2(5, max_value=1), "po2_max")(h)
        h = Q.QActivation(Q.quantized_po2(5, max_value=8), name="act_po2")(h)
        h = dense(4, qb(6, 0, alpha=1), "out")(h)
        return K.Model(x, h, name="po2")

    def relu_variants():
        x = K.Input((8,), name="x")
        h = dense(8, qb(6, 0, alpha=1), "fc1")(x)
        h = Q.QActivation(qr(4, 2, negative_slope=0.25), name="leaky")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc2")(h)
        h = Q.QActivation(qr(8, 3, relu_upper_bound=4), name="bounded")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc3")(h)
        h = Q.QActivation(qr(3, 0), name="relu30")(h)
        h = dense(4, qb(6, 0, alpha=1), "fc4", activation=qr(5, 1))(h)
        return K.Model(x, h, name="relu_variants")

    def tanh_sigmoid():
        x = K.Input((8,), name="x")
        h = dense(8, qb(6, 0, alpha=1), "fc1")(x)
        h = Q.QActivation(Q.quantized_tanh(4), name="tanh")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc2")(h)
        h = Q.QActivation(Q.quantized_sigmoid(6), name="sigmoid")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc3")(h)
        h = Q.QActivation(Q.quantized_tanh(6, symmetric=True), name="tanh_sym")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc4")(h)
        h = Q.QActivation(Q.quantized_sigmoid(4, symmetric=True), name="sigmoid_sym")(h)
        return K.Model(x, h, name="tanh_sigmoid")

    def real_tanh_sigmoid():
        x = K.Input((8,), name="x")
        h = dense(8, qb(6, 0, alpha=1), "fc1")(x)
        h = Q.QActivation(Q.quantized_tanh(8, use_real_tanh=True), name="real_tanh")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc2")(h)
        h = Q.QActivation(Q.quantized_sigmoid(6, use_real_sigmoid=True), name="real_sig")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc3")(h)
        h = Q.QActivation(qr(6, 2, use_sigmoid=1), name="relu_sigmoid")(h)
        return K.Model(x, h, name="real_tanh_sigmoid")

    def hard_strings():
        x = K.Input((8,), name="x")
        h = dense(8, qb(6, 0, alpha=1), "fc1")(x)
        h = Q.QActivation("hard_sigmoid", name="hsig")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc2")(h)
        h = Q.QActivation("quantized_tanh(4)", name="tanh_s")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc3")(h)
        h = Q.QActivation("quantized_bits(6,2,1)", name="bits_s")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc4", activation="quantized_relu(4,0)")(h)
        h = Q.QActivation("binary", name="bin_s")(h)
        h = dense(4, qb(6, 0, alpha=1), "fc5")(h)
        h = Q.QActivation("quantized_sigmoid(4)", name="sig_s")(h)
        return K.Model(x, h, name="hard_strings")

    def binary_ternary():
        x = K.Input((8,), name="x")
        h = dense(8, Q.binary(alpha=1), "bin_k")(x)
        h = Q.QActivation(Q.binary(use_01=True), name="bin01")(h)
        h = dense(8, Q.ternary(alpha=1), "ter_k")(h)
        h = Q.QActivation(Q.ternary(threshold=0.3), name="ter_act")(h)
        h = dense(8, Q.binary(alpha="auto"), "bin_auto")(h)
        h = Q.QActivation(Q.binary(), name="sign")(h)
        h = dense(4, Q.ternary(alpha="auto_po2"), "ter_po2")(h)
        return K.Model(x, h, name="binary_ternary")

    def stochastic():
        x = K.Input((8,), name="x")
        h = dense(8, qb(6, 0, alpha=1), "fc1")(x)
        h = Q.QActivation(Q.stochastic_binary(), name="sbin")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc2")(h)
        return K.Model(x, h, name="stochastic")

    def bernoulli():
        x = K.Input((8,), name="x")
        h = dense(8, qb(6, 0, alpha=1), "fc1")(x)
        h = Q.QActivation(Q.bernoulli(), name="bern")(h)
        h = dense(4, qb(6, 0, alpha=1), "fc2")(h)
        return K.Model(x, h, name="bernoulli")

    def ulaw_hswish():
        x = K.Input((8,), name="x")
        h = dense(8, qb(6, 0, alpha=1), "fc1")(x)
        h = Q.QActivation(Q.quantized_ulaw(8, 0), name="ulaw")(h)
        h = dense(8, qb(6, 0, alpha=1), "fc2")(h)
        h = Q.QActivation(Q.quantized_hswish(8, 3), name="hswish")(h)
        h = dense(4, qb(6, 0, alpha=1), "fc3")(h)
        return K.Model(x, h, name="ulaw_hswish")

    def cnn2d():
        x = K.Input((12, 12, 1), name="image")
        h = Q.QConv2D(4, 3, kernel_quantizer=qb(6, 0, alpha=1), bias_quantizer=qb(6, 0), name="c1")(
            x
        )
        h = Q.QBatchNormalization(name="bn1")(h)
        h = Q.QActivation("quantized_relu(6,2)", name="r1")(h)
        h = L.MaxPooling2D(2, name="pool1")(h)
        h = Q.QConv2D(6, 3, padding="same", kernel_quantizer=qb(6, 0, alpha=1), name="c2")(h)
        h = L.BatchNormalization(name="bn2")(h)
        h = Q.QActivation(qr(6, 2), name="r2")(h)
        h = L.Flatten(name="flat")(h)
        h = L.Dropout(0.2, name="drop")(h)
        h = dense(5, qb(6, 0, alpha=1), "head")(h)
        h = L.Activation("softmax", name="softmax")(h)
        return K.Model(x, h, name="cnn2d")

    def folded_bn():
        x = K.Input((8, 8, 3), name="image")
        h = Q.QConv2DBatchnorm(
            4, 3, kernel_quantizer=qb(6, 0, alpha=1), bias_quantizer=qb(10, 4, alpha=1), name="cbn"
        )(x)
        h = Q.QActivation(qr(6, 2), name="r1")(h)
        h = Q.QDepthwiseConv2DBatchnorm(
            3,
            depthwise_quantizer=qb(6, 0, alpha=1),
            bias_quantizer=qb(10, 4, alpha=1),
            name="dwbn",
        )(h)
        h = Q.QActivation(qr(6, 2), name="r2")(h)
        h = L.GlobalAveragePooling2D(name="gap")(h)
        return K.Model(x, h, name="folded_bn")

    def separable():
        x = K.Input((10, 10, 3), name="image")
        h = Q.QDepthwiseConv2D(
            3,
            depthwise_quantizer=qb(6, 0, alpha=1),
            bias_quantizer=qb(8, 3),
            name="dw",
        )(x)
        h = Q.QActivation(qr(6, 2), name="r1")(h)
        h = Q.QSeparableConv2D(
            4,
            3,
            padding="same",
            depthwise_quantizer=qb(6, 0, alpha=1),
            pointwise_quantizer=qb(6, 0, alpha=1),
            bias_quantizer=qb(8, 3),
            name="sep",
        )(h)
        h = Q.QActivation(qr(8, 3), name="r2")(h)
        h = Q.QAveragePooling2D(2, average_quantizer=qb(8, 2, alpha=1), name="avg")(h)
        h = Q.QGlobalAveragePooling2D(average_quantizer=qb(8, 2, alpha=1), name="gap")(h)
        return K.Model(x, h, name="separable")

    def conv1d():
        x = K.Input((20, 3), name="seq")
        h = Q.QConv1D(4, 3, kernel_quantizer=qb(6, 0, alpha=1), bias_quantizer=qb(8, 3), name="c1")(
            x
        )
        h = Q.QActivation(qr(6, 2), name="r1")(h)
        h = L.MaxPooling1D(2, name="pool")(h)
        h = Q.QSeparableConv1D(
            4,
            3,
            depthwise_quantizer=qb(6, 0, alpha=1),
            pointwise_quantizer=qb(6, 0, alpha=1),
            name="sep",
        )(h)
        h = Q.QActivation(qb(8, 3, alpha=1), name="a2")(h)
        h = L.Flatten(name="flat")(h)
        h = dense(3, qb(6, 0, alpha=1), "head")(h)
        return K.Model(x, h, name="conv1d")

    def autoencoder():
        x = K.Input((8, 8, 1), name="image")
        h = Q.QConv2D(
            4, 3, strides=2, padding="same", kernel_quantizer=qb(6, 0, alpha=1), name="e"
        )(x)
        h = Q.QActivation(qr(6, 2), name="r1")(h)
        h = L.UpSampling2D(2, name="up")(h)
        h = Q.QConv2DTranspose(
            3, 3, padding="same", kernel_quantizer=qb(6, 0, alpha=1), name="qdeconv"
        )(h)
        h = Q.QActivation(qr(6, 2), name="r2")(h)
        h = L.Conv2DTranspose(2, 2, strides=2, name="deconv")(h)
        h = Q.QConv2D(1, 3, padding="same", kernel_quantizer=qb(6, 0, alpha=1), name="d")(h)
        return K.Model(x, h, name="autoencoder")

    def residual():
        x = K.Input((8, 8, 2), name="image")
        a = Q.QConv2D(4, 3, padding="same", kernel_quantizer=qb(6, 0, alpha=1), name="c1")(x)
        a = Q.QActivation(qr(6, 2), name="r1")(a)
        b = Q.QConv2D(4, 3, padding="same", kernel_quantizer=qb(6, 0, alpha=1), name="c2")(a)
        b = Q.QActivation(qr(6, 2), name="r2")(b)
        s = L.Add(name="add")([a, b])
        s = Q.QActivation(qb(8, 4, alpha=1), name="a_add")(s)
        c = L.Concatenate(name="cat")([s, a])
        c = Q.QConv2D(2, 1, kernel_quantizer=qb(6, 0, alpha=1), name="c3")(c)
        c = L.GlobalAveragePooling2D(name="gap")(c)
        return K.Model(x, c, name="residual")

    def plain_mix():
        x = K.Input((8, 8, 2), name="image")
        h = L.ZeroPadding2D(1, name="pad")(x)
        h = Q.QConv2D(4, 3, kernel_quantizer=qb(6, 0, alpha=1), name="c1")(h)
        h = L.BatchNormalization(name="bn")(h)
        h = Q.QActivation(qr(6, 2), name="r1")(h)
        h = L.Cropping2D(((1, 0), (0, 1)), name="crop")(h)
        h = L.MaxPooling2D(2, name="pool")(h)
        h = L.Permute((2, 1, 3), name="perm")(h)
        h = L.Reshape((9, 4), name="reshape")(h)
        h = Q.QConv1D(3, 2, kernel_quantizer=qb(6, 0, alpha=1), name="c1d")(h)
        h = L.Dropout(0.1, name="drop")(h)
        h = L.Flatten(name="flat")(h)
        h = dense(3, qb(6, 0, alpha=1), "head")(h)
        return K.Model(x, h, name="plain_mix")

    def sequential_mlp():
        return K.Sequential(
            [
                K.Input((6,)),
                dense(8, qb(4, 0, alpha=1), "fc1"),
                Q.QActivation("quantized_relu(4,0)", name="r1"),
                L.Dropout(0.1),
                dense(3, qb(4, 0, alpha=1), "fc2"),
            ],
            name="sequential_mlp",
        )

    def edge_conv():
        x = K.Input((9, 9, 2), name="image")
        h = Q.QActivation(qb(8, 0, alpha=1), name="in_q")(x)
        h = Q.QConv2D(
            4,
            3,
            strides=2,
            padding="same",
            use_bias=False,
            kernel_quantizer=qb(4, 0, alpha=1),
            activation="quantized_relu(4,0)",
            name="c_same_s2",
        )(h)
        h = Q.QDepthwiseConv2D(
            3, depth_multiplier=2, padding="same", depthwise_quantizer=qb(5, 0, alpha=1), name="dw2"
        )(h)
        h = L.LeakyReLU(0.1, name="leaky")(h)
        h = Q.QConv2D(3, 2, dilation_rate=2, kernel_quantizer=Q.ternary(), name="dil_ter")(h)
        h = L.ReLU(max_value=2.0, name="relu6ish")(h)
        h = Q.QSeparableConv2D(
            4,
            2,
            depth_multiplier=2,
            depthwise_quantizer=qb(5, 0, alpha=1),
            pointwise_quantizer=Q.binary(),
            name="sep_dm2",
        )(h)
        h = Q.QAveragePooling2D(1, name="avg_plain")(h)
        h = Q.QGlobalAveragePooling2D(name="gap_plain")(h)
        h = L.Softmax(name="softmax")(h)
        return K.Model(x, h, name="edge_conv")

    def edge_conv1d():
        x = K.Input((16, 2), name="seq")
        h = Q.QConv1D(
            4, 3, padding="causal", dilation_rate=2, kernel_quantizer=qb(6, 0, alpha=1), name="c"
        )(x)
        h = Q.QActivation("quantized_relu(3)", name="r")(h)
        h = Q.QConv1D(4, 3, strides=2, padding="same", kernel_quantizer=qb(6, 0), name="c2")(h)
        h = L.UpSampling1D(2, name="up")(h)
        h = Q.QActivation("quantized_bits(8,0)", name="a")(h)
        h = L.GlobalMaxPooling1D(name="gmp")(h)
        return K.Model(x, h, name="edge_conv1d")

    def edge_transpose():
        x = K.Input((4, 4, 2), name="image")
        h = Q.QConv2DTranspose(
            3,
            3,
            strides=2,
            padding="valid",
            kernel_quantizer=qb(6, 0, alpha=1),
            bias_quantizer=qb(8, 3),
            name="t_valid",
        )(x)
        h = Q.QActivation(qr(6, 2), name="r")(h)
        h = L.UpSampling2D(2, interpolation="bilinear", name="bilinear")(h)
        h = Q.QConv2DTranspose(
            2, 2, strides=2, padding="same", kernel_quantizer=qb(4, 0, alpha="auto"), name="t_same"
        )(h)
        return K.Model(x, h, name="edge_transpose")

    def multi_io():
        a = K.Input((6,), name="a")
        b = K.Input((4,), name="b")
        inner = K.Sequential(
            [
                K.Input((6,)),
                dense(5, qb(6, 0, alpha=1), "in_fc"),
                Q.QActivation(qr(6, 2), name="in_r"),
            ],
            name="inner",
        )
        h = inner(a)
        g = dense(5, qb(6, 0, alpha=1), "b_fc")(b)
        s = L.Multiply(name="mul")([h, g])
        s = Q.QActivation(qb(8, 3, alpha=1), name="s_q")(s)
        c = L.Concatenate(name="cat")([s, b])
        o1 = dense(3, qb(6, 0, alpha=1), "o1")(c)
        o2 = L.Subtract(name="sub")([h, g])
        return K.Model([a, b], [o1, o2], name="multi_io")

    table = {
        f.__name__: f
        for f in (
            jet_mlp,
            jet_mlp_auto,
            bits_combos,
            per_channel,
            dynamic_alpha,
            po2,
            relu_variants,
            tanh_sigmoid,
            real_tanh_sigmoid,
            hard_strings,
            binary_ternary,
            stochastic,
            bernoulli,
            ulaw_hswish,
            cnn2d,
            folded_bn,
            separable,
            conv1d,
            autoencoder,
            residual,
            plain_mix,
            sequential_mlp,
            edge_conv,
            edge_conv1d,
            edge_transpose,
            multi_io,
        )
    }
    return table


def seed_weights(model, seed: int) -> None:
    """Trained-looking weights: per-output-channel spread so alpha='auto' scales differ."""
    import numpy as np

    rng = np.random.default_rng(seed)
    for layer in model.layers:
        values = []
        for w in layer.weights:
            dtype = np.dtype(getattr(w.dtype, "as_numpy_dtype", w.dtype))
            name = w.name.split("/")[-1].split(":")[0]
            shape = tuple(w.shape)
            current = np.asarray(w.numpy() if hasattr(w, "numpy") else w)
            if not np.issubdtype(dtype, np.floating):
                values.append(current)
            elif name.startswith(("moving_variance", "gamma")):
                values.append(rng.uniform(0.5, 1.5, shape).astype(dtype))
            elif len(shape) >= 2:
                spread = rng.uniform(0.2, 1.5, shape[-1])
                values.append((rng.normal(0.0, 0.5, shape) * spread).astype(dtype))
            else:
                values.append(rng.normal(0.0, 0.3, shape).astype(dtype))
        if values:
            layer.set_weights(values)


def compare(model, onnx_model, seed: int = 0) -> tuple[bool, float]:
    """QONNX vs QKeras predict at batch 1 and 8: (within 1e-6 relative, max abs error)."""
    import numpy as np

    from qonnx_ingest.execute import execute_qonnx

    rng = np.random.default_rng(seed)
    ok, worst = True, 0.0
    names = [i.name for i in onnx_model.graph.input]
    for batch in (1, 8):
        xs = [
            np.round(rng.uniform(-2, 2, (SAMPLES, *t.shape[1:])) / STEP).astype(np.float32) * STEP
            for t in model.inputs
        ]
        ref = model.predict(xs if len(xs) > 1 else xs[0], batch_size=batch, verbose=0)
        ref = ref if isinstance(ref, list) else [ref]
        for start in range(0, SAMPLES, batch):
            feed = {n: x[start : start + batch] for n, x in zip(names, xs, strict=True)}
            got = execute_qonnx(onnx_model, feed)
            for o, r in zip(onnx_model.graph.output, ref, strict=True):
                r = np.asarray(r[start : start + batch])
                g = got[o.name]
                if g.shape != r.shape:
                    return False, float("inf")
                err = float(np.max(np.abs(g - r)))
                worst = max(worst, err)
                scale = float(np.max(np.abs(r))) if r.size else 0.0
                ok &= bool(np.all(np.abs(g - r) <= 1e-6 * np.abs(r) + 1e-6 * max(scale, 1e-30)))
    return ok, worst


def attempt(run, model) -> str:
    """One conversion + checker + comparison, summarised as a table cell."""
    import onnx

    from qonnx_ingest.errors import ConversionError

    try:
        onnx_model = run()
    except ConversionError as e:
        return "refused: " + str(e).splitlines()[0][:400]
    except Exception as e:  # noqa: BLE001 - the sweep reports crashes
        tb = traceback.extract_tb(e.__traceback__)[-1]
        where = f"{Path(tb.filename).name}:{tb.lineno}"
        return (
            f"CRASH {type(e).__name__} @{where}: " + str(e).splitlines()[0][:140]
            if str(e)
            else f"CRASH {type(e).__name__} @{where}"
        )
    try:
        onnx.checker.check_model(onnx_model)
    except Exception as e:  # noqa: BLE001
        return "checker: " + str(e).splitlines()[0][:140]
    try:
        ok, err = compare(model, onnx_model)
    except Exception as e:  # noqa: BLE001
        return f"CRASH running: {type(e).__name__}: " + str(e).splitlines()[0][:140]
    return "exact" if ok else f"WRONG max err {err:.3g}"


def deterministic(model) -> bool:
    import numpy as np

    xs = [
        np.linspace(-2, 2, 8 * int(np.prod(t.shape[1:])), dtype=np.float32).reshape(
            (8, *t.shape[1:])
        )
        for t in model.inputs
    ]
    a = model.predict(xs if len(xs) > 1 else xs[0], verbose=0)
    b = model.predict(xs if len(xs) > 1 else xs[0], verbose=0)
    a, b = (r if isinstance(r, list) else [r] for r in (a, b))
    return all(np.array_equal(u, v) for u, v in zip(a, b, strict=True))


def worker(gen: str, only: list[str] | None, files: bool, cli: bool, out: Path) -> None:
    """Sweep one generation; ``out`` gets the rows so far after each model (a crash of the
    process keeps the finished rows)."""
    from qkeras2qonnx import flavour

    flavour.enter(gen)
    import onnx

    if gen == flavour.KERAS2:
        import tf_keras as K
    else:
        import keras as K
    import numpy as np
    import qkeras as Q

    import qkeras2qonnx

    rows = []
    table = builders(K, Q)
    tmp = Path(tempfile.mkdtemp(prefix=f"sweep-{gen}-"))
    for index, (name, build) in enumerate(table.items()):
        if only and name not in only:
            continue
        row = {"model": name, "gen": gen}
        try:
            model = build()
            seed_weights(model, index)
            model.predict(  # the model runs at all in this generation
                [np.zeros((1, *t.shape[1:]), np.float32) for t in model.inputs], verbose=0
            )
        except Exception as e:  # noqa: BLE001
            row["memory"] = f"build fails: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
            rows.append(row)
            out.write_text(json.dumps(rows))
            continue
        try:
            if not deterministic(model):
                row["note"] = "non-deterministic at inference"
        except Exception as e:  # noqa: BLE001
            row["note"] = f"determinism check fails: {type(e).__name__}"
        row["memory"] = attempt(lambda m=model: qkeras2qonnx.convert(m), model)
        if files:
            kinds = ("h5", "savedmodel") if gen == flavour.KERAS2 else ("keras", "h5")
            for kind in kinds:
                path = tmp / f"{name}.{kind}" if kind != "savedmodel" else tmp / f"{name}_sm"
                try:
                    if kind == "savedmodel":
                        model.save(path, save_format="tf")
                    else:
                        model.save(path)
                except Exception as e:  # noqa: BLE001
                    row[kind] = f"save fails: {type(e).__name__}: {str(e).splitlines()[0][:100]}"
                    continue
                row[kind] = attempt(lambda p=path: qkeras2qonnx.convert(p), model)
                if cli and kind == kinds[0]:
                    cli_out = tmp / f"{name}.cli.onnx"
                    env = dict(os.environ, PYTHONPATH=str(ROOT))
                    done = subprocess.run(
                        [sys.executable, "-m", "qkeras2qonnx", str(path), "-o", str(cli_out)],
                        capture_output=True,
                        text=True,
                        env=env,
                        check=False,
                    )
                    if done.returncode:
                        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
                        row["cli"] = f"exit {done.returncode}: {tail[:150]}"
                    else:
                        row["cli"] = attempt(lambda o=cli_out: onnx.load(o), model)
        rows.append(row)
        out.write_text(json.dumps(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated model names")
    parser.add_argument("--gen", choices=("keras2", "keras3"), action="append")
    parser.add_argument("--no-files", action="store_true", help="skip save/load round trips")
    parser.add_argument("--cli", action="store_true", help="also run the CLI on the first file")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args()
    only = args.only.split(",") if args.only else None
    if args.worker:
        worker(args.worker, only, not args.no_files, args.cli, Path(args.json))
        return
    from qkeras2qonnx import flavour

    rows: list[dict] = []
    for gen in args.gen or ("keras2", "keras3"):
        env = flavour.qkeras3_environment() if gen == "keras3" else flavour.keras2_environment()
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            cmd = [sys.executable, __file__, "--worker", gen, "--json", out.name]
            cmd += ["--only", args.only] if args.only else []
            cmd += ["--no-files"] if args.no_files else []
            cmd += ["--cli"] if args.cli else []
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            text = Path(out.name).read_text()
            rows += json.loads(text) if text else []
            if done.returncode:
                rows.append(
                    {"model": "*", "gen": gen, "memory": "worker died: " + done.stderr[-300:]}
                )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    print_table(rows)


def print_table(rows: list[dict]) -> None:
    columns = ("memory", "h5", "savedmodel", "keras", "cli")
    print(f"{'model':<18} {'gen':<7} {'source':<10} result")
    for row in rows:
        first = True
        for col in columns:
            if col not in row:
                continue
            model = row["model"] if first else ""
            gen = row["gen"] if first else ""
            print(f"{model:<18} {gen:<7} {col:<10} {row[col]}")
            first = False
        if "note" in row:
            print(f"{'':<18} {'':<7} {'note':<10} {row['note']}")
    cells = [row[c] for row in rows for c in columns if c in row]
    counts = {
        k: sum(c.startswith(p) for c in cells)
        for k, p in (("exact", "exact"), ("wrong", "WRONG"), ("refused", "refused"))
    }
    crashes = sum(c.startswith(("CRASH", "checker", "exit", "build", "save")) for c in cells)
    print(f"\n{len(cells)} conversions: {counts} other/crash={crashes}")


if __name__ == "__main__":
    main()
