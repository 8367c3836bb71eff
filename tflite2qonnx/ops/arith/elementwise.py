"""Elementwise TFLite ops: binary arithmetic with numpy broadcasting and unary activations.

By default quantized variants need no special handling: TFLite rescales the operands to a
common scale in integer arithmetic and requantizes the result, which the float op followed by
the output's Quant node reproduces to within one step of the output grid. Under bit_exact the
integer kernels are emulated (``ops.exact``) through the operators' records, ``ops.dispatch``:
the converters here are the float graphs only.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.arith import float_kernels
from tflite2qonnx.ops.common import clip_bounds
from tflite2qonnx.ops.int64_order import extreme


def _binary(onnx_op: str):
    def convert(b: GraphBuilder, op: Operator) -> None:
        operands = [b.input(i) for i in op.inputs[:2]]
        y = b.emit(onnx_op, operands)[0]
        b.set_output(op.outputs[0], fused_activation(b, op, y))

    convert.__doc__ = f"TFLite's broadcasting rules are numpy's, as are ONNX {onnx_op}'s."
    return convert


# under --bit-exact their records' ``kernel`` runs instead (``ops.exact.entry``, ``exact.int8``);
# int8 / uint8 MUL by default too where its multiplier shifts right (``ops.arith.rounding``)
add = _binary("Add")
sub = _binary("Sub")
mul = _binary("Mul")


def _unary(onnx_op: str):
    def convert(b: GraphBuilder, op: Operator) -> None:
        b.set_output(op.outputs[0], b.emit(onnx_op, [b.input(op.inputs[0])])[0])

    return convert


_sigmoid, _tanh = _unary("Sigmoid"), _unary("Tanh")


def logistic(b: GraphBuilder, op: Operator) -> None:
    """int16: the kernel's sigmoid table, by default too (its record's ``int16_kernel``);
    float in a model that quantizes on the fly: the reference kernel's (``float_kernels``)."""
    if b.tensor(op.inputs[0]).dtype == "float32" and float_kernels.quantizes_on_the_fly(b):
        return b.set_output(op.outputs[0], float_kernels.logistic(b, b.input(op.inputs[0])))
    return _sigmoid(b, op)


def tanh(b: GraphBuilder, op: Operator) -> None:
    """int16: the kernel's sigmoid table, by default too (its record's ``int16_kernel``);
    float in a model that quantizes on the fly: the reference kernel's (``float_kernels``)."""
    if b.tensor(op.inputs[0]).dtype == "float32" and float_kernels.quantizes_on_the_fly(b):
        return b.set_output(op.outputs[0], float_kernels.tanh(b, b.input(op.inputs[0])))
    return _tanh(b, op)


def prelu(b: GraphBuilder, op: Operator) -> None:
    """alpha broadcasts against x (usually [1, 1, C] on NHWC), as ONNX PRelu's slope does;
    int16: the 16x8 kernel, by default too (its record's ``int16_kernel``); int8 / uint8 per
    tensor: each side rounded as the kernel rounds it, by default too (``ops.arith.rounding``)."""
    x, alpha = b.input(op.inputs[0]), b.input(op.inputs[1])
    b.set_output(op.outputs[0], b.emit("PRelu", [x, alpha])[0])


def hard_swish(b: GraphBuilder, op: Operator) -> None:
    """x * relu6(x + 3) / 6; HardSwish exists from opset 14, x * HardSigmoid(x) before it."""
    x = b.input(op.inputs[0])
    if b.opset >= 14:
        y = b.emit("HardSwish", [x])[0]
    else:
        gate = b.emit("HardSigmoid", [x], alpha=float(np.float32(1 / 6)), beta=0.5)[0]
        y = b.emit("Mul", [x, gate])[0]
    b.set_output(op.outputs[0], y)


# ---------------------------------------------------------------------- more binary ops
_div = _binary("Div")


def div(b: GraphBuilder, op: Operator) -> None:
    """int16: the kernel's fixed-point division, by default too (its record's
    ``int16_kernel``)."""
    return _div(b, op)


pow_ = _binary("Pow")


def _extreme(onnx_op: str):
    """MAXIMUM / MINIMUM: raw integers on int8 (``GraphBuilder.reinterpret``); int64 through
    ``int64_order`` (onnxruntime's int64 Max / Min misorder some values past 2**31)."""

    def convert(b: GraphBuilder, op: Operator) -> None:
        [b.input(i) for i in op.inputs[:2]]  # both operands first: the graphs' node order
        x, y = (b.reinterpret(b.input(i), i, op.outputs[0]) for i in op.inputs[:2])
        z = extreme(b, onnx_op, x, y, b.elem_type(op.outputs[0]))
        b.set_output(op.outputs[0], fused_activation(b, op, z))

    return convert


