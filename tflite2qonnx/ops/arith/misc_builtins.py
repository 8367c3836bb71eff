"""Less common math builtins: ATAN2, RIGHT_SHIFT, BITWISE_XOR, REDUCE_ANY / REDUCE_ALL, RANGE,
RANK, BUCKETIZE.

ONNX lacks atan2 and (before opset 18) bitwise ops on signed integers: both are written with
ops that compute them exactly (quadrant corrections; arithmetic on bits in double precision,
exact for 32-bit integers).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.common import reduce_axes

_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "uint8": 8, "uint16": 16, "uint32": 32}


def _f32(b: GraphBuilder, value: float, hint: str) -> str:
    return b.const(np.array(value, np.float32), hint)


def _negative(b: GraphBuilder, v: str) -> str:
    """v < 0, -0.0 included (its reciprocal is -inf)."""
    less = b.emit("Less", [v, _f32(b, 0.0, "zero")])[0]
    neg_zero = b.emit("Less", [b.emit("Reciprocal", [v])[0], _f32(b, 0.0, "zero")])[0]
    is_zero = b.emit("Equal", [v, _f32(b, 0.0, "zero")])[0]
    return b.emit("Or", [less, b.emit("And", [is_zero, neg_zero])[0]])[0]


def atan2(b: GraphBuilder, op: Operator) -> None:
    """std::atan2(y, x): atan(y / x), plus or minus pi where x is negative (the sign of y,
    signed zeros included); atan(y) itself where both are zero, which keeps y's sign."""
    if b.tensor(op.outputs[0]).quant is not None:
        raise ConversionError("ATAN2 has a float kernel only", op.where)
    y, x = b.input(op.inputs[0]), b.input(op.inputs[1])
    zero = _f32(b, 0.0, "zero")
    both_zero = b.emit("And", [b.emit("Equal", [y, zero])[0], b.emit("Equal", [x, zero])[0]])[0]
    ratio = b.emit("Where", [both_zero, y, b.emit("Div", [y, x])[0]])[0]
    a = b.emit("Atan", [ratio])[0]
    pi = b.emit("Where", [_negative(b, y), _f32(b, -np.pi, "minus_pi"), _f32(b, np.pi, "pi")])[0]
    shifted = b.emit("Add", [a, pi])[0]
    b.set_output(op.outputs[0], b.emit("Where", [_negative(b, x), shifted, a])[0])


def _int_dtype(b: GraphBuilder, op: Operator) -> str:
    dtype = b.tensor(op.outputs[0]).dtype
    if dtype not in _INT_BITS or b.tensor(op.outputs[0]).quant is not None:
        raise ConversionError(f"{op.name} on {dtype} is not a TFLite kernel", op.where)
    return dtype


def _double(b: GraphBuilder, idx: int) -> str:
    return b.emit("Cast", [b.input(idx)], to=TensorProto.DOUBLE)[0]


def right_shift(b: GraphBuilder, op: Operator) -> None:
    """x >> y, arithmetic for signed types: floor(x / 2^y), exact in double precision."""
    _int_dtype(b, op)
    x, y = _double(b, op.inputs[0]), _double(b, op.inputs[1])
    power = b.emit("Pow", [b.const(np.array(2.0), "two"), y])[0]
    q = b.emit("Floor", [b.emit("Div", [x, power])[0]])[0]
    b.set_output(op.outputs[0], b.emit("Cast", [q], to=b.elem_type(op.outputs[0]))[0])


def _bits(b: GraphBuilder, x: str, n: int) -> str:
    """x's n two's-complement bits along a new last axis, as 0.0 / 1.0 (double)."""
    x = b.emit("Unsqueeze", [x, b.const(np.array([-1], np.int64), "axis")])[0]
    powers = b.const(2.0 ** np.arange(n), "bit_weights")
    shifted = b.emit("Floor", [b.emit("Div", [x, powers])[0]])[0]
    half = b.emit("Floor", [b.emit("Div", [shifted, b.const(np.array(2.0), "two")])[0]])[0]
    twice = b.emit("Mul", [half, b.const(np.array(2.0), "two")])[0]
    return b.emit("Sub", [shifted, twice])[0]


def bitwise_xor(b: GraphBuilder, op: Operator) -> None:
    """BitwiseXor from opset 18; before it, on the bits: |a_k - b_k| weighted back, the top
    bit of a signed type weighing -2^(n-1)."""
    dtype = _int_dtype(b, op)
    if b.opset >= 18:
        y = b.emit("BitwiseXor", [b.input(op.inputs[0]), b.input(op.inputs[1])])[0]
        b.set_output(op.outputs[0], y)
        return
    n = _INT_BITS[dtype]
    x_bits = _bits(b, _double(b, op.inputs[0]), n)
    y_bits = _bits(b, _double(b, op.inputs[1]), n)
    xor = b.emit("Abs", [b.emit("Sub", [x_bits, y_bits])[0]])[0]
    weights = 2.0 ** np.arange(n)
    if not dtype.startswith("u"):
        weights[-1] = -weights[-1]
    value = b.emit("Mul", [xor, b.const(weights, "bit_values")])[0]
    value = reduce_axes(b, "ReduceSum", value, [-1], 0)
    b.set_output(op.outputs[0], b.emit("Cast", [value], to=b.elem_type(op.outputs[0]))[0])


