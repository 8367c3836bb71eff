"""Hybrid UNIDIRECTIONAL_SEQUENCE_RNN models (float activations, int8 weights): TFLite's
only int8 RNN kernel, written with tflite_writer from seeded weights."""

from __future__ import annotations

import numpy as np
from tflite_writer import build_model

ACTIVATIONS = {"NONE": 0, "RELU": 1, "TANH": 4}


def hybrid_rnn(
    activation: str = "TANH",
    time_major: bool = False,
    asymmetric: bool = False,
    seed: int = 0,
    shape=(2, 5, 6),
    units: int = 4,
) -> bytes:
    rng = np.random.default_rng(seed)
    n_in = shape[-1]
    batch = shape[1] if time_major else shape[0]
    out_shape = (*shape[:2], units)
    tensors = [
        {"name": "x", "shape": shape},
        {"name": "w", "shape": (units, n_in), "dtype": "int8", "quant": ([0.011], [0]),
         "data": rng.integers(-127, 128, (units, n_in)).astype(np.int8)},
        {"name": "r", "shape": (units, units), "dtype": "int8", "quant": ([0.007], [0]),
         "data": rng.integers(-127, 128, (units, units)).astype(np.int8)},
        {"name": "bias", "shape": (units,),
         "data": rng.uniform(-0.3, 0.3, units).astype(np.float32)},
        {"name": "state", "shape": (batch, units), "variable": True},
        {"name": "y", "shape": out_shape},
    ]  # fmt: skip
    options = {
        "TimeMajor": time_major,
        "FusedActivationFunction": ACTIVATIONS[activation],
        "AsymmetricQuantizeInputs": asymmetric,
    }
    op = {
        "op": "UNIDIRECTIONAL_SEQUENCE_RNN",
        "inputs": [0, 1, 2, 3, 4],
        "outputs": [5],
        "options": ("SequenceRNNOptions", options),
        "version": 2,
    }
    return build_model(tensors, [op], [0], [5])
