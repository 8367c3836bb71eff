"""Run under qkeras-v3 (``qkeras3_support.run_qkeras3``), never imported by pytest itself.

``python sweep_regression_models.py OUT`` builds the seeded qkeras-v3 models behind the fixes
``scripts/sweep/sweep_qkeras.py`` found and writes, per model NAME: ``NAME.npz`` (seeded inputs on
a 1/16 grid and qkeras-v3's predict at batch 1 and 8: ``x1 y1 x8 y8``) and
``NAME.inmemory.onnx`` from ``qkeras2qonnx.convert(model)``, or ``NAME.error.txt`` with the
error it raised.
"""

from __future__ import annotations

import sys
from pathlib import Path

import keras
import numpy as np
from qkeras import QActivation, QBatchNormalization, QConv2D, QDense, quantized_bits, quantized_relu

import qkeras2qonnx


def plain_qbatchnorm() -> keras.Model:
    """QBatchNormalization without quantizers (the hls4ml jet-tagging MLP's): Keras 3's
    BatchNormalization has no ``fused`` / ``renorm`` / ``virtual_batch_size`` arguments."""
    inp = keras.Input((6,), name="x")
    h = QDense(8, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="fc")(inp)
    h = QBatchNormalization(name="bn")(h)
    h = QActivation("quantized_relu(6,0)", name="relu")(h)
    return keras.Model(inp, h, name="plain_qbatchnorm")


def conv_plain_qbatchnorm() -> keras.Model:
    inp = keras.Input((6, 6, 1), name="image")
    h = QConv2D(3, 3, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="conv")(inp)
    h = QBatchNormalization(name="bn")(h)
    h = QActivation(quantized_relu(6, 2), name="relu")(h)
    return keras.Model(inp, h, name="conv_plain_qbatchnorm")


def float_functions() -> keras.Model:
    """QActivation("hard_sigmoid") etc.: QKeras float functions (no grid, no Quant node)."""
    inp = keras.Input((6,), name="x")
    h = QDense(6, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="fc0")(inp)
    for i, name in enumerate(("hard_sigmoid", "hard_tanh", "smooth_sigmoid", "smooth_tanh")):
        h = QActivation(name, name=name)(h)
        h = QDense(6, kernel_quantizer=quantized_bits(6, 0, alpha=1), name=f"fc{i + 1}")(h)
    return keras.Model(inp, h, name="float_functions")


MODELS = (plain_qbatchnorm, conv_plain_qbatchnorm, float_functions)


def main(out: Path) -> None:
    for index, make in enumerate(MODELS):
        model = make()
        rng = np.random.default_rng(200 + index)
        for w in model.weights:
            shape = tuple(w.shape)
            positive = w.name.startswith(("moving_variance", "gamma"))
            value = rng.uniform(0.5, 1.5, shape) if positive else rng.normal(0.0, 0.5, shape)
            w.assign(value.astype("float32"))
        arrays = {}
        for batch in (1, 8):
            x = np.round(rng.uniform(-2, 2, (batch, *model.inputs[0].shape[1:])) * 16) / 16
            arrays[f"x{batch}"] = x.astype(np.float32)
            arrays[f"y{batch}"] = np.asarray(model.predict(arrays[f"x{batch}"], verbose=0))
        np.savez(out / f"{make.__name__}.npz", **arrays)
        try:
            qkeras2qonnx.convert(model, out / f"{make.__name__}.inmemory.onnx")
        except Exception as exc:  # noqa: BLE001 - the test reports what happened
            (out / f"{make.__name__}.error.txt").write_text(f"{type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
