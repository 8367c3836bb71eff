"""Hand-built int32 arithmetic models (tflite_writer) whose ONNX form must stay integer: a
float detour loses int32 values beyond 2**24, and float-typed constants beside int32 values
make onnxruntime refuse the graph."""

from __future__ import annotations

import numpy as np
from tflite_writer import build_model

# ActivationFunctionType values
FUSED = {"RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3}


def _i32(name: str, shape, data=None) -> dict:
    tensor = {"name": name, "shape": shape, "dtype": "int32"}
    if data is not None:
        tensor["data"] = np.asarray(data, np.int32)
    return tensor


# divisors of both signs; the dividends the tests feed reach +-2**30
DIVISORS = np.array([3, -3, 7, -7, 1, -1, 2, -2, 1000003, -1000003, 5, -5], np.int32)


def floor_div_int32() -> bytes:
    tensors = [_i32("x", (12,)), _i32("y", (12,), DIVISORS), _i32("q", (12,))]
    ops = [{"op": "FLOOR_DIV", "inputs": [0, 1], "outputs": [2]}]
    return build_model(tensors, ops, [0], [2])


def add_int32(activation: str) -> bytes:
    """x + y on int32 with a fused activation (the int32 kernel clamps to its range)."""
    tensors = [_i32("x", (2, 6)), _i32("y", (2, 6)), _i32("z", (2, 6))]
    options = ("AddOptions", {"FusedActivationFunction": FUSED[activation]})
    ops = [{"op": "ADD", "inputs": [0, 1], "outputs": [2], "options": options}]
    return build_model(tensors, ops, [0, 1], [2])


def padv2_int32() -> bytes:
    """PADV2 of an int32 tensor with the int32 value 7."""
    tensors = [
        _i32("x", (2, 3)),
        _i32("paddings", (2, 2), [[1, 0], [0, 2]]),
        _i32("value", (), 7),
        _i32("y", (3, 5)),
    ]
    ops = [{"op": "PADV2", "inputs": [0, 1, 2], "outputs": [3]}]
    return build_model(tensors, ops, [0], [3])


MODELS = {
    "floor_div_int32": floor_div_int32,
    "add_int32_relu": lambda: add_int32("RELU"),
    "add_int32_relu6": lambda: add_int32("RELU6"),
    "add_int32_relu_n1_to_1": lambda: add_int32("RELU_N1_TO_1"),
    "padv2_int32": padv2_int32,
}


def shape_with_quantized_output() -> bytes:
    """SHAPE whose int32 output carries a scale the kernel ignores, feeding RESHAPE."""
    tensors = [
        {"name": "x", "shape": (1, 4, 3)},
        {"name": "dims", "shape": (3,), "dtype": "int32", "quant": ([0.5], [0])},
        {"name": "y", "shape": (1, 4, 3)},
    ]
    ops = [
        {"op": "SHAPE", "inputs": [0], "outputs": [1], "options": ("ShapeOptions", {"OutType": 2})},
        {"op": "RESHAPE", "inputs": [0, 1], "outputs": [2]},
    ]
    return build_model(tensors, ops, [0], [2])
