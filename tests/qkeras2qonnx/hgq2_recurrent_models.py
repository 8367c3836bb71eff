"""Run under Keras 3 with hgq2 (``qkeras3_support.run_qkeras3``), never imported by pytest.

``python hgq2_recurrent_models.py OUT`` builds the seeded HGQ2 recurrent models of
``test_hgq2_recurrent.py`` and writes, per model NAME, what ``hgq2_models.py`` writes
(``NAME.npz`` with ``x1_0`` / ``x8_0``, HGQ2's predict ``y1`` / ``y8``, ``quantizers``: the
quantizer applications the unrolled graph has; ``NAME.inmemory.onnx`` or ``NAME.error.txt``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import keras
import numpy as np
from hgq.config import QuantizerConfig
from hgq.layers import QGRU, QDense, QSimpleRNN
from hgq2_builder_io import save_and_convert

STEPS = 5


def simple_rnn() -> keras.Model:
    """HGQ2's defaults (per-element WRAP input quantizer, hard-tanh pre-activation quantizer,
    no state quantizer), the last state into a QDense."""
    inp = keras.Input((STEPS, 3), name="x")
    h = QSimpleRNN(4, name="rnn")(inp)
    return keras.Model(inp, QDense(2, name="fc")(h), name="simple_rnn")


def simple_rnn_sequences() -> keras.Model:
    """A state quantizer (per element, RND / WRAP), relu, go_backwards, every step's output
    returned (in processing order, as Keras returns it)."""
    inp = keras.Input((STEPS, 2), name="x")
    sq = QuantizerConfig("kif", "datalane", i0=1, f0=3, round_mode="RND", overflow_mode="WRAP")
    rnn = QSimpleRNN(
        3, activation="relu", enable_sq=True, sq_conf=sq, return_sequences=True,
        go_backwards=True, name="rnn",
    )  # fmt: skip
    h = rnn(inp)
    return keras.Model(inp, h, name="simple_rnn_sequences")


def gru() -> keras.Model:
    """HGQ2's defaults (reset_after, hard-sigmoid gate quantizer with its affine (0.25, 0.5),
    per-element WRAP state, reset-state and input quantizers), the last state into a QDense."""
    inp = keras.Input((STEPS, 3), name="x")
    h = QGRU(4, name="gru")(inp)
    return keras.Model(inp, QDense(2, name="fc")(h), name="gru")


def gru_reset_before() -> keras.Model:
    """reset_after=False (the reset gate before the recurrent kernel), relu candidate,
    every step's state returned."""
    inp = keras.Input((STEPS, 2), name="x")
    h = QGRU(3, activation="relu", reset_after=False, return_sequences=True, name="gru")(inp)
    return keras.Model(inp, h, name="gru_reset_before")


def gru_backwards_no_bias() -> keras.Model:
    """As HGQ2's own tests/test_rnn.py configures it: no bias (QGRUCell then has no bias
    quantizer at all), go_backwards, every step's state returned."""
    inp = keras.Input((STEPS, 3), name="x")
    h = QGRU(3, use_bias=False, go_backwards=True, return_sequences=True, name="gru")(inp)
    return keras.Model(inp, h, name="gru_backwards_no_bias")


def refuse_tanh_rnn() -> keras.Model:
    inp = keras.Input((STEPS, 2), name="x")
    return keras.Model(inp, QSimpleRNN(2, activation="tanh", name="rnn")(inp), name="tanh")


MODELS = {
    "simple_rnn": (simple_rnn, 1 + 3 + STEPS + 3),  # iq, kq rkq bq, paq per step; fc
    "simple_rnn_sequences": (simple_rnn_sequences, 1 + 3 + STEPS + STEPS - 1),  # + sq from t1
    "gru": (gru, 1 + 3 + 4 * STEPS + 3),  # state, gates, reset state, candidate per step
    "gru_reset_before": (gru_reset_before, 1 + 3 + 4 * STEPS),
    "gru_backwards_no_bias": (gru_backwards_no_bias, 1 + 2 + 4 * STEPS),
    "refuse_tanh_rnn": (refuse_tanh_rnn, 0),
}


def inputs(model: keras.Model, batch: int, seed: int) -> np.ndarray:
    """Half on a 1/16 grid (ties), half normal with standard deviation 3 (overflow)."""
    rng = np.random.default_rng(seed)
    shape = (batch, *model.inputs[0].shape[1:])
    on_grid = rng.integers(-96, 97, shape) / 16.0
    wide = rng.normal(0, 3, shape)
    return np.where(rng.random(shape) < 0.5, on_grid, wide).astype(np.float32)


def main(out: Path) -> None:
    keras.utils.set_random_seed(0)
    for name, (build, quantizers) in MODELS.items():
        model = build()
        for layer in model.layers:  # a non-zero bias: the bias quantizer has values to keep
            cell = getattr(layer, "cell", layer)
            if getattr(cell, "use_bias", False) and hasattr(cell, "bias"):
                size = int(np.prod(cell.bias.shape))
                values = np.linspace(-0.7, 0.6, size).reshape(cell.bias.shape)
                cell.bias.assign(values.astype(np.float32))
        record = {"quantizers": quantizers}
        for batch, seed in ((1, 11), (8, 12)):
            x = inputs(model, batch, seed)
            record[f"y{batch}"] = np.asarray(model.predict(x, verbose=0))
            record[f"x{batch}_0"] = x
        save_and_convert(out, name, model, record, f"{name}.inmemory.onnx")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
