"""int16 PRELU as TFLite's builtin kernel computes it: the 16x8 kernel, whose alpha is int8.

reference_ops::BroadcastPrelu4DSlow with an int16 input and int8 alpha, per element:

    x >= 0:  MultiplyByQuantizedMultiplier(x, M1, shift1)
    x <  0:  MultiplyByQuantizedMultiplier(x * (alpha - zp_alpha), M2, shift2)

clamped to int16, with ``M1 = s_in / s_out`` and ``M2 = s_in * s_alpha / s_out`` computed in
float32 as the kernel's Prepare does (in double, 12 to 22 outputs in 65,536 were a step off).

The kernel reads alpha's buffer as int8 whatever its type: an int16 alpha's element i is
then byte i of its little-endian storage (so alpha 3 reads as 3 in element 0, but element 1
reads the high byte of the first value, 0). That is what the interpreter computes, measured
over every int16 input, so a constant int16 alpha converts as those bytes (rounding the real
function once with the int16 values was up to 3422 steps off) and warns that this is not PReLU
with the file's alphas; an int16 alpha computed at run time is refused.
"""

from __future__ import annotations

import warnings

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError, ConversionWarning
from tflite2qonnx.fixed_point import cast, grid, offsets, quantize_multiplier, requantize
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator

_F32 = np.float32


def read_alpha(b: GraphBuilder, idx: int, where: str) -> tuple[str, float, float]:
    """The kernel's ``alpha - zp_alpha`` (float32 graph value), its scale and max |value|."""
    t = b.tensor(idx)
    q = t.quantization
    if t.dtype not in ("int8", "int16") or q is None or len(q.scale) != 1:
        raise ConversionError(f"int16 PRELU: alpha '{t.name}' must be per-tensor int8", where)
    zp = int(q.zero_point[0])
    if t.dtype == "int8":
        g = grid(b, idx, where)
        return offsets(b, idx, where), g.scale, float(g.max_abs_offset)
    if t.data is None:
        raise ConversionError(
            f"int16 PRELU: alpha '{t.name}' is int16 and not constant; the kernel reads its "
            "bytes as int8 and that is not emulated at run time",
            where,
        )
    warnings.warn(
        f"{where}: int16 PRELU alpha '{t.name}' is int16; TFLite's kernel reads its bytes as "
        "int8, and the converted model computes what the interpreter does, not PReLU with "
        "those alphas",
        ConversionWarning,
        stacklevel=2,
    )
    data = np.ascontiguousarray(np.asarray(t.data).astype("<i2"))
    values = data.reshape(-1).view(np.int8)[: data.size].reshape(data.shape).astype(np.int64)
    values = values - zp
    name = b.const(values.astype(np.float32), f"{b.tensor_name(idx)}_as_int8")
    return name, float(_F32(q.scale[0])), float(np.max(np.abs(values)))


def convert(b: GraphBuilder, op: Operator) -> None:
    """int16 PRELU; alpha broadcasts against x as numpy's rules say (as the kernel's)."""
    where = op.where
    g_in, g_out = grid(b, op.inputs[0], where), grid(b, op.outputs[0], where)
    alpha, s_alpha, alpha_max = read_alpha(b, op.inputs[1], where)
    s_in, s_out = _F32(g_in.scale), _F32(g_out.scale)
    m1, sh1 = quantize_multiplier(float(_F32(s_in / s_out)))
    m2, sh2 = quantize_multiplier(float(_F32(_F32(s_in * _F32(s_alpha)) / s_out)))
    x = offsets(b, op.inputs[0], where)
    x64 = cast(b, x, TensorProto.DOUBLE)
    pos = requantize(b, x64, np.int64(m1), np.int64(sh1), 32768.0, g_out.scale, where, 16)
    product = cast(b, b.emit("Mul", [x, alpha])[0], TensorProto.DOUBLE)  # |.| <= 2^23: exact
    bound = 32768.0 * alpha_max
    if bound >= 2.0**24:
        raise ConversionError("int16 PRELU: alpha minus its zero point is too large", where)
    neg = requantize(b, product, np.int64(m2), np.int64(sh2), bound, g_out.scale, where, 16)
    negative = b.emit("Less", [x, b.const(np.array(0.0, np.float32), "zero")])[0]
    b.set_output(op.outputs[0], b.emit("Where", [negative, neg, pos])[0])
