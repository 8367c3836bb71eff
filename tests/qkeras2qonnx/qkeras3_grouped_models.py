"""Run under qkeras-v3 (``qkeras3_support.run_qkeras3``), never imported by pytest itself.

``python qkeras3_grouped_models.py OUT`` builds the seeded QDepthwiseConv2DTranspose /
QSeparableConv2DTranspose models of ``test_qkeras3_grouped_transpose`` and writes, per model
NAME: ``NAME.npz`` (seeded inputs on a 1/16 grid and qkeras-v3's predict at batch 1 and 8,
``x1 y1 x8 y8``; ``quantizers``, the count of quantizers qkeras-v3's ``call`` applies, read
from the layers; ``groups``, layer name -> C / group_size as two arrays) and
``NAME.inmemory.onnx`` from ``qkeras2qonnx.convert(model)``, or ``NAME.error.txt``. The
``file_*`` models are also saved as ``NAME.keras`` and converted from that file
(``NAME.file.onnx``): qkeras-v3's get_config drops the activations, so those have none.
"""

from __future__ import annotations

import sys
from pathlib import Path

import keras
import numpy as np
from qkeras import (
    QConv2D,
    QDepthwiseConv2DTranspose,
    QSeparableConv2DTranspose,
    quantized_bits,
    quantized_relu,
)

import qkeras2qonnx
from qonnx_ingest.errors import ConversionError

SHAPE = (5, 5, 4)


def _model(name: str, *layers) -> keras.Model:
    inp = keras.Input(SHAPE, name="image")
    h = inp
    for layer in layers:
        h = layer(h)
    return keras.Model(inp, h, name=name)


def dw_s1_valid() -> keras.Model:
    """Depthwise (group_size 1), stride 1, valid, quantized activation."""
    return _model(
        "dw_s1_valid",
        QDepthwiseConv2DTranspose(
            4,
            3,
            strides=1,
            padding="valid",
            depthwise_kernel_quantizer=quantized_bits(4, 0, alpha=1),
            depthwise_activation=quantized_relu(4, 1),
            use_bias=False,
            name="dwt",
        ),
    )


def dw_s2_same_groups() -> keras.Model:
    """Groups of 2 with a per-channel 'auto' scale, stride 2, same, depth_multiplier 2 and a
    bias (both ignored by qkeras-v3's call), signed activation quantizer."""
    return _model(
        "dw_s2_same_groups",
        QDepthwiseConv2DTranspose(
            4,
            3,
            group_size=2,
            strides=2,
            padding="same",
            depth_multiplier=2,
            use_bias=True,
            depthwise_kernel_quantizer=quantized_bits(5, 0, alpha="auto"),
            bias_quantizer=quantized_bits(6, 2, alpha=1),
            depthwise_activation=quantized_bits(8, 3, alpha=1),
            name="dwt",
        ),
    )


def dw_one_group_unquantized_act() -> keras.Model:
    """One group of 4 (a dense transposed convolution), strides (2, 1), a (3, 2) kernel,
    no activation."""
    return _model(
        "dw_one_group_unquantized_act",
        QDepthwiseConv2DTranspose(
            4,
            (3, 2),
            group_size=4,
            strides=(2, 1),
            padding="valid",
            depthwise_kernel_quantizer=quantized_bits(6, 1, alpha=1),
            name="dwt",
        ),
    )


def sep_s1_same() -> keras.Model:
    """Separable, stride 1, same, bias, every quantizer ('auto' per channel) and both
    activations quantized."""
    return _model(
        "sep_s1_same",
        QSeparableConv2DTranspose(
            6,
            3,
            strides=1,
            padding="same",
            use_bias=True,
            depthwise_kernel_quantizer=quantized_bits(4, 0, alpha="auto"),
            pointwise_kernel_quantizer=quantized_bits(5, 0, alpha="auto"),
            bias_quantizer=quantized_bits(8, 3, alpha=1),
            depthwise_activation=quantized_relu(4, 1),
            pointwise_activation=quantized_bits(8, 3, alpha=1),
            name="sept",
        ),
    )


def sep_s2_valid() -> keras.Model:
    """Separable, stride 2, valid, depth_multiplier 2 (ignored), no bias, a plain Keras relu
    between the stages, the pointwise activation quantized."""
    return _model(
        "sep_s2_valid",
        QSeparableConv2DTranspose(
            3,
            2,
            strides=2,
            padding="valid",
            depth_multiplier=2,
            use_bias=False,
            depthwise_kernel_quantizer=quantized_bits(4, 0, alpha=1),
            pointwise_kernel_quantizer=quantized_bits(4, 0, alpha=1),
            depthwise_activation=keras.activations.relu,
            pointwise_activation=quantized_relu(6, 2),
            name="sept",
        ),
    )


