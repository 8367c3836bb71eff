"""Run under qkeras-v3 (``qkeras3_support.run_qkeras3``), never imported by pytest itself.

``python qkeras3_models.py OUT`` builds the seeded qkeras-v3 models of the Keras 3 tests and
writes, per model NAME: ``NAME.keras``; ``NAME.npz`` with seeded inputs and qkeras-v3's own
outputs at batch 1 and 8 (``x1 y1 x8 y8``) and ``quantizers``, the count of quantizers
qkeras-v3 applies (read from the layers); ``NAME.inmemory.onnx`` from
``qkeras2qonnx.convert(model)`` on the in-memory model, or ``NAME.error.txt`` with the
ConversionError it raised; for the models in ``CHANNELS_LAST``, ``NAME.channels_last.onnx``.
``dense_bn.h5`` is the QDenseBatchnorm model as Keras 3 writes legacy HDF5.
"""

from __future__ import annotations

import sys
from pathlib import Path

import keras
import numpy as np
from qkeras import (
    QGRU,
    QLSTM,
    QActivation,
    QAveragePooling2D,
    QBatchNormalization,
    QBidirectional,
    QConv1D,
    QConv2D,
    QConv2DBatchnorm,
    QConv2DTranspose,
    QDense,
    QDenseBatchnorm,
    QDepthwiseConv2DBatchnorm,
    QGlobalAveragePooling2D,
    QScaleShift,
    QSeparableConv1D,
    QSeparableConv2D,
    QSimpleRNN,
    binary,
    quantized_bits,
    quantized_linear,
    quantized_relu,
    quantized_sigmoid,
    quantized_tanh,
    ternary,
)

import qkeras2qonnx
from qonnx_ingest.errors import ConversionError


def dense() -> keras.Model:
    inp = keras.Input((6,), name="x")
    h = QDense(
        8,
        kernel_quantizer=quantized_bits(6, 0, alpha=1),
        bias_quantizer=quantized_bits(8, 2, alpha=1),
        name="fc1",
    )(inp)
    h = QActivation("quantized_relu(6,2)", name="relu1")(h)
    h = QDense(4, kernel_quantizer=quantized_bits(5, 0, alpha="auto"), name="fc2")(h)
    h = QActivation(quantized_bits(8, 3, alpha=1), name="out")(h)
    return keras.Model(inp, h, name="dense")


def conv_bn() -> keras.Model:
    inp = keras.Input((8, 8, 2), name="image")
    h = QConv2DBatchnorm(
        4,
        3,
        kernel_quantizer=quantized_bits(6, 0, alpha=1),
        bias_quantizer=quantized_bits(10, 4, alpha=1),
        name="conv_bn",
    )(inp)
    h = QActivation(quantized_relu(6, 2), name="relu1")(h)
    h = QConv2D(
        3,
        3,
        strides=2,
        kernel_quantizer=quantized_bits(4, 0, alpha="auto_po2"),
        bias_quantizer=quantized_bits(8, 3),
        name="conv2",
    )(h)
    h = QActivation(quantized_relu(8, 3), name="relu2")(h)
    h = keras.layers.Flatten(name="flat")(h)
    h = QDense(3, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="head")(h)
    return keras.Model(inp, h, name="conv_bn")


def dense_bn() -> keras.Model:
    return keras.Sequential(
        [
            keras.Input((5,)),
            QDenseBatchnorm(
                6,
                kernel_quantizer=quantized_bits(6, 0, alpha=1),
                bias_quantizer=quantized_bits(10, 4, alpha=1),
                name="fc_bn",
            ),
            QActivation(quantized_relu(6, 2), name="relu"),
            QDense(2, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="head"),
        ],
        name="dense_bn",
    )


