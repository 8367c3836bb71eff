"""--bit-exact SUM and REDUCE_PROD (int8 / uint8 SUM, int8 and int16 REDUCE_PROD) as reduce.cc
computes them (the builtin reference kernels). int16 REDUCE_PROD runs this by default too:
rounding the real product once was 65535 steps off where the kernel's products overflow
(hand-built models, ``tests/tflite2qonnx/test_int16_ops.py``), and where the bound below
cannot rule that out the conversion is refused.

SUM between differing grids is QuantizedMeanOrSum with ``compute_sum``, in float32: with
``scale = s_in / s_out`` and ``bias = -zp_in * scale * N``, ``q_out = round(sum(q) * scale +
bias) + zp_out`` (std::round, half away from zero), clamped. This is the optimized builtin
kernel (the default resolver's); the reference resolver's SUM writes wrong values on int8
(one per channel, see tests/tflite2qonnx/tf_models.py), so it cannot be the reference here.
On one grid the kernel adds the raw integers in the storage type instead (refused here).

REDUCE_PROD (QuantizedReduceProd) multiplies the reduced elements in memory order, rescaling
every product, then rescales once more: ``p = q_0 - zp``; ``p = MBQM64(p * (q_k - zp))`` for
k = 1..N-1; ``q_out = MBQM64(p) + zp_out``, clamped. MBQM64 is the 64-bit
MultiplyByQuantizedMultiplier (multiplier rounded to 16 bits, one rounding half toward +inf)
with ``QuantizeMultiplier(s_in / s_out^(1/N))`` (GetQuantProdScaling, in double). In ONNX the
reduced axes are moved last (in order) and flattened, and the N steps are unrolled on float64
Gathers of that axis; every step's bound is checked so each float64 product is exact.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.fixed_point import (
    EXACT_F32,
    cast,
    f64,
    grid,
    offsets,
    quantize_multiplier,
    raw_integers,
)
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.common import reduce_axes

_EXACT_F64 = 2.0**52  # |x * multiplier| below this: the product and its + 1/2 are exact
_MAX_PROD_TERMS = 256  # the unrolled product's length


def sum_(b: GraphBuilder, op: Operator, axes: list[int], keepdims: int) -> None:
    """SUM (int8 / uint8 / int16) between differing grids, in float32 as the optimized kernel
    does (int16: the reference kernel writes wrong values too)."""
    where = op.where
    g_in, g_out = grid(b, op.inputs[0], where), grid(b, op.outputs[0], where)
    if (g_in.scale, g_in.zero_point) == (g_out.scale, g_out.zero_point):
        raise ConversionError(
            "bit_exact: SUM on one grid (the kernel adds raw integers) is not emulated", where
        )
    shape = b.tensor(op.inputs[0]).shape
    count = int(np.prod([shape[a] for a in axes]))
    if count * (1 << g_in.bits) >= EXACT_F32:
        raise ConversionError("bit_exact: SUM over too many elements for exact sums", where)
    f32 = np.float32
    scale = f32(f32(g_in.scale) / f32(g_out.scale))
    bias = f32(f32(f32(-g_in.zero_point) * scale) * f32(count))
    raw, _ = raw_integers(b, op.inputs[0], where)
    total = reduce_axes(b, "ReduceSum", raw, axes, keepdims)  # exact: below 2^24
    v = b.emit("Mul", [total, b.const(np.array(scale, np.float32), "sum_scale")])[0]
    v = b.emit("Add", [v, b.const(np.array(bias, np.float32), "sum_bias")])[0]
    k = b.quant(v, "rounded", None, scale=1.0, bit_width=32, signed=True, rounding_mode="HALF_UP")
    y = b.emit("Mul", [k, b.const(np.array(g_out.scale, np.float32), "output_scale")])[0]
    b.set_output(op.outputs[0], y)


def _mbqm64(b: GraphBuilder, x: str, bound: int, reduced: int, total_shift: int, where: str):
    """``(x * reduced + 2^(total_shift - 1)) >> total_shift`` on float64 x, and its bound."""
    if bound * reduced >= _EXACT_F64:
        raise ConversionError("bit_exact: REDUCE_PROD product too wide for exact float64", where)
    v = b.emit("Mul", [x, f64(b, reduced * 2.0**-total_shift, "prod_multiplier")])[0]
    y = b.emit("Floor", [b.emit("Add", [v, f64(b, 0.5, "half")])[0]])[0]
    new_bound = (bound * reduced + (1 << (total_shift - 1))) >> total_shift
    if new_bound >= 2**31 - 256:  # the kernel's int32 would wrap
        raise ConversionError("bit_exact: REDUCE_PROD partial product leaves int32", where)
    return y, new_bound


def reduce_prod(b: GraphBuilder, op: Operator, axes: list[int], keepdims: int) -> None:
    """REDUCE_PROD (int8, int16) over constant axes."""
    where = op.where
    if b.tensor(op.inputs[0]).dtype not in ("int8", "int16"):
        raise ConversionError("bit_exact: only int8 and int16 REDUCE_PROD are emulated", where)
    g_in, g_out = grid(b, op.inputs[0], where), grid(b, op.outputs[0], where)
    shape = list(b.tensor(op.inputs[0]).shape)
    out_shape = list(b.tensor(op.outputs[0]).shape)
    if min(shape, default=1) < 1 or min(out_shape, default=1) < 1:
        raise ConversionError("bit_exact: REDUCE_PROD needs static shapes", where)
    n = int(np.prod([shape[a] for a in axes]))
    if not 1 <= n <= _MAX_PROD_TERMS:
        raise ConversionError(f"bit_exact: REDUCE_PROD over {n} elements is not emulated", where)
    scaling = float(np.float32(g_in.scale)) / math.pow(float(np.float32(g_out.scale)), 1.0 / n)
    m0, shift = quantize_multiplier(scaling)
    if m0 == 0 or shift >= 8:
        raise ConversionError("bit_exact: REDUCE_PROD multiplier out of range", where)
    reduced = (m0 + (1 << 15)) >> 16 if m0 < 0x7FFF0000 else 0x7FFF
    total_shift = 15 - shift
    kept = [a for a in range(len(shape)) if a not in axes]
    x = cast(b, offsets(b, op.inputs[0], where), TensorProto.DOUBLE)
    if axes != list(range(len(shape) - len(axes), len(shape))):
        x = b.emit("Transpose", [x], perm=kept + list(axes))[0]
    flat = [*(shape[a] for a in kept), n]
    x = b.emit("Reshape", [x, b.const(np.array(flat, np.int64), "prod_shape")])[0]
    last = len(flat) - 1

    def term(k: int) -> str:
        return b.emit("Gather", [x, b.const(np.array(k, np.int64), "term")], axis=last)[0]

    p, bound = term(0), g_in.max_abs_offset
    for k in range(1, n):
        p = b.emit("Mul", [p, term(k)])[0]
        p, bound = _mbqm64(b, p, bound * g_in.max_abs_offset, reduced, total_shift, where)
    p, _ = _mbqm64(b, p, bound, reduced, total_shift, where)
    p = cast(b, p, TensorProto.FLOAT)  # |p| < 2^31 but only its clamp to int8 matters
    p = b.emit("Reshape", [p, b.const(np.array(out_shape, np.int64), "prod_out_shape")])[0]
    y = b.emit("Mul", [p, b.const(np.array(g_out.scale, np.float32), "output_scale")])[0]
    b.set_output(op.outputs[0], y)
