"""Hybrid UNIDIRECTIONAL_SEQUENCE_RNN (int8 weights, float activations) against the
interpreter: each step's on-the-fly symmetric quantization of the input and hidden rows is
reproduced (symmetric, and asymmetric with row zero points), so outputs agree to float32
rounding, far closer than the float RNN with the dequantized weights comes."""

from __future__ import annotations

import numpy as np
import pytest
from litert_compare import compare, reference_interpreter
from rnn_models import hybrid_rnn

import tflite2qonnx


def _float_rnn(data: bytes, x: np.ndarray, time_major: bool, activation) -> np.ndarray:
    """The same RNN in float64 with dequantized weights (no input quantization)."""
    from tflite2qonnx.flatbuffer import read_model

    sg = read_model(data).subgraphs[0]
    w, r = (np.asarray(sg.tensors[i].data, np.float64) * sg.tensors[i].quantization.scale[0]
            for i in (1, 2))  # fmt: skip
    bias = np.asarray(sg.tensors[3].data, np.float64)
    xs = x if time_major else x.transpose(1, 0, 2)
    h = np.zeros((xs.shape[1], w.shape[0]))
    out = []
    for x_t in xs:
        h = activation(x_t @ w.T + h @ r.T + bias)
        out.append(h)
    y = np.stack(out)
    return y if time_major else y.transpose(1, 0, 2)


@pytest.mark.parametrize(
    "activation, time_major, asymmetric",
    [("TANH", False, False), ("RELU", False, True), ("NONE", True, False), ("NONE", True, True)],
)
def test_hybrid_rnn_matches_interpreter_closer_than_the_float_rnn(
    activation: str, time_major: bool, asymmetric: bool
) -> None:
    data = hybrid_rnn(activation, time_major, asymmetric, seed=len(activation))
    pairs = compare(tflite2qonnx.convert(data), reference_interpreter(data), n_inputs=4, low=-2,
                    high=2)  # fmt: skip
    assert len(pairs) == 4
    for p in pairs:
        peak = max(1.0, float(np.max(np.abs(p.reference))))
        assert np.max(np.abs(p.ours - p.reference)) <= 1e-5 * peak
    # the quantization is what the kernel computes: the float RNN is visibly elsewhere
    act = {"TANH": np.tanh, "RELU": lambda v: np.maximum(v, 0), "NONE": lambda v: v}[activation]
    rng = np.random.default_rng(0)
    it = reference_interpreter(data)
    (inp,), (out,) = it.get_input_details(), it.get_output_details()
    x = rng.uniform(-2, 2, inp["shape"]).astype(np.float32)
    it.set_tensor(inp["index"], x)
    it.invoke()
    float_gap = np.max(np.abs(_float_rnn(data, x, time_major, act) - it.get_tensor(out["index"])))
    assert float_gap > 1e-3