def v3_quantizers() -> keras.Model:
    """quantized_linear on weights (plain, unsigned-symmetric off, 'auto'; as an activation
    qkeras-v3 1.2.1 itself fails on a dynamic batch), and quantized_bits with
    post_training_scale on a kernel and an activation."""
    inp = keras.Input((6,), name="x")
    h = QDense(
        8,
        kernel_quantizer=quantized_linear(6, 0),
        bias_quantizer=quantized_linear(8, 2, symmetric=0),
        name="fc1",
    )(inp)
    h = QActivation(quantized_relu(6, 2), name="relu")(h)
    h = QDense(6, kernel_quantizer=quantized_linear(5, 0, alpha="auto"), name="fc2")(h)
    h = QActivation(
        quantized_bits(8, 2, alpha="auto", post_training_scale=np.array(0.5)), name="pts"
    )(h)
    h = QDense(
        3,
        kernel_quantizer=quantized_bits(
            6, 0, alpha="auto_po2", post_training_scale=np.full((1, 3), 0.75)
        ),
        name="fc3",
    )(h)
    h = QActivation(quantized_bits(8, 3, alpha=1), name="out")(h)
    return keras.Model(inp, h, name="v3_quantizers")


def mixed_conv() -> keras.Model:
    """The QKeras 0.9 layer rules on Keras 3 layers: folded depthwise, separable, pooling with
    an average quantizer, transposed convolution."""
    inp = keras.Input((8, 8, 3), name="image")
    h = QDepthwiseConv2DBatchnorm(
        3,
        depthwise_quantizer=quantized_bits(6, 0, alpha=1),
        bias_quantizer=quantized_bits(10, 4, alpha=1),
        name="dw_bn",
    )(inp)
    h = QActivation(quantized_relu(6, 2), name="relu1")(h)
    h = QSeparableConv2D(
        4,
        3,
        padding="same",
        depthwise_quantizer=quantized_bits(6, 0, alpha=1),
        pointwise_quantizer=quantized_bits(6, 0, alpha=1),
        bias_quantizer=quantized_bits(10, 4, alpha=1),
        name="sep",
    )(h)
    h = QActivation(quantized_relu(8, 3), name="relu2")(h)
    h = QAveragePooling2D(2, average_quantizer=quantized_bits(8, 0, alpha=1), name="pool")(h)
    h = QConv2DTranspose(
        2, 2, strides=2, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="up"
    )(h)
    h = QGlobalAveragePooling2D(name="gap")(h)
    return keras.Model(inp, h, name="mixed_conv")


def mixed_1d() -> keras.Model:
    """1-D convolutions, binary and ternary weights and activations, a quantized batch norm."""
    inp = keras.Input((12, 2), name="seq")
    h = QConv1D(
        4,
        3,
        kernel_quantizer=quantized_bits(6, 0, alpha=1),
        activation=quantized_relu(6, 2),
        name="conv",
    )(inp)
    h = QSeparableConv1D(
        4,
        3,
        depthwise_quantizer=quantized_bits(6, 0, alpha=1),
        pointwise_quantizer=quantized_bits(6, 0, alpha=1),
        name="sep",
    )(h)
    h = QActivation(quantized_bits(8, 3, alpha=1), name="act")(h)
    h = keras.layers.Flatten(name="flat")(h)
    h = QDense(6, kernel_quantizer=binary(alpha="auto_po2"), name="bin")(h)
    h = QActivation(binary(alpha=1), name="sign")(h)
    h = QDense(4, kernel_quantizer=ternary(alpha="auto"), name="ter")(h)
    h = QBatchNormalization(
        gamma_quantizer=quantized_bits(6, 2, alpha=1),
        beta_quantizer=quantized_bits(6, 2, alpha=1),
        name="bn",
    )(h)
    return keras.Model(inp, h, name="mixed_1d")


def linear_1bit() -> keras.Model:
    inp = keras.Input((4,), name="x")
    h = QDense(3, kernel_quantizer=quantized_linear(1, 0), name="fc")(inp)
    return keras.Model(inp, h)


def v3_layers() -> keras.Model:
    """QScaleShift (with and without bias) and quantized_linear as an activation (qkeras-v3
    1.2.1 runs it only on a known batch: the reference is the eager call, see EAGER)."""
    inp = keras.Input((6,), name="x")
    h = QDense(4, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="fc")(inp)
    h = QScaleShift(
        weight_quantizer=quantized_bits(4, 0, alpha=1),
        bias_quantizer=quantized_bits(6, 2, alpha=1),
        activation=quantized_relu(6, 2),
        name="ss",
    )(h)
    h = QActivation(quantized_linear(6, 2), name="lin")(h)
    h = QScaleShift(weight_quantizer=quantized_linear(5, 1), use_bias=False, name="scale")(h)
    h = QActivation(quantized_linear(8, 3, symmetric=0, alpha=0.75), name="lin_alpha")(h)
    return keras.Model(inp, h, name="v3_layers")


