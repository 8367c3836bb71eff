"""Hand-built int8 single-op models (tflite_writer) whose requantization multiplier shifts
right by only a bit or two, where the builtin kernels' second rounding moves up to a quarter
of the values, and a convolution whose bias records a scale other than ``s_in * s_w``."""

from __future__ import annotations

import numpy as np
from tflite_writer import build_model

# the gesture model's PRELU: s_in / s_out = 0.4975 (QuantizeMultiplier's shift -1), alpha side
# shift -5; zero points of both signs, so ties meet the zero point's sign
X_GRID = ([0.11868121], [-20])
OUT_GRID = ([0.23854923], [54])


def _i8(name: str, shape, quant, data=None) -> dict:
    tensor = {"name": name, "shape": shape, "dtype": "int8", "quant": quant}
    if data is not None:
        tensor["data"] = np.asarray(data, np.int8)
    return tensor


def prelu() -> bytes:
    """PRELU on [1, 16, 16, 4] with per-channel slopes of both signs (int8, per tensor)."""
    alpha = np.array([[[9, -8, 60, -43]]], np.int8)
    tensors = [
        _i8("x", (1, 16, 16, 4), X_GRID),
        _i8("alpha", (1, 1, 4), ([0.04747742], [0]), alpha),
        _i8("y", (1, 16, 16, 4), OUT_GRID),
    ]
    return build_model(tensors, [{"op": "PRELU", "inputs": [0, 1], "outputs": [2]}], [0], [2])


def requantize() -> bytes:
    """QUANTIZE int8 -> int8 onto a grid about twice as coarse (s_in / s_out = 0.4975)."""
    tensors = [_i8("x", (1, 16, 16, 4), X_GRID), _i8("y", (1, 16, 16, 4), OUT_GRID)]
    return build_model(tensors, [{"op": "QUANTIZE", "inputs": [0], "outputs": [1]}], [0], [1])


def leaky_relu() -> bytes:
    """LEAKY_RELU (alpha 0.1) onto a grid about twice as coarse (identity side shift -1)."""
    tensors = [_i8("x", (1, 16, 16, 4), X_GRID), _i8("y", (1, 16, 16, 4), OUT_GRID)]
    options = ("LeakyReluOptions", {"Alpha": 0.1})
    ops = [{"op": "LEAKY_RELU", "inputs": [0], "outputs": [1], "options": options}]
    return build_model(tensors, ops, [0], [1])


def mul() -> bytes:
    """MUL of two int8 tensors whose ``s1 * s2 / s_out`` is 0.4 (shift -1), RELU fused."""
    tensors = [
        _i8("a", (1, 8, 8, 4), ([0.05], [-3])),
        _i8("b", (1, 8, 8, 4), ([0.04], [7])),
        _i8("y", (1, 8, 8, 4), ([0.005], [-100])),
    ]
    options = ("MulOptions", {"FusedActivationFunction": 1})
    ops = [{"op": "MUL", "inputs": [0, 1], "outputs": [2], "options": options}]
    return build_model(tensors, ops, [0, 1], [2])


def conv_foreign_bias_scale(seed: int = 5) -> bytes:
    """A 1x1 CONV_2D (int8, per-channel weights) whose int32 bias records scales 1.7x
    ``s_in * s_w``, as a bias shared among layers on other input grids does: the kernel adds
    the stored integers to the accumulator all the same."""
    rng = np.random.default_rng(seed)
    s_in, s_w = 0.06, np.array([0.0016, 0.0024, 0.0019], np.float32)
    weights = rng.integers(-127, 128, (3, 1, 1, 16)).astype(np.int8)
    bias = rng.integers(-20000, 20000, 3).astype(np.int32)
    tensors = [
        _i8("x", (1, 4, 4, 16), ([s_in], [-15])),
        _i8("w", (3, 1, 1, 16), (list(s_w), [0, 0, 0]), weights),
        {
            "name": "bias",
            "shape": (3,),
            "dtype": "int32",
            "data": bias,
            "quant": (list(1.7 * s_in * s_w), [0, 0, 0]),
        },
        _i8("y", (1, 4, 4, 3), ([0.08], [10])),
    ]
    options = (
        "Conv2DOptions",
        {"Padding": 1, "StrideW": 1, "StrideH": 1, "DilationWFactor": 1, "DilationHFactor": 1},
    )
    ops = [{"op": "CONV_2D", "inputs": [0, 1, 2], "outputs": [3], "options": options}]
    return build_model(tensors, ops, [0], [3])


def accumulator_rounding(depthwise: bool = False) -> bytes:
    """A 1x1 CONV_2D (one input channel) or DEPTHWISE_CONV_2D (three) with per-channel int8
    weights whose multipliers ``s_in * s_w / s_out`` (0.225, 0.15, 0.1125) shift right by 2, 2
    and 3: the kernels' second rounding moves an eighth to a quarter of the values."""
    s_w = [0.9, 0.6, 0.45]
    channels = 3 if depthwise else 1
    shape = (1, 1, 1, 3) if depthwise else (3, 1, 1, 1)
    weights = np.array([77, -93, 121], np.int8).reshape(shape)
    tensors = [
        _i8("x", (1, 16, 16, channels), ([0.05], [-7])),
        _i8("w", shape, (s_w, [0, 0, 0], 3 if depthwise else 0), weights),
        {"name": "bias", "shape": (3,), "dtype": "int32",
         "data": np.array([1234, -567, 89], np.int32),
         "quant": ([0.05 * s for s in s_w], [0, 0, 0])},
        _i8("y", (1, 16, 16, 3), ([0.2], [5])),
    ]  # fmt: skip
    options = {"Padding": 1, "StrideW": 1, "StrideH": 1, "DilationWFactor": 1,
               "DilationHFactor": 1}  # fmt: skip
    if depthwise:
        op, table = "DEPTHWISE_CONV_2D", "DepthwiseConv2DOptions"
        options["DepthMultiplier"] = 1
    else:
        op, table = "CONV_2D", "Conv2DOptions"
    ops = [{"op": op, "inputs": [0, 1, 2], "outputs": [3], "options": (table, options)}]
    return build_model(tensors, ops, [0], [3])
