"""Small SVDF models (TF's converter never emits SVDF: TFLite Micro's keyword models are
written by their own tools), built with tflite_writer from seeded weights."""

from __future__ import annotations

import numpy as np
from tflite_writer import build_model

ACTIVATIONS = {"NONE": 0, "RELU": 1, "RELU6": 3, "TANH": 4}


def _model(tensors: list[dict], rank: int, activation: str, has_bias: bool) -> bytes:
    """Tensors in order x, weights_feature, weights_time, [bias], state, y."""
    inputs = [0, 1, 2, 3 if has_bias else -1, len(tensors) - 2]
    op = {
        "op": "SVDF",
        "inputs": inputs,
        "outputs": [len(tensors) - 1],
        "options": (
            "SVDFOptions",
            {"Rank": rank, "FusedActivationFunction": ACTIVATIONS[activation]},
        ),
        "version": 1,
    }
    return build_model(tensors, [op], [0], [len(tensors) - 1])


def float_svdf(
    rank: int, activation: str = "NONE", has_bias: bool = True, seed: int = 0, memory: int = 4
) -> bytes:
    """batch 2, 8 inputs, 3 units of ``rank`` filters each."""
    rng = np.random.default_rng(seed)
    batch, n_in, units = 2, 8, 3
    filters = units * rank
    tensors = [
        {"name": "x", "shape": (batch, n_in)},
        {"name": "weights_feature", "shape": (filters, n_in),
         "data": rng.normal(0, 0.5, (filters, n_in)).astype(np.float32)},
        {"name": "weights_time", "shape": (filters, memory),
         "data": rng.normal(0, 0.5, (filters, memory)).astype(np.float32)},
    ]  # fmt: skip
    if has_bias:
        bias = rng.normal(0, 0.5, units).astype(np.float32)
        tensors.append({"name": "bias", "shape": (units,), "data": bias})
    tensors += [
        {"name": "state", "shape": (batch, filters * memory), "variable": True},
        {"name": "y", "shape": (batch, units)},
    ]
    return _model(tensors, rank, activation, has_bias)


def int8_svdf(
    rank: int,
    has_bias: bool = True,
    seed: int = 0,
    memory: int = 5,
    activation: str = "RELU",
    state_variable: bool = True,
    weights_feature_scale: float = 0.02,
    state_scale: float | None = None,
) -> bytes:
    """batch 2, 16 inputs, 4 units of ``rank`` filters; int8 input / weights_feature / output,
    int16 weights_time and state, int32 bias: TFLite Micro's keyword-model layout. The state
    scale lets the largest feature activations saturate int16, the output scale some outputs
    saturate int8."""
    rng = np.random.default_rng(seed)
    batch, n_in, units = 2, 16, 4
    filters = units * rank
    s_x, zp_x, s_wf, s_wt = 0.05, 3, weights_feature_scale, 2.0**-14
    s_state = s_x * s_wf / 1.2  # the feature accumulator * 1.2: its tail saturates int16
    if state_scale is not None:
        s_state = state_scale
    s_out = s_state * s_wt * 3e6 * np.sqrt(rank)  # and the output's tail int8
    tensors = [
        {"name": "x", "shape": (batch, n_in), "dtype": "int8", "quant": ([s_x], [zp_x])},
        {"name": "weights_feature", "shape": (filters, n_in), "dtype": "int8",
         "quant": ([s_wf], [0]),
         "data": rng.integers(-127, 128, (filters, n_in)).astype(np.int8)},
        {"name": "weights_time", "shape": (filters, memory), "dtype": "int16",
         "quant": ([s_wt], [0]),
         "data": rng.integers(-32767, 32768, (filters, memory)).astype(np.int16)},
    ]  # fmt: skip
    if has_bias:
        bias = rng.integers(-(2**26), 2**26, units).astype(np.int32)
        tensors.append(
            {"name": "bias", "shape": (units,), "dtype": "int32",
             "quant": ([s_state * s_wt], [0]), "data": bias}
        )  # fmt: skip
    tensors += [
        {"name": "state", "shape": (batch, filters * memory), "dtype": "int16",
         "quant": ([s_state], [0]), "variable": state_variable},
        {"name": "y", "shape": (batch, units), "dtype": "int8", "quant": ([s_out], [-20])},
    ]  # fmt: skip
    return _model(tensors, rank, activation, has_bias)