def _w(bits: int, integer: int = 0):
    """A weight quantizer hls4ml reads as one fixed-point type: power-of-two scale, ROUND."""
    return quantized_bits(bits, integer, alpha=1)


def hls_dense() -> keras.Model:
    """dense() with every weight on a power-of-two grid and every bias quantized (hls4ml)."""
    inp = keras.Input((6,), name="x")
    h = QDense(8, kernel_quantizer=_w(6), bias_quantizer=_w(8, 2), name="fc1")(inp)
    h = QActivation(quantized_relu(6, 2), name="relu1")(h)
    h = QDense(4, kernel_quantizer=_w(5), bias_quantizer=_w(8, 3), name="fc2")(h)
    h = QActivation(quantized_bits(8, 3, alpha=1), name="out")(h)
    return keras.Model(inp, h, name="hls_dense")


def hls_conv_bn() -> keras.Model:
    """conv_bn() the same way: folded batch norm, strided conv, quantized biases."""
    inp = keras.Input((8, 8, 2), name="image")
    h = QConv2DBatchnorm(4, 3, kernel_quantizer=_w(6), bias_quantizer=_w(10, 4), name="conv_bn")(
        inp
    )
    h = QActivation(quantized_relu(6, 2), name="relu1")(h)
    h = QConv2D(3, 3, strides=2, kernel_quantizer=_w(4), bias_quantizer=_w(8, 3), name="conv2")(h)
    h = QActivation(quantized_relu(8, 3), name="relu2")(h)
    h = keras.layers.Flatten(name="flat")(h)
    h = QDense(3, kernel_quantizer=_w(6), bias_quantizer=_w(8, 3), name="head")(h)
    return keras.Model(inp, h, name="hls_conv_bn")


def hls_dense_bn() -> keras.Model:
    """dense_bn() with its head's bias quantized."""
    inp = keras.Input((5,), name="x")
    h = QDenseBatchnorm(6, kernel_quantizer=_w(6), bias_quantizer=_w(10, 4), name="fc_bn")(inp)
    h = QActivation(quantized_relu(6, 2), name="relu")(h)
    h = QDense(2, kernel_quantizer=_w(6), bias_quantizer=_w(8, 3), name="head")(h)
    return keras.Model(inp, h, name="hls_dense_bn")


STEPS = 2


def recurrent() -> keras.Model:
    """Bidirectional QLSTM (concat, sequences) and Keras Bidirectional QGRU with reset_after
    (ave, last step), and a QSimpleRNN going backwards, flattened into one output."""

    def quantizers() -> dict:
        return {
            "kernel_quantizer": quantized_bits(6, 1, alpha=1),
            "recurrent_quantizer": quantized_bits(6, 1, alpha=1),
            "bias_quantizer": quantized_bits(6, 1, alpha=1),
            "state_quantizer": quantized_bits(8, 1, alpha=1),
            "activation": quantized_tanh(6),
        }

    gates = {"recurrent_activation": quantized_sigmoid(6)}
    inp = keras.Input((STEPS, 2), name="seq")
    a = QBidirectional(
        QLSTM(2, return_sequences=True, **gates, **quantizers()),
        merge_mode="concat",
        name="bi_lstm",
    )(inp)
    b = keras.layers.Bidirectional(
        QGRU(2, reset_after=True, **gates, **quantizers()), merge_mode="ave", name="bi_gru"
    )(inp)
    c = QSimpleRNN(2, go_backwards=True, name="back", **quantizers())(inp)
    h = keras.layers.Concatenate(name="cat")([keras.layers.Flatten(name="flat")(a), b, c])
    return keras.Model(inp, h, name="recurrent")