maximum = _extreme("Max")
minimum = _extreme("Min")


def squared_difference(b: GraphBuilder, op: Operator) -> None:
    d = b.emit("Sub", [b.input(op.inputs[0]), b.input(op.inputs[1])])[0]
    b.set_output(op.outputs[0], b.emit("Mul", [d, d])[0])


def floor_div(b: GraphBuilder, op: Operator) -> None:
    """floor(x / y). Integers stay integers (through float they would be exact only below
    2**24): ONNX Div truncates, so a nonzero remainder whose sign differs from the divisor's
    steps the quotient down by one."""
    x, y = b.input(op.inputs[0]), b.input(op.inputs[1])
    if not b.is_integer(op.outputs[0]):
        b.set_output(op.outputs[0], b.emit("Floor", [b.emit("Div", [x, y])[0]])[0])
        return
    to = b.elem_type(op.outputs[0])
    q = b.emit("Div", [x, y])[0]
    if to == TensorProto.INT64:  # onnxruntime's int64 fmod goes through double (2**53)
        r = b.emit("Sub", [x, b.emit("Mul", [q, y])[0]])[0]
    else:
        r = b.emit("Mod", [x, y], fmod=1)[0]  # the truncated division's remainder, x's sign
    zero = b.const(np.zeros((), helper.tensor_dtype_to_np_dtype(to)), "zero")
    inexact = b.emit("Not", [b.emit("Equal", [r, zero])[0]])[0]
    opposite = b.emit("Xor", [b.emit("Less", [r, zero])[0], b.emit("Less", [y, zero])[0]])[0]
    down = b.emit("Cast", [b.emit("And", [inexact, opposite])[0]], to=to)[0]
    b.set_output(op.outputs[0], b.emit("Sub", [q, down])[0])


def floor_mod(b: GraphBuilder, op: Operator) -> None:
    """The remainder with the divisor's sign: Mod(fmod=0) for integers, x - floor(x/y)*y for
    floats (ONNX allows fmod=0 only on integers)."""
    x, y = b.input(op.inputs[0]), b.input(op.inputs[1])
    if b.is_integer(op.outputs[0]):
        b.set_output(op.outputs[0], b.emit("Mod", [x, y], fmod=0)[0])
        return
    q = b.emit("Floor", [b.emit("Div", [x, y])[0]])[0]
    b.set_output(op.outputs[0], b.emit("Sub", [x, b.emit("Mul", [q, y])[0]])[0])


def _compare(onnx_op: str, negate: bool = False):
    """int8 / uint8 comparisons under --bit-exact: their records' ``kernel``."""

    def convert(b: GraphBuilder, op: Operator) -> None:
        y = b.emit(onnx_op, [b.input(op.inputs[0]), b.input(op.inputs[1])])[0]
        b.set_output(op.outputs[0], b.emit("Not", [y])[0] if negate else y)

    return convert


less = _compare("Less")
less_equal = _compare("LessOrEqual")
greater = _compare("Greater")
greater_equal = _compare("GreaterOrEqual")
equal = _compare("Equal")
not_equal = _compare("Equal", negate=True)
logical_and = _compare("And")
logical_or = _compare("Or")


def helper_dtype(b: GraphBuilder, idx: int) -> int:
    """The ONNX element type of a TFLite tensor (quantized ones are real-valued floats)."""
    dtype = b.tensor(idx).dtype
    if dtype in ("float32", "float16") or b.tensor(idx).quantization is not None:
        return TensorProto.FLOAT
    return helper.np_dtype_to_tensor_dtype(np.dtype("bool" if dtype == "bool" else dtype))


# ---------------------------------------------------------------------- more unary ops
logical_not = _unary("Not")
abs_ = _unary("Abs")
neg = _unary("Neg")  # uint8 under --bit-exact: its record's ``kernel``


exp = _unary("Exp")
log = _unary("Log")
sqrt = _unary("Sqrt")
cos = _unary("Cos")
sin = _unary("Sin")
floor = _unary("Floor")
ceil = _unary("Ceil")
round_ = _unary("Round")  # half to even, as TFLite's ROUND
sign = _unary("Sign")
elu = _unary("Elu")  # alpha 1


