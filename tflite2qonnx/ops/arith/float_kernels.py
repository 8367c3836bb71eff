"""TFLite's reference float LOGISTIC and TANH to the last bit (nearly), in models whose float
values are quantized again on the fly (``quantizes_on_the_fly``).

ONNX Sigmoid / Tanh (onnxruntime's MLAS approximations) differ from the builtin kernels by
several ulps on half the values; harmless on their own, but a dynamic-range (hybrid) kernel
rounds each row to int8 by position, so an ulp can move a value across a rounding boundary,
one whole step off (4e-5 on a Keras LSTM's output), and a recurrent state carries it on.

The reference kernels (activations.cc, kReference) compute in float32:

- LOGISTIC: 1 above 16.619047, expf(x) below -9, else 1 / (1 + expf(-x));
- TANH: std::tanh, which glibc evaluates (|x| < 22) through expm1f: z = 1 - 2 / (t + 2) with
  t = expm1f(2|x|) for |x| >= 1, z = -t / (t + 2) with t = expm1f(-2|x|) below, sign of x.

The float32 steps are the kernel's; expm1f is glibc's own (``expm1f``); expf is computed in
float64 and rounded once, the correctly rounded value, which glibc's expf is but for rare
values. Measured against the interpreter (glibc 2.36) on 240k values in [-30, 30]: TANH
equal everywhere, LOGISTIC but for 0.03% (one or two ulps); onnxruntime's own Tanh / Sigmoid
differ on 63% / 47%, by several ulps. On a platform whose libm computes tanhf or expf
otherwise, TFLite's last bits follow that libm.
"""

from __future__ import annotations

import functools

import numpy as np
from onnx import TensorProto

from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Subgraph
from tflite2qonnx.ops.arith.expm1f import expm1f

_LOGISTIC_UPPER = 16.619047164916992188  # the reference kernel's cutoffs
_LOGISTIC_LOWER = -9.0
_TANH_ONE = 22.0  # |x| from which glibc's tanhf returns +-1


def quantizes_on_the_fly(b: GraphBuilder) -> bool:
    """Whether a subgraph of ``b``'s model holds a hybrid (dynamic-range) kernel: float input,
    constant int8 weights. Elsewhere onnxruntime's Sigmoid / Tanh stay: an ulp there stays an
    ulp (one node instead of 13 for LOGISTIC, 111 for TANH)."""
    return any(_holds_hybrid(sg) for sg in b.subgraphs or (b.subgraph,))


@functools.lru_cache(maxsize=64)
def _holds_hybrid(sg: Subgraph) -> bool:
    for op in sg.operators:
        operands = [sg.tensors[i] if 0 <= i < len(sg.tensors) else None for i in op.inputs[:2]]
        if len(operands) == 2 and None not in operands:
            x, w = operands
            if x.dtype == "float32" and w.dtype == "int8" and w.data is not None:
                return True
    return False


def _f32(b: GraphBuilder, value: float, hint: str) -> str:
    return b.const(np.array(value, np.float32), hint)


def _to(b: GraphBuilder, x: str, to: int) -> str:
    return b.emit("Cast", [x], to=to)[0]


def _expf(b: GraphBuilder, x: str) -> str:
    """exp of a float32 value, correctly rounded (float64 Exp, one rounding)."""
    return _to(b, b.emit("Exp", [_to(b, x, TensorProto.DOUBLE)])[0], TensorProto.FLOAT)


def logistic(b: GraphBuilder, x: str) -> str:
    """The reference float LOGISTIC of float32 ``x``."""
    one = _f32(b, 1.0, "one")
    e = _expf(b, b.emit("Neg", [x])[0])
    mid = b.emit("Div", [one, b.emit("Add", [one, e])[0]])[0]
    low = b.emit("Less", [x, _f32(b, _LOGISTIC_LOWER, "logistic_lower")])[0]
    y = b.emit("Where", [low, _expf(b, x), mid])[0]
    high = b.emit("Greater", [x, _f32(b, _LOGISTIC_UPPER, "logistic_upper")])[0]
    return b.emit("Where", [high, one, y])[0]


def tanh(b: GraphBuilder, x: str) -> str:
    """The reference float TANH of float32 ``x`` as glibc's tanhf evaluates it."""
    one, two = _f32(b, 1.0, "one"), _f32(b, 2.0, "two")
    a = b.emit("Abs", [x])[0]
    big = b.emit("GreaterOrEqual", [a, one])[0]
    twice = b.emit("Mul", [a, two])[0]
    t = expm1f(b, b.emit("Where", [big, twice, b.emit("Neg", [twice])[0]])[0])
    t2 = b.emit("Add", [t, two])[0]
    z_big = b.emit("Sub", [one, b.emit("Div", [two, t2])[0]])[0]
    z_small = b.emit("Div", [b.emit("Neg", [t])[0], t2])[0]
    z = b.emit("Where", [big, z_big, z_small])[0]
    z = b.emit("Where", [b.emit("GreaterOrEqual", [a, _f32(b, _TANH_ONE, "tanh_one")])[0], one, z])
    # the sign of x (-0 comes out +0, as onnxruntime's Where writes it; equal all the same)
    negative = b.emit("Less", [x, _f32(b, 0.0, "zero")])[0]
    return b.emit("Where", [negative, b.emit("Neg", z)[0], z[0]])[0]