def hybrid_svdf(
    rank: int = 2, activation: str = "RELU", asymmetric: bool = False, seed: int = 0
) -> bytes:
    """Float input and output, int8 weights: the dynamic-range (hybrid) kernel; batch 2,
    8 inputs, 3 units."""
    rng = np.random.default_rng(seed)
    batch, n_in, units, memory = 2, 8, 3, 4
    filters = units * rank
    tensors = [
        {"name": "x", "shape": (batch, n_in)},
        {"name": "weights_feature", "shape": (filters, n_in), "dtype": "int8",
         "quant": ([0.01], [0]),
         "data": rng.integers(-127, 128, (filters, n_in)).astype(np.int8)},
        {"name": "weights_time", "shape": (filters, memory), "dtype": "int8",
         "quant": ([0.02], [0]),
         "data": rng.integers(-127, 128, (filters, memory)).astype(np.int8)},
        {"name": "bias", "shape": (units,),
         "data": rng.normal(0, 0.5, units).astype(np.float32)},
        {"name": "state", "shape": (batch, filters * memory), "variable": True},
        {"name": "y", "shape": (batch, units)},
    ]  # fmt: skip
    op = {
        "op": "SVDF",
        "inputs": [0, 1, 2, 3, 4],
        "outputs": [5],
        "options": (
            "SVDFOptions",
            {
                "Rank": rank,
                "FusedActivationFunction": ACTIVATIONS[activation],
                "AsymmetricQuantizeInputs": asymmetric,
            },
        ),  # fmt: skip
        "version": 4 if asymmetric else 2,
    }
    return build_model(tensors, [op], [0], [5])


def keyword_like_svdf(seed: int = 0, memory: int = 6, units: int = 4) -> bytes:
    """TFLite Micro's keyword-model pattern, small: int16 features -> QUANTIZE to int8 -> int8
    SVDF (rank 1, int16 variable state) -> SOFTMAX to int16 (zero point -32768) -> QUANTIZE to
    int32, the keyword model's output grids. Batch 1, 12 features."""
    rng = np.random.default_rng(seed)
    n_in, filters = 12, units
    s_x, s_wf, s_wt = 0.05, 0.01, 2.0**-13
    s_state = s_x * s_wf * 4
    s_out = 0.1
    tensors = [
        {"name": "", "shape": (1, n_in), "dtype": "int16", "quant": ([0.000625], [0])},
        {"name": "features", "shape": (1, n_in), "dtype": "int8", "quant": ([s_x], [-128])},
        {"name": "weights_feature", "shape": (filters, n_in), "dtype": "int8",
         "quant": ([s_wf], [0]),
         "data": rng.integers(-127, 128, (filters, n_in)).astype(np.int8)},
        {"name": "weights_time", "shape": (filters, memory), "dtype": "int16",
         "quant": ([s_wt], [0]),
         "data": rng.integers(-8000, 8000, (filters, memory)).astype(np.int16)},
        {"name": "bias", "shape": (units,), "dtype": "int32", "quant": ([s_state * s_wt], [0]),
         "data": rng.integers(-2000, 2000, units).astype(np.int32)},
        {"name": "state", "shape": (1, filters * memory), "dtype": "int16",
         "quant": ([s_state], [0]), "variable": True},
        {"name": "logits", "shape": (1, units), "dtype": "int8", "quant": ([s_out], [-10])},
        {"name": "probabilities", "shape": (1, units), "dtype": "int16",
         "quant": ([1.5259022e-05], [-32768])},
        {"name": "scores", "shape": (1, units), "dtype": "int32", "quant": ([3.051851e-05], [0])},
    ]  # fmt: skip
    ops = [
        {"op": "QUANTIZE", "inputs": [0], "outputs": [1]},
        {"op": "SVDF", "inputs": [1, 2, 3, 4, 5], "outputs": [6],
         "options": ("SVDFOptions", {"Rank": 1, "FusedActivationFunction": ACTIVATIONS["RELU"]}),
         "version": 1},
        {"op": "SOFTMAX", "inputs": [6], "outputs": [7],
         "options": ("SoftmaxOptions", {"Beta": 1.0})},
        {"op": "QUANTIZE", "inputs": [7], "outputs": [8]},
    ]  # fmt: skip
    return build_model(tensors, ops, [0], [8])