def rsqrt(b: GraphBuilder, op: Operator) -> None:
    y = b.emit("Reciprocal", [b.emit("Sqrt", [b.input(op.inputs[0])])[0]])[0]
    b.set_output(op.outputs[0], y)


def square(b: GraphBuilder, op: Operator) -> None:
    x = b.input(op.inputs[0])
    b.set_output(op.outputs[0], b.emit("Mul", [x, x])[0])


def leaky_relu(b: GraphBuilder, op: Operator) -> None:
    """A file without LeakyReluOptions has alpha 0: TFLite's parser leaves it zeroed. int8 /
    uint8 where ``s_in / s_out`` or ``s_in * alpha / s_out`` shifts right: each side rounded
    as QuantizeLeakyRelu rounds it, by default too (``ops.arith.rounding``)."""
    alpha = float(np.float32(op.options.get("alpha", 0.0)))
    x = b.input(op.inputs[0])
    b.set_output(op.outputs[0], b.emit("LeakyRelu", [x], alpha=alpha)[0])


def _clip_op(lo: float, hi: float):
    def convert(b: GraphBuilder, op: Operator) -> None:
        bounds = clip_bounds(b, lo, hi)  # before the input: node names follow this order
        b.set_output(op.outputs[0], b.emit("Clip", [b.input(op.inputs[0]), *bounds])[0])

    return convert


relu_n1_to_1 = _clip_op(-1.0, 1.0)
relu_0_to_1 = _clip_op(0.0, 1.0)


def gelu(b: GraphBuilder, op: Operator) -> None:
    """ONNX Gelu from opset 20; before it 0.5 x (1 + erf(x / sqrt 2)), or with ``approximate``
    0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""
    x = b.input(op.inputs[0])
    approximate = bool(op.options.get("approximate", False))
    if b.opset >= 20:
        y = b.emit("Gelu", [x], approximate="tanh" if approximate else "none")[0]
        b.set_output(op.outputs[0], y)
        return

    def c(v: float, hint: str) -> str:
        return b.const(np.array(v, np.float32), hint)

    if approximate:
        cube = b.emit("Mul", [b.emit("Mul", [x, x])[0], x])[0]
        inner = b.emit("Add", [x, b.emit("Mul", [cube, c(0.044715, "gelu_k")])[0]])[0]
        inner = b.emit("Mul", [inner, c(np.sqrt(2 / np.pi), "gelu_s")])[0]
        t = b.emit("Tanh", [inner])[0]
    else:
        t = b.emit("Erf", [b.emit("Mul", [x, c(1 / np.sqrt(2), "gelu_s")])[0]])[0]
    half_x = b.emit("Mul", [x, c(0.5, "half")])[0]
    y = b.emit("Mul", [half_x, b.emit("Add", [t, c(1.0, "one")])[0]])[0]
    b.set_output(op.outputs[0], y)


def select(b: GraphBuilder, op: Operator) -> None:
    """SELECT / SELECT_V2 as Where. SELECT's rank-1 condition picks rows of the first axis;
    the int8 kernel copies raw integers (``GraphBuilder.reinterpret``)."""
    cond = b.input(op.inputs[0])
    x_rank = len(b.tensor(op.inputs[1]).shape)
    if op.name == "SELECT" and len(b.tensor(op.inputs[0]).shape) == 1 and x_rank > 1:
        axes = b.const(np.arange(1, x_rank, dtype=np.int64), "select_axes")
        cond = b.emit("Unsqueeze", [cond, axes])[0]
    # indexed, not sliced: a missing operand is then the reader's MissingOperandError
    x, y = (b.reinterpret(b.input(i), i, op.outputs[0]) for i in (op.inputs[1], op.inputs[2]))
    y = b.emit("Where", [cond, x, y])[0]
    b.set_output(op.outputs[0], y)


def add_n(b: GraphBuilder, op: Operator) -> None:
    b.set_output(op.outputs[0], b.emit("Sum", [b.input(i) for i in op.inputs])[0])


def cast(b: GraphBuilder, op: Operator) -> None:
    x = b.input(op.inputs[0])
    b.set_output(op.outputs[0], b.emit("Cast", [x], to=b.elem_type(op.outputs[0]))[0])


def relu(b: GraphBuilder, op: Operator) -> None:
    b.set_output(op.outputs[0], b.emit("Relu", [b.input(op.inputs[0])])[0])


def relu6(b: GraphBuilder, op: Operator) -> None:
    b.set_output(
        op.outputs[0], b.emit("Clip", [b.input(op.inputs[0]), *clip_bounds(b, 0.0, 6.0)])[0]
    )
