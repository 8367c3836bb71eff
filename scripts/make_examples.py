"""Generate the small example models in examples/ that the README's demo converts.

Run once with the keras extra installed (``.venv/bin/python scripts/make_examples.py``); the
results are committed so the demo never needs training. Weights are seeded random values, not
trained: the examples show the conversion, not accuracy.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # QKeras needs Keras 2 (tf_keras)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SEED = 20261121


def qkeras_jet_dnn(path: Path) -> None:
    """A jet-tagger-shaped QKeras MLP: 16 -> 32 -> 5, 6-bit weights, 6-bit ReLU."""
    import tensorflow as tf
    import tf_keras as keras
    from qkeras import QActivation, QDense, quantized_bits, quantized_relu

    tf.random.set_seed(SEED)
    inputs = keras.Input((16,), name="jets")
    x = QDense(
        32,
        kernel_quantizer=quantized_bits(6, 0, alpha=1),
        bias_quantizer=quantized_bits(6, 0, alpha=1),
        name="fc1",
    )(inputs)
    x = QActivation(quantized_relu(6), name="relu1")(x)
    x = QDense(
        5,
        kernel_quantizer=quantized_bits(6, 0, alpha=1),
        bias_quantizer=quantized_bits(6, 0, alpha=1),
        name="output",
    )(x)
    outputs = keras.layers.Activation("softmax", name="softmax")(x)
    model = keras.Model(inputs, outputs, name="qkeras_jet_dnn")
    rng = np.random.default_rng(SEED)
    model.set_weights([rng.normal(0, 0.3, w.shape).astype(np.float32) for w in model.get_weights()])
    model.save(path, save_format="h5")


def int8_dense_tflite(path: Path) -> None:
    """A full-integer (int8) TFLite MLP with float I/O: QUANTIZE, FULLY_CONNECTED x3, DEQUANTIZE."""
    import tensorflow as tf
    import tf_keras as keras

    tf.random.set_seed(SEED)
    model = keras.Sequential(
        [
            keras.Input((16,)),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(4),
        ]
    )
    rng = np.random.default_rng(SEED)

    def representative():
        for _ in range(64):
            yield [rng.uniform(-1, 1, (1, 16)).astype(np.float32)]

    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    path.write_bytes(converter.convert())


def main() -> None:
    EXAMPLES.mkdir(exist_ok=True)
    qkeras_jet_dnn(EXAMPLES / "qkeras_jet_dnn.h5")
    int8_dense_tflite(EXAMPLES / "int8_dense.tflite")
    for p in sorted(EXAMPLES.iterdir()):
        print(f"{p.relative_to(EXAMPLES.parent)}: {p.stat().st_size} bytes")


if __name__ == "__main__":
    main()
