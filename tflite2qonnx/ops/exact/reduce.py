"""--bit-exact SUM and REDUCE_PROD (int8 / uint8 SUM, int8 and int16 REDUCE_PROD) as reduce.cc
computes them (the builtin reference kernels). int16 REDUCE_PROD runs this by default too:
rounding the real product once was 65535 steps off where the kernel's products overflow
(hand-built models, ``tests/tflite2qonnx/test_int16_ops.py``), and where the bound below
cannot rule that out the conversion is refused.

SUM is QuantizedMeanOrSum with ``compute_sum``: the raw integers summed in int32, then in
float32 with ``scale = s_in / s_out`` and ``bias = -zp_in * scale * N``, ``q_out =
round(float(sum(q)) * scale + bias) + zp_out`` (std::round, half away from zero), clamped.
This is the optimized builtin kernel (the default resolver's); the reference resolver's SUM
writes wrong values on int8 and int16 (one per channel, see tests/tflite2qonnx/tf_models.py),
so it cannot be the reference here. On one grid (scale 1, bias ``-zp * N``) ai-edge-litert's
kernel computes the same: ``sum(q) - (N - 1) * zp`` saturated, measured on int8, uint8 and
int16 (whose one-grid kernel requires zero point 0), not the raw integers wrapping in the
storage type that an older reduce.cc's generic path would add.

REDUCE_PROD (QuantizedReduceProd) multiplies the reduced elements in memory order, rescaling
every product, then rescales once more: ``p = q_0 - zp``; ``p = MBQM64(p * (q_k - zp))`` for
k = 1..N-1; ``q_out = MBQM64(p) + zp_out``, clamped. MBQM64 is the 64-bit
MultiplyByQuantizedMultiplier (multiplier rounded to 16 bits, one rounding half toward +inf,
the int64 result cast to int32, so a product beyond int32 wraps) with
``QuantizeMultiplier(s_in / s_out^(1/N))`` (GetQuantProdScaling, in double). In ONNX the
reduced axes are moved last (in order) and flattened, and the N steps are unrolled on int64
Gathers of that axis: every intermediate fits int64 (|p| < 2^31, |q - zp| < 2^16, the 16-bit
multiplier), the arithmetic shift is a floor division and the int32 wrap a modulo.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.fixed_point import (
    cast,
    grid,
    offsets,
    quantize_multiplier,
    raw_integers,
)
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.common import reduce_axes

_MAX_PROD_TERMS = 256  # the unrolled product's length


def sum_(b: GraphBuilder, op: Operator, axes: list[int], keepdims: int) -> None:
    """SUM (int8 / uint8 / int16), on one grid or two, as the optimized kernel computes it."""
    where = op.where
    g_in, g_out = grid(b, op.inputs[0], where), grid(b, op.outputs[0], where)
    shape = b.tensor(op.inputs[0]).shape
    count = int(np.prod([shape[a] for a in axes]))
    if count * (1 << g_in.bits) >= 2**31:
        raise ConversionError("bit_exact: SUM over too many elements for an int32 sum", where)
    f32 = np.float32
    scale = f32(f32(g_in.scale) / f32(g_out.scale))
    bias = f32(f32(f32(-g_in.zero_point) * scale) * f32(count))
    raw, _ = raw_integers(b, op.inputs[0], where)
    total = reduce_axes(b, "ReduceSum", cast(b, raw, TensorProto.DOUBLE), axes, keepdims)
    total = cast(b, total, TensorProto.FLOAT)  # exact int32 sum, then static_cast<float>
    v = b.emit("Mul", [total, b.const(np.array(scale, np.float32), "sum_scale")])[0]
    v = b.emit("Add", [v, b.const(np.array(bias, np.float32), "sum_bias")])[0]
    k = b.quant(v, "rounded", None, scale=1.0, bit_width=32, signed=True, rounding_mode="HALF_UP")
    y = b.emit("Mul", [k, b.const(np.array(g_out.scale, np.float32), "output_scale")])[0]
    b.set_output(op.outputs[0], y)


def _i64(b: GraphBuilder, value: int, hint: str) -> str:
    return b.const(np.array(value, np.int64), hint)


def _floor_shift(b: GraphBuilder, x: str, shift: int) -> str:
    """``x >> shift`` (arithmetic) on int64: a floor division by 2^shift."""
    step = _i64(b, 1 << shift, "shift_divisor")
    rest = b.emit("Mod", [x, step], fmod=0)[0]  # the divisor's sign: in [0, 2^shift)
    return b.emit("Div", [b.emit("Sub", [x, rest])[0], step])[0]


def _mbqm64(b: GraphBuilder, x: str, reduced: int, total_shift: int) -> str:
    """``int32((x * reduced + 2^(total_shift - 1)) >> total_shift)`` on int64 x (wrapping)."""
    v = b.emit("Mul", [x, _i64(b, reduced, "prod_multiplier")])[0]
    v = b.emit("Add", [v, _i64(b, 1 << (total_shift - 1), "prod_round")])[0]
    v = _floor_shift(b, v, total_shift)
    v = b.emit("Add", [v, _i64(b, 1 << 31, "wrap_offset")])[0]
    v = b.emit("Mod", [v, _i64(b, 1 << 32, "wrap_modulus")], fmod=0)[0]
    return b.emit("Sub", [v, _i64(b, 1 << 31, "wrap_offset")])[0]


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
    if shift >= 15:  # the kernel's rounding term 1 << (14 - shift) is undefined
        raise ConversionError(
            f"bit_exact: REDUCE_PROD multiplier {scaling:.4g} out of the kernel's range", where
        )
    reduced = (m0 + (1 << 15)) >> 16 if m0 < 0x7FFF0000 else 0x7FFF
    total_shift = 15 - shift
    kept = [a for a in range(len(shape)) if a not in axes]
    x = cast(b, offsets(b, op.inputs[0], where), TensorProto.INT64)
    if axes != list(range(len(shape) - len(axes), len(shape))):
        x = b.emit("Transpose", [x], perm=kept + list(axes))[0]
    flat = [*(shape[a] for a in kept), n]
    x = b.emit("Reshape", [x, b.const(np.array(flat, np.int64), "prod_shape")])[0]
    last = len(flat) - 1

    def term(k: int) -> str:
        return b.emit("Gather", [x, b.const(np.array(k, np.int64), "term")], axis=last)[0]

    p = term(0)
    for k in range(1, n):
        p = _mbqm64(b, b.emit("Mul", [p, term(k)])[0], reduced, total_shift)
    p = _mbqm64(b, p, reduced, total_shift)
    p = cast(b, p, TensorProto.FLOAT)  # |p| < 2^31 but only its clamp to the output matters
    p = b.emit("Reshape", [p, b.const(np.array(out_shape, np.int64), "prod_out_shape")])[0]
    y = b.emit("Mul", [p, b.const(np.array(g_out.scale, np.float32), "output_scale")])[0]
    b.set_output(op.outputs[0], y)