def chain() -> keras.Model:
    """QConv2D -> QDepthwiseConv2DTranspose -> QSeparableConv2DTranspose: markers of three
    layers in one graph."""
    return _model(
        "chain",
        QConv2D(
            4,
            1,
            kernel_quantizer=quantized_bits(4, 0, alpha=1),
            activation=quantized_relu(4, 1),
            name="conv",
        ),
        QDepthwiseConv2DTranspose(
            4,
            2,
            group_size=2,
            strides=2,
            padding="same",
            depthwise_kernel_quantizer=quantized_bits(4, 0, alpha=1),
            depthwise_activation=quantized_relu(6, 2),
            name="dwt",
        ),
        QSeparableConv2DTranspose(
            2,
            3,
            strides=2,
            padding="valid",
            depthwise_kernel_quantizer=quantized_bits(4, 0, alpha=1),
            pointwise_kernel_quantizer=quantized_bits(4, 0, alpha=1),
            bias_quantizer=quantized_bits(8, 3, alpha=1),
            depthwise_activation=quantized_relu(4, 1),
            pointwise_activation=quantized_bits(8, 4, alpha=1),
            name="sept",
        ),
    )


def file_sep() -> keras.Model:
    """Saved as .keras: kernels and bias quantized, no activations (not saved by qkeras-v3)."""
    return _model(
        "file_sep",
        QDepthwiseConv2DTranspose(
            4,
            2,
            group_size=2,
            strides=1,
            padding="same",
            depthwise_kernel_quantizer=quantized_bits(4, 0, alpha=1),
            name="dwt",
        ),
        QSeparableConv2DTranspose(
            3,
            3,
            strides=2,
            padding="same",
            depthwise_kernel_quantizer=quantized_bits(4, 0, alpha="auto"),
            pointwise_kernel_quantizer=quantized_bits(4, 0, alpha=1),
            bias_quantizer=quantized_bits(8, 3, alpha=1),
            name="sept",
        ),
    )


def refused_filters() -> keras.Model:
    return _model("refused_filters", QDepthwiseConv2DTranspose(3, 3, name="dwt"))


def refused_dilation() -> keras.Model:
    return _model("refused_dilation", QSeparableConv2DTranspose(3, 3, dilation_rate=2, name="s"))


MODELS = (
    dw_s1_valid,
    dw_s2_same_groups,
    dw_one_group_unquantized_act,
    sep_s1_same,
    sep_s2_valid,
    chain,
    file_sep,
)
REFUSED = (refused_filters, refused_dilation)


def count_quantizers(model: keras.Model) -> int:
    """Quantizers qkeras-v3's call applies (its ``if quantizer:`` / ``is not None`` tests):
    the depthwise layer never adds its bias."""
    count = 0
    for layer in model.layers:
        kind = type(layer).__name__
        if kind == "QConv2D":
            count += 2  # kernel quantizer and activation, in the chain
        elif kind == "QDepthwiseConv2DTranspose":
            count += bool(layer.depthwise_kernel_quantizer_internal)
            count += _quantizer(layer.depthwise_activation)
        elif kind == "QSeparableConv2DTranspose":
            count += bool(layer.depthwise_kernel_quantizer_internal)
            count += bool(layer.pointwise_kernel_quantizer_internal)
            count += bool(layer.use_bias and layer.bias_quantizer_internal)
            count += _quantizer(layer.depthwise_activation)
            count += _quantizer(layer.pointwise_activation)
    return count


def _quantizer(activation) -> bool:
    return type(activation).__module__.startswith("qkeras")


def groups(model: keras.Model) -> dict:
    """Layer name -> input channels / group size (the separable layer's groups are size 1)."""
    found = {}
    for layer in model.layers:
        size = getattr(layer, "group_size", 1)
        if type(layer).__name__.endswith("Conv2DTranspose"):
            found[layer.name] = layer._input_shape[-1] // size
    return found


def seeded(model: keras.Model, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for w in model.weights:
        shape = tuple(w.shape)
        spread = rng.uniform(0.3, 1.5, shape[-1]) if len(shape) >= 2 else 1.0
        w.assign((rng.normal(0.0, 0.5, shape) * spread).astype("float32"))


def main(out: Path) -> None:
    for index, make in enumerate(MODELS):
        model = make()
        name = model.name
        seeded(model, 300 + index)
        rng = np.random.default_rng(index)
        found = groups(model)
        arrays = {
            "quantizers": count_quantizers(model),
            "group_layers": np.array(list(found)),
            "group_counts": np.array(list(found.values())),
        }
        for batch in (1, 8):
            x = np.round(rng.uniform(-2, 2, (batch, *SHAPE)) * 16) / 16
            arrays[f"x{batch}"] = x.astype(np.float32)
            arrays[f"y{batch}"] = model.predict(arrays[f"x{batch}"], verbose=0)
        np.savez(out / f"{name}.npz", **arrays)
        qkeras2qonnx.convert(model, out / f"{name}.inmemory.onnx")
        if name.startswith("file_"):
            # again in this process, after every other model's conversion: the same bytes
            qkeras2qonnx.convert(model, out / f"{name}.again.onnx")
            model.save(out / f"{name}.keras")
            qkeras2qonnx.convert(out / f"{name}.keras", out / f"{name}.file.onnx")
    for make in REFUSED:
        model = make()
        try:
            qkeras2qonnx.convert(model, out / f"{model.name}.inmemory.onnx")
        except ConversionError as exc:
            (out / f"{model.name}.error.txt").write_text(str(exc))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
