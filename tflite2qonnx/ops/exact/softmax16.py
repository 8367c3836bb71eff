"""int16 SOFTMAX as TFLite's builtin kernel computes it (reference_ops::SoftmaxInt16).

Per row of the last axis, in integers:

    d_j   = q_j - max                                  in [-65535, 0]
    e_j   = LUT_exp(clamp16(MBQM(d_j, M, shift) + 32767))      Q0.15, M = s_in * beta / (10/65535)
    S     = sum_j e_j;  n = floor(log2 S)
    r     = LUT_inv(clamp16(round(S * 2^(16 - n)) - 3 * 2^15))  1 / (1 + x) of S's mantissa
    q_out = clamp(round_half_up(e_j * r / 2^n), 0, 32767)

LUT_f are the kernel's 513-entry tables (LUTPopulate over 512 steps with a midpoint bias, in
float32 with the C library's expf) read with linear interpolation between entries
(generic_int16_table_lookup; both in ``int16_interpolated``). Both lookups are functions of
one int16 value, so each becomes a Gather on its full 65536-entry table computed here; ``n``
is found from float32 Log and corrected against exact powers of two. Sums stay below 2^24 (rows
up to 512 wide), the final product below 2^30 (float64). The output grid is implicitly 1/32768
(the kernel writes Q0.15 whatever the output scale); the graph multiplies by the file's scale.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.fixed_point import cast, f64, grid, quantize_multiplier, raw_integers
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.common import clip_bounds, rank_of, reduce_axes
from tflite2qonnx.ops.exact.int8_tables import multiply_by_quantized_multiplier
from tflite2qonnx.ops.exact.int16_interpolated import c_expf, lut_populate, table_lookup16
from tflite2qonnx.ops.exact.table_gather import lookup

_F32 = np.float32
_I16 = np.arange(-(1 << 15), 1 << 15, dtype=np.int64)  # every int16, ascending
_MAX_LOG2 = 31


def _one_over_one_plus(x: np.ndarray) -> np.ndarray:
    return (_F32(1) / (_F32(1) + np.asarray(x, _F32))).astype(_F32)


def exp_table(s_in: float, beta: float) -> np.ndarray:
    """e for every d = q - max in [-65535, 0] (the exp LUT over [-10, 0])."""
    m0, shift = quantize_multiplier(float(_F32(_F32(s_in) * _F32(beta))) / (10.0 / 65535.0))
    lut = lut_populate(c_expf, _F32(10.0) / _F32(65535), 32767, _F32(2.0) / _F32(65535), 0)
    d = np.arange(-65535, 1, dtype=np.int64)
    scaled = multiply_by_quantized_multiplier(d, int(m0), int(shift))
    return table_lookup16(np.clip(scaled + 32767, -32768, 32767), lut)


def reciprocal_table() -> np.ndarray:
    """1 / (1 + x) for every int16 x (the LUT over [0, 1])."""
    lut = lut_populate(
        _one_over_one_plus, _F32(1.0) / _F32(65535), -32768, _F32(2.0) / _F32(65535), 0
    )
    return table_lookup16(_I16, lut)


def softmax(b: GraphBuilder, op: Operator) -> None:
    where = op.where
    x, g_in = raw_integers(b, op.inputs[0], where)
    g_out = grid(b, op.outputs[0], where)
    axis = rank_of(b, op.inputs[0]) - 1
    depth = b.tensor(op.inputs[0]).shape[axis]
    if depth < 1 or depth * 32767 >= 2**24:
        raise ConversionError("int16 SOFTMAX: rows over 512 wide are not emulated", where)
    beta = float(op.options.get("beta", 1.0))
    below = b.emit("Sub", [x, reduce_axes(b, "ReduceMax", x, [axis], 1)])[0]
    e = lookup(b, below, -65535, exp_table(g_in.scale, beta), "exp")
    total = reduce_axes(b, "ReduceSum", e, [axis], 1)  # >= e(0) > 2^14: n in [14, 23]
    n = _floor_log2(b, total)
    mantissa = b.emit("Mul", [total, lookup(b, n, 0, 2.0 ** (16 - np.arange(32.0)), "p16")])[0]
    shifted = b.emit("Floor", [b.emit("Add", [mantissa, b.const(_F32(0.5), "half")])[0]])[0]
    centered = b.emit("Sub", [shifted, b.const(_F32(3 << 15), "center")])[0]
    centered = b.emit("Clip", [centered, *clip_bounds(b, -32768.0, 32767.0)])[0]
    r = lookup(b, centered, -32768, reciprocal_table(), "reciprocal")
    product = b.emit("Mul", [cast(b, e, TensorProto.DOUBLE), cast(b, r, TensorProto.DOUBLE)])[0]
    pot = cast(b, lookup(b, n, 0, 2.0 ** -np.arange(32.0), "pot"), TensorProto.DOUBLE)
    scaled = b.emit("Add", [b.emit("Mul", [product, pot])[0], f64(b, 0.5, "half")])[0]
    k = cast(b, b.emit("Floor", [scaled])[0], TensorProto.FLOAT)
    k = b.emit("Clip", [k, *clip_bounds(b, 0.0, 32767.0)])[0]
    y = b.emit("Mul", [k, b.const(np.array(g_out.scale, _F32), "output_scale")])[0]
    b.set_output(op.outputs[0], y)


def _floor_log2(b: GraphBuilder, s: str) -> str:
    """floor(log2 s) of a positive integer-valued float32 (below 2^24), exactly: float32 Log
    is within one of it; compare with the exact powers of two either side."""
    approx = b.emit("Mul", [b.emit("Log", [s])[0], b.const(_F32(1 / np.log(2.0)), "log2e")])[0]
    n = b.emit("Floor", [approx])[0]
    powers = 2.0 ** np.arange(_MAX_LOG2 + 1.0)
    n = b.emit("Clip", [n, *clip_bounds(b, 0.0, _MAX_LOG2 - 1.0)])[0]
    too_big = b.emit("Greater", [lookup(b, n, 0, powers, "pow2"), s])[0]
    n1 = b.emit("Add", [n, b.const(_F32(1.0), "one")])[0]
    too_small = b.emit("LessOrEqual", [lookup(b, n1, 0, powers, "pow2"), s])[0]
    n = b.emit("Sub", [n, cast(b, too_big, TensorProto.FLOAT)])[0]
    return b.emit("Add", [n, cast(b, too_small, TensorProto.FLOAT)])[0]
