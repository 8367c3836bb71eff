"""Hand-built int64 models (tflite_writer) whose values straddle 2**31, 2**32 and reach 2**62:
onnxruntime's int64 Max / Min / Clip / ReduceMax / ReduceMin order two values wrongly when their
high 32-bit words are equal and their low words differ in bit 31 (``ops.int64_order``)."""

from __future__ import annotations

import numpy as np
from tflite_writer import build_model

# for each high word, low words on both sides of bit 31: every pair onnxruntime misorders
_HIGH = (-(2**30), -2, -1, 0, 1, 2, 2**30)
_LOW = (0, 1, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFF)
EDGES = np.array(sorted({(h << 32) | lo for h in _HIGH for lo in _LOW} | {2**62, -(2**62)}))
# broadcast row for MAXIMUM / MINIMUM against a constant: each misorders some EDGES value
ROW = np.array([2, -1, 0, 2**31, -(2**31) - 1, 2**33, -5, 7], np.int64)
SHAPE = (2, 3, 8)


def _i64(name: str, shape, data=None) -> dict:
    tensor = {"name": name, "shape": shape, "dtype": "int64"}
    if data is not None:
        tensor["data"] = np.asarray(data, np.int64)
    return tensor


def _i32(name: str, data) -> dict:
    return {"name": name, "shape": (len(data),), "dtype": "int32", "data": np.int32(data)}


def extremes_model() -> bytes:
    """x, y int64 [2, 3, 8]: MAXIMUM(x, y), MINIMUM(x, y), MAXIMUM(x, ROW), MINIMUM(ROW, x),
    REDUCE_MAX(x, [2]), REDUCE_MIN(x, [0, 2], keep_dims), REDUCE_MAX(x, [0, 1]),
    REDUCE_MIN(x, [1])."""
    tensors = [
        _i64("x", SHAPE), _i64("y", SHAPE), _i64("row", (8,), ROW),                # 0-2
        _i32("axes_2", [2]), _i32("axes_02", [0, 2]), _i32("axes_01", [0, 1]),     # 3-5
        _i32("axes_1", [1]),                                                       # 6
        _i64("max_xy", SHAPE), _i64("min_xy", SHAPE),                              # 7-8
        _i64("max_x_row", SHAPE), _i64("min_row_x", SHAPE),                        # 9-10
        _i64("reduce_max_2", SHAPE[:2]), _i64("reduce_min_02", (1, 3, 1)),          # 11-12
        _i64("reduce_max_01", SHAPE[2:]), _i64("reduce_min_1", (2, 8)),            # 13-14
    ]  # fmt: skip

    def reducer(op: str, axes: int, out: int, keep: bool = False) -> dict:
        options = ("ReducerOptions", {"KeepDims": keep})
        return {"op": op, "inputs": [0, axes], "outputs": [out], "options": options}

    ops = [
        {"op": "MAXIMUM", "inputs": [0, 1], "outputs": [7]},
        {"op": "MINIMUM", "inputs": [0, 1], "outputs": [8]},
        {"op": "MAXIMUM", "inputs": [0, 2], "outputs": [9]},
        {"op": "MINIMUM", "inputs": [2, 0], "outputs": [10]},
        reducer("REDUCE_MAX", 3, 11),
        reducer("REDUCE_MIN", 4, 12, keep=True),
        reducer("REDUCE_MAX", 5, 13),
        reducer("REDUCE_MIN", 6, 14),
    ]
    return build_model(tensors, ops, [0, 1], list(range(7, 15)))


def add_relu_model() -> bytes:
    """ADD(x, y) on int64 [16] with a fused RELU: the kernel clamps the int64 sum at 0."""
    tensors = [_i64("x", (16,)), _i64("y", (16,)), _i64("z", (16,))]
    options = ("AddOptions", {"FusedActivationFunction": 1})
    ops = [{"op": "ADD", "inputs": [0, 1], "outputs": [2], "options": options}]
    return build_model(tensors, ops, [0, 1], [2])


def floor_div_model() -> bytes:
    """FLOOR_DIV(x, y) on int64 [16] (LiteRT's kernel takes no int64; numpy's floor division
    is the reference)."""
    tensors = [_i64("x", (16,)), _i64("y", (16,)), _i64("q", (16,))]
    ops = [{"op": "FLOOR_DIV", "inputs": [0, 1], "outputs": [2]}]
    return build_model(tensors, ops, [0, 1], [2])


SEGMENT_IDS = np.int32([0, 1, 2, 0, 1, 2, 0, 1])


def segment_extremes_model() -> bytes:
    """UNSORTED_SEGMENT_MAX / _MIN of int64 data [8] into 3 segments (LiteRT's kernel takes
    int32 and float32 data only; a per-segment numpy max / min is the reference)."""
    tensors = [
        _i64("data", (8,)),
        {"name": "ids", "shape": (8,), "dtype": "int32", "data": SEGMENT_IDS},
        {"name": "n", "shape": (), "dtype": "int32", "data": np.int32(3)},
        _i64("segment_max", (3,)),
        _i64("segment_min", (3,)),
    ]
    ops = [
        {"op": "UNSORTED_SEGMENT_MAX", "inputs": [0, 1, 2], "outputs": [3]},
        {"op": "UNSORTED_SEGMENT_MIN", "inputs": [0, 1, 2], "outputs": [4]},
    ]
    return build_model(tensors, ops, [0], [3, 4])
