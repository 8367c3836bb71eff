"""int16 LOGISTIC and TANH as TFLite's builtin reference kernels compute them
(reference_integer_ops::Logistic / Tanh for int16, zero points 0, output scale 2^-15).

Both read one fixed 256-entry table, sigmoid(i / 24) in 0.16 (``int16_sigmoid_table``,
measured from the interpreter since no formula reproduces it), with linear interpolation:

    v  = (q * M + round) >> shift              the input on a 1 / (3 * 4096) grid
    a  = |v|;  h = a >> F;  t = a & (2^F - 1)  F = 9 (LOGISTIC), 8 (TANH = 2 sigmoid(2x) - 1)
    r  = (T[h] << F) + t * (T[h + 1] - T[h])   h >= 255: saturated
    LOGISTIC: v >= 0 ? (r + 2^9) >> 10  :  (2^25 - r + 2^9 - 1) >> 10
    TANH:     v >= 0 ? (r - 2^23 + 2^7) >> 8  :  (2^23 - r + 2^7 - 1) >> 8

(M, shift) come from the kernel's Prepare: a power-of-two input scale (CheckedLog2) of 2^-12
(LOGISTIC; TANH also 2^-11) multiplies by ``3 << (12 + log2 s)``; any other scale by
``trunc(s * 4096 * 3 * 2^shift)``, doubled until above 16383.5, with rounding right shift.

In the graph: the rescale and the interpolation in float64 ops (every value an integer below
2^31: exact), the two table reads a Gather each. The results fit int16 (the kernel's store
would wrap 2^15, but ``T[254] < 65535`` keeps LOGISTIC's below it). They run by default too
(their records' ``int16`` kernel runs BY_DEFAULT): a single rounding of sigmoid / tanh was
61-87% equal.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.fixed_point import cast, f64, grid, offsets
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.exact.int16 import checked_log2

# op -> (fraction bits of the interpolation, power-of-two shifts the kernel takes as such)
_KINDS = {"LOGISTIC": (9, (0,)), "TANH": (8, (0, 1))}


def input_rescale(scale: float, op_name: str) -> tuple[int, int]:
    """(multiplier, right shift) of the kernel's input rescale, as its Prepare picks them."""
    log2 = checked_log2(scale)
    if log2 is not None and 12 + log2 in _KINDS[op_name][1]:
        return 3 << (12 + log2), 0
    m, shift = float(np.float32(scale)) * 4096.0 * 3.0, 0
    while m <= 32767.0 / 2.0 and shift <= 30:
        shift += 1
        m *= 2.0
    return int(m), shift


def convert(b: GraphBuilder, op: Operator) -> None:
    where = op.where
    bits = _KINDS[op.name][0]
    g_in, g_out = grid(b, op.inputs[0], where), grid(b, op.outputs[0], where)
    exact_out = op.name == "LOGISTIC"  # its Prepare wants 2^-15 itself, TANH's CheckedLog2's
    if (g_out.scale != 2.0**-15) if exact_out else (checked_log2(g_out.scale) != -15):
        raise ConversionError(f"int16 {op.name}: the output scale must be 2^-15", where)
    m, shift = input_rescale(g_in.scale, op.name)
    if m >= 1 << 16:  # q * M would overflow the kernel's int32
        raise ConversionError(f"int16 {op.name}: input scale {g_in.scale} too large", where)
    q = cast(b, offsets(b, op.inputs[0], where), TensorProto.DOUBLE)
    v = b.emit("Mul", [q, f64(b, float(m), "multiplier")])[0]
    if shift:
        v = b.emit("Add", [v, f64(b, float(1 << (shift - 1)), "round")])[0]
        v = b.emit("Floor", [b.emit("Mul", [v, f64(b, 2.0**-shift, "shift")])[0]])[0]
    r = _interpolate(b, b.emit("Abs", [v])[0], bits)
    non_negative = b.emit("GreaterOrEqual", [v, f64(b, 0.0, "zero")])[0]
    if op.name == "LOGISTIC":
        pos = _shift_right(b, b.emit("Add", [r, f64(b, 512.0, "half")])[0], 10)
        neg = _shift_right(b, b.emit("Sub", [f64(b, 2.0**25 + 511, "top"), r])[0], 10)
    else:
        pos = _shift_right(b, b.emit("Add", [r, f64(b, 128.0 - 2**23, "offset")])[0], 8)
        neg = _shift_right(b, b.emit("Sub", [f64(b, 2.0**23 + 127, "top"), r])[0], 8)
    k = b.emit("Where", [non_negative, pos, neg])[0]
    k = cast(b, k, TensorProto.FLOAT)
    y = b.emit("Mul", [k, b.const(np.array(g_out.scale, np.float32), "output_scale")])[0]
    b.set_output(op.outputs[0], y)


def _shift_right(b: GraphBuilder, x: str, bits: int) -> str:
    """C's arithmetic ``x >> bits`` of an integer-valued float64 (floor division)."""
    return b.emit("Floor", [b.emit("Mul", [x, f64(b, 2.0**-bits, "pot")])[0]])[0]


def _interpolate(b: GraphBuilder, a: str, bits: int) -> str:
    """``T[h] << bits + t * (T[h + 1] - T[h])`` for ``a = h << bits | t``, saturated (``h``
    past 254) to the kernel's constant."""
    from tflite2qonnx.ops.exact.int16_sigmoid_table import SIGMOID_TABLE_UINT16  # generated

    table = np.asarray(SIGMOID_TABLE_UINT16, np.float64)
    h = _shift_right(b, a, bits)
    t = b.emit("Sub", [a, b.emit("Mul", [h, f64(b, float(1 << bits), "step")])[0]])[0]
    idx = cast(b, b.emit("Min", [h, f64(b, 254.0, "last")])[0], TensorProto.INT64)
    lo = b.emit("Gather", [f64(b, table[:-1], "sigmoid_lo"), idx], axis=0)[0]
    hi = b.emit("Gather", [f64(b, table[1:], "sigmoid_hi"), idx], axis=0)[0]
    slope = b.emit("Mul", [t, b.emit("Sub", [hi, lo])[0]])[0]
    r = b.emit("Add", [b.emit("Mul", [lo, f64(b, float(1 << bits), "step")])[0], slope])[0]
    saturated = float(0x7FFF << 10) if bits == 9 else float(0xFFFF << 8)
    past = b.emit("Greater", [h, f64(b, 254.0, "last")])[0]
    return b.emit("Where", [past, f64(b, saturated, "saturated"), r])[0]