def _logical_reduce(onnx_op: str):
    def convert(b: GraphBuilder, op: Operator) -> None:
        """On booleans as int32 (ONNX reductions take no bool)."""
        rank = len(b.tensor(op.inputs[0]).shape)
        axes = b.int_constant(op.inputs[1], op.where).reshape(-1)
        axes = sorted({int(a) % rank for a in axes})
        keepdims = int(bool(op.options.get("keep_dims", False)))
        x = b.emit("Cast", [b.input(op.inputs[0])], to=TensorProto.INT32)[0]
        y = reduce_axes(b, onnx_op, x, axes, keepdims)
        b.set_output(op.outputs[0], b.emit("Cast", [y], to=TensorProto.BOOL)[0])

    return convert


reduce_any = _logical_reduce("ReduceMax")
reduce_all = _logical_reduce("ReduceMin")


def range_(b: GraphBuilder, op: Operator) -> None:
    """start, start + delta, ... below limit (above it for a negative delta): ONNX Range."""
    if b.tensor(op.outputs[0]).quant is not None:
        raise ConversionError("RANGE on quantized values is not a TFLite kernel", op.where)
    start, limit, delta = (b.input(op.inputs[i]) for i in range(3))
    scalar = b.const(np.array([], np.int64), "scalar")
    start, limit, delta = (b.emit("Reshape", [v, scalar])[0] for v in (start, limit, delta))
    b.set_output(op.outputs[0], b.emit("Range", [start, limit, delta])[0])


def rank(b: GraphBuilder, op: Operator) -> None:
    """The input's rank is fixed in the file: a constant."""
    dtype = b.tensor(op.outputs[0]).dtype
    value = np.array(len(b.tensor(op.inputs[0]).shape), dtype)
    out_shape = tuple(b.tensor(op.outputs[0]).shape)
    if int(np.prod(out_shape)) != 1:
        raise ConversionError(f"RANK gives one value, its output has shape {out_shape}", op.where)
    b.set_output(op.outputs[0], b.const(value.reshape(out_shape), "rank"))


def bucketize(b: GraphBuilder, op: Operator) -> None:
    """The number of boundaries <= x (std::upper_bound over the sorted boundaries)."""
    bounds = np.asarray(op.options.get("boundaries", ()), np.float32)
    if (np.diff(bounds) < 0).any():
        raise ConversionError("boundaries are not sorted", op.where)
    if b.tensor(op.inputs[0]).quant is not None:
        raise ConversionError("BUCKETIZE on quantized values is not a TFLite kernel", op.where)
    x, dtype = b.input(op.inputs[0]), b.tensor(op.inputs[0]).dtype
    if dtype == "float64":  # C++ compares in double: the float boundaries are promoted
        bounds = bounds.astype(np.float64)
    elif dtype != "float32":  # and an integer input is promoted to float
        x = b.emit("Cast", [x], to=TensorProto.FLOAT)[0]
    x = b.emit("Unsqueeze", [x, b.const(np.array([-1], np.int64), "axis")])[0]
    above = b.emit("GreaterOrEqual", [x, b.const(bounds, "boundaries")])[0]
    count = b.emit("Cast", [above], to=TensorProto.INT32)[0]
    count = reduce_axes(b, "ReduceSum", count, [-1], 0)
    if b.tensor(op.outputs[0]).dtype != "int32":
        count = b.emit("Cast", [count], to=b.elem_type(op.outputs[0]))[0]
    b.set_output(op.outputs[0], count)


def broadcast_args(b: GraphBuilder, op: Operator) -> None:
    """The broadcast of two shapes: the shorter padded with leading 1s, then per dim the
    other's size where one is 1 (the kernel rejects other mismatches)."""
    pair = (op.inputs[0], op.inputs[1])
    shapes = [b.input(i) for i in pair]
    lengths = [b.tensor(i).shape[0] for i in pair]
    dtype = b.tensor(op.outputs[0]).dtype
    longest = max(lengths)
    for k, (s, n) in enumerate(zip(shapes, lengths, strict=True)):
        if n < longest:
            ones = b.const(np.ones(longest - n, dtype), "ones")
            shapes[k] = b.emit("Concat", [ones, s], axis=0)[0]
    one = b.const(np.array(1, dtype), "one")
    y = b.emit("Where", [b.emit("Equal", [shapes[0], one])[0], shapes[1], shapes[0]])[0]
    b.set_output(op.outputs[0], y)
