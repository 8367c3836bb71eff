"""Run under qkeras-v3 (``qkeras3_support.run_qkeras3``), never imported by pytest itself.

``python qkeras3_subclassed_models.py OUT`` builds seeded subclassed qkeras-v3 models (Keras 3)
and writes, per NAME: ``NAME.npz`` (seeded inputs ``x1 x8`` on a 1/16 grid, qkeras-v3's
outputs ``y1 y8``, ``quantizers`` counted by hand) and ``NAME.onnx`` from
``qkeras2qonnx.convert``, or ``NAME.error.txt`` with the ConversionError it raised.
``net.keras`` is the subclassed model saved, converted with its class registered and (as
``net_unregistered``) without; ``unbuilt.keras`` one whose class has no ``build`` (built by
``model.build``), so Keras 3 reloads it with layers left empty.
"""

from __future__ import annotations

import sys
from pathlib import Path

import keras
import numpy as np
from qkeras import QActivation, QConv2D, QDense, quantized_bits, quantized_relu

import qkeras2qonnx
from qonnx_ingest.errors import ConversionError

INPUT = (6, 6, 2)


def qconv() -> QConv2D:
    q = quantized_bits(6, 2, alpha=1)
    return QConv2D(4, 3, padding="same", kernel_quantizer=q, bias_quantizer=q, name="conv")


@keras.saving.register_keras_serializable(package="qkeras2qonnx_tests")
class Block(keras.Model):
    """conv, quantized relu (3 quantizers)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.conv = qconv()
        self.act = QActivation(quantized_relu(6, 2), name="act")

    def call(self, x):
        return self.act(self.conv(x))


class DenseBlock(keras.layers.Layer):
    """A user-defined layer holding QKeras layers (2 quantizers)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.flat = keras.layers.Flatten(name="flat")
        self.fc = QDense(3, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="fc")
        self.act = QActivation(quantized_relu(6, 2), name="fc_act")

    def call(self, x, training=None):
        return self.act(self.fc(self.flat(x)))


@keras.saving.register_keras_serializable(package="qkeras2qonnx_tests")
class Unbuilt(keras.Model):
    """A subclassed block and a QDense (4 quantizers: 3 and a kernel), no ``build`` of its own."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.block = Block(name="block")
        self.flat = keras.layers.Flatten(name="flat")
        self.fc = QDense(3, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="fc")

    def call(self, x):
        return self.fc(self.flat(self.block(x)))


@keras.saving.register_keras_serializable(package="qkeras2qonnx_tests")
class Net(Unbuilt):
    """Unbuilt with the ``build`` Keras 3 asks for: it creates every weight, so a .keras file
    of it reloads with the trained values."""

    def build(self, input_shape):
        self.block.conv.build(input_shape)
        self.fc.build((None, int(np.prod(input_shape[1:-1])) * 4))


def seeded(model: keras.Model, seed: int) -> keras.Model:
    rng = np.random.default_rng(seed)
    model.set_weights([rng.uniform(-1, 1, w.shape).astype(np.float32) for w in model.weights])
    return model


def write(out: Path, name: str, model, quantizers: int, source=None) -> None:
    rng = np.random.default_rng(len(name))
    arrays = {"quantizers": quantizers}
    for batch in (1, 8):
        x = (np.round(rng.uniform(-2, 2, (batch, *INPUT)) * 16) / 16).astype(np.float32)
        arrays[f"x{batch}"], arrays[f"y{batch}"] = x, np.asarray(model(x, training=False))
    np.savez(out / f"{name}.npz", **arrays)
    try:
        qkeras2qonnx.convert(model if source is None else source, out / f"{name}.onnx")
    except ConversionError as exc:
        (out / f"{name}.error.txt").write_text(str(exc))


def main(out: Path) -> None:
    zeros = np.zeros((1, *INPUT), np.float32)
    only_called = Unbuilt(name="only_called")
    only_called(zeros)
    write(out, "only_called", seeded(only_called, 1), 4)  # no input shape: refused

    net = Net(name="net")
    net(zeros)  # runs its build: Keras 3 records the input shape
    seeded(net, 2)
    write(out, "net", net, 4)
    net.save(out / "net.keras")
    write(out, "net_file", net, 4, source=out / "net.keras")
    registry = keras.saving.get_custom_objects()
    ours = {n: registry.pop(n) for n in list(registry) if n.startswith("qkeras2qonnx_tests>")}
    # as in a process that never imported the classes (the command line): refused
    write(out, "net_unregistered", net, 4, source=out / "net.keras")
    registry.update(ours)

    inp = keras.Input(INPUT, name="x")
    block, dense = Block(name="block"), DenseBlock(name="dense")
    pooled = keras.layers.MaxPooling2D(2)(block(inp))
    write(out, "functional", seeded(keras.Model(inp, dense(pooled), name="functional"), 3), 5)
    sequential = keras.Sequential(
        [keras.Input(INPUT), block, keras.layers.Flatten(name="flatten")], name="sequential"
    )
    write(out, "sequential", sequential, 3)

    unbuilt = Unbuilt(name="unbuilt")
    unbuilt(zeros)
    unbuilt.build((None, *INPUT))
    seeded(unbuilt, 4)
    unbuilt.save(out / "unbuilt.keras")
    write(out, "unbuilt_file", unbuilt, 4, source=out / "unbuilt.keras")  # refused


if __name__ == "__main__":
    main(Path(sys.argv[1]))