MODELS = (
    dense,
    conv_bn,
    dense_bn,
    v3_quantizers,
    mixed_conv,
    mixed_1d,
    linear_1bit,
    hls_dense,
    hls_conv_bn,
    hls_dense_bn,
)
# Also written as NAME.channels_last.onnx (convert(model, channels_last=True), batch 1) for
# the hls4ml acceptance test.
CHANNELS_LAST = ("dense", "conv_bn", "hls_dense", "hls_conv_bn", "hls_dense_bn")
# Converted in memory only (their .keras files are not part of the file tests).
IN_MEMORY = (v3_layers, recurrent)
EAGER = ("v3_layers",)
# Quantizer applications per step (qkeras-v3 qrecurrent.py), as in test_qkeras_recurrent.
PER_STEP = {"QSimpleRNN": 2, "QLSTM": 7, "QGRU": 4}


def set_seeded_weights(model: keras.Model, seed: int) -> None:
    """Trained-looking weights: kernels with a different spread per output channel (so 'auto'
    scales differ), positive gammas and variances."""
    rng = np.random.default_rng(seed)
    for w in model.weights:
        shape, name = tuple(w.shape), w.name
        if "int" in str(w.dtype):  # QDenseBatchnorm's iteration counter
            continue
        if name.startswith(("moving_variance", "gamma")):
            value = rng.uniform(0.5, 1.5, shape)
        elif len(shape) >= 2:
            value = rng.normal(0.0, 0.5, shape) * rng.uniform(0.2, 1.5, shape[-1])
        else:
            value = rng.normal(0.0, 0.3, shape)
        w.assign(value.astype("float32"))


def count_quantizers(model: keras.Model) -> int:
    """Quantizers qkeras-v3 applies at inference, from its layers' own attributes."""
    count = 0
    for layer in model.layers:
        kind = type(layer).__name__
        inner = (
            [layer.forward_layer, layer.backward_layer] if hasattr(layer, "forward_layer") else []
        )
        for rnn in [layer] if kind in PER_STEP else inner:  # weights once, the rest per step
            count += 3 + STEPS * PER_STEP[type(rnn).__name__]
        if kind == "QScaleShift":
            count += layer.weight_quantizer_internal is not None
            count += layer.use_bias and layer.bias_quantizer_internal is not None
            count += layer.activation is not None
            continue
        if inner or kind in PER_STEP:
            continue
        folded = kind.endswith("Batchnorm")  # always adds its folded bias
        for role in ("kernel_quantizer", "depthwise_quantizer", "pointwise_quantizer"):
            count += getattr(layer, role, None) is not None
        if getattr(layer, "bias_quantizer", None) is not None and (folded or layer.use_bias):
            count += 1
        if kind == "QBatchNormalization":  # non-uniform (po2) ones have no node
            for role in ("gamma", "beta", "mean", "variance"):
                q = getattr(layer, f"{role}_quantizer_internal", None)
                count += q is not None and "po2" not in type(q).__name__
        activation = getattr(layer, "activation", None)
        count += type(activation).__module__.startswith("qkeras")
    return count


def main(out: Path) -> None:
    for index, make in enumerate(MODELS + IN_MEMORY):
        name = make.__name__
        model = make()
        set_seeded_weights(model, 100 + index)
        rng = np.random.default_rng(index)
        arrays = {"quantizers": count_quantizers(model)}
        for batch in (1, 8):
            # Inputs on a 1/16 grid: a quantized first layer then sums exact products, so TF's
            # and onnxruntime's accumulation orders agree bit for bit.
            x = np.round(rng.uniform(-2, 2, (batch, *model.inputs[0].shape[1:])) * 16) / 16
            x = x.astype(np.float32)
            arrays[f"x{batch}"] = x
            y = model(x, training=False) if name in EAGER else model.predict(x, verbose=0)
            arrays[f"y{batch}"] = np.asarray(y, np.float32)
        np.savez(out / f"{name}.npz", **arrays)
        if make in MODELS:
            model.save(out / f"{name}.keras")
        if name == "dense_bn":
            model.save(out / f"{name}.h5")
        try:
            qkeras2qonnx.convert(model, out / f"{name}.inmemory.onnx")
        except ConversionError as exc:
            (out / f"{name}.error.txt").write_text(str(exc))
        if name in CHANNELS_LAST:
            qkeras2qonnx.convert(model, out / f"{name}.channels_last.onnx", channels_last=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
