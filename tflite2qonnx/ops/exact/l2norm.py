"""L2_NORMALIZATION (int8 / uint8) as TFLite's reference kernels compute it under --bit-exact.

Per row of the last axis, with ``d = q - zp_in`` and ``S = sum(d^2)``:

    (M, e) = GetInvSqrtQuantizedMultiplierExp(S, reverse_shift=-1)   (INT32_MAX, 0 for S <= 1)
    int8:  q_out = clamp(MultiplyByQuantizedMultiplier(d, M, e + 7))
    uint8: q_out = clamp(128 + MultiplyByQuantizedMultiplierSmallerThanOneExp(128 d, M, e))

The inverse square root is gemmlowp's: S normalised by an even left shift, five Newton-Raphson
steps in Q3.28, times sqrt(2) / 2 (``exact_tables_extra._inv_sqrt`` is the same in numpy).
It depends on the whole row, so it is evaluated in the graph with gemmlowp's int32 steps on
integer-valued float64 tensors (``exact_log_softmax.FixedPointGraph``), exactly. The output
grid is the kernel's fixed one (scale 1/128, zero point 0 or 128).

Which kernel: the reference resolver's (BUILTIN_REF), as for every --bit-exact kernel. The
optimized int8 kernel computes its inverse square root another way (up to 2 steps apart).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.fixed_point import cast, grid, offsets
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.common import rank_of, reduce_axes
from tflite2qonnx.ops.exact.log_softmax import FixedPointGraph

_I32_MAX = (1 << 31) - 1
_HALF_THREE = (1 << 28) + (1 << 27)  # 1.5 in Q3.28
_HALF_SQRT2 = 1518500250  # sqrt(2) / 2 in Q0.31


def _pow2(fx: FixedPointGraph, e: str) -> str:
    return fx.op("Pow", fx.c(2.0), e)


def _rdbpot(fx: FixedPointGraph, x: str, e: str) -> str:
    """RoundingDivideByPOT by a tensor exponent e >= 0 (round half away from zero)."""
    u = fx.op("Mul", x, _pow2(fx, fx.op("Neg", e)))
    mag = fx.op("Floor", fx.op("Add", fx.op("Abs", u), fx.c(0.5)))
    return fx.op("Mul", fx.op("Sign", u), mag)


def _inv_sqrt(fx: FixedPointGraph, s: str) -> tuple[str, str]:
    """GetInvSqrtQuantizedMultiplierExp(s, -1) for 0 <= s < 2^29: (multiplier, shift <= 0)."""
    b = fx.b
    small = fx.op("LessOrEqual", s, fx.c(1.0))
    s = fx.op("Max", s, fx.c(2.0))
    clz = fx.clz(s)
    pairs = fx.op(
        "Sub", fx.op("Floor", fx.op("Mul", fx.op("Sub", clz, fx.c(1.0)), fx.c(0.5))), fx.c(1.0)
    )
    shift = fx.op("Sub", fx.c(11.0), pairs)
    x_in = fx.op("Mul", s, fx.op("Pow", fx.c(4.0), pairs))
    half_input = fx.rdbpot(fx.floor_div_pot(x_in, 1), 1)
    x = fx.op("Add", fx.op("Mul", s, fx.c(0.0)), fx.c(float(1 << 28)))
    for _ in range(5):
        x3 = fx.sat_left(fx.srdhm(fx.srdhm(x, x), x), 6)
        step = fx.op("Sub", fx.srdhm(x, _HALF_THREE), fx.srdhm(half_input, x3))
        x = fx.sat_left(step, 3)
    x = fx.srdhm(x, _HALF_SQRT2)
    x = fx.op("Mul", x, _pow2(fx, fx.op("Max", fx.op("Neg", shift), fx.c(0.0))))
    out_shift = fx.op("Neg", fx.op("Max", shift, fx.c(0.0)))
    inv = b.emit("Where", [small, fx.c(float(_I32_MAX)), x])[0]
    return inv, b.emit("Where", [small, fx.c(0.0), out_shift])[0]


def l2_normalization(b: GraphBuilder, op: Operator) -> None:
    where = op.where
    dtype = b.tensor(op.inputs[0]).dtype
    if dtype not in ("int8", "uint8") or b.tensor(op.outputs[0]).dtype != dtype:
        raise ConversionError(f"bit_exact: {dtype} L2_NORMALIZATION is not emulated", where)
    g_in, g_out = grid(b, op.inputs[0], where), grid(b, op.outputs[0], where)
    out_zp = 128 if dtype == "uint8" else 0
    if (g_out.scale, g_out.zero_point) != (1.0 / 128.0, out_zp):
        raise ConversionError(
            "bit_exact: L2_NORMALIZATION's output must be on the kernel's grid "
            f"(scale 1/128, zero point {out_zp})",
            where,
        )
    depth = b.tensor(op.inputs[0]).shape[-1]
    if depth * g_in.max_abs_offset**2 >= 2**29:
        raise ConversionError("bit_exact: L2_NORMALIZATION row too long to emulate", where)
    fx = FixedPointGraph(b)
    d = cast(b, offsets(b, op.inputs[0], where), TensorProto.DOUBLE)
    total = reduce_axes(b, "ReduceSum", fx.op("Mul", d, d), [rank_of(b, op.inputs[0]) - 1], 1)
    inv, shift = _inv_sqrt(fx, total)
    if dtype == "uint8":
        r = _rdbpot(fx, fx.srdhm(fx.op("Mul", d, fx.c(128.0)), inv), fx.op("Neg", shift))
        q = fx.op("Add", r, fx.c(128.0))
        lo, hi = 0.0, 255.0
    else:  # MultiplyByQuantizedMultiplier(d, inv, shift + 7): left or right of the high mul
        total_shift = fx.op("Add", shift, fx.c(7.0))
        left = fx.op("Max", total_shift, fx.c(0.0))
        right = fx.op("Max", fx.op("Neg", total_shift), fx.c(0.0))
        r = _rdbpot(fx, fx.srdhm(fx.op("Mul", d, _pow2(fx, left)), inv), right)
        q, lo, hi = r, -128.0, 127.0
    q = fx.op("Max", fx.op("Min", q, fx.c(hi)), fx.c(lo))
    q = cast(b, fx.op("Sub", q, fx.c(float(out_zp))), TensorProto.FLOAT)
    y = b.emit("Mul", [q, b.const(np.array(g_out.scale, np.float32), "output_scale")])[0]
    b.set_output(op.outputs[0], y)
