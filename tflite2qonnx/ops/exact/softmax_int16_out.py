"""SOFTMAX from int8 / uint8 to int16 as TFLite's builtin reference kernel computes it.

Only the int8 -> int8 (and uint8 -> uint8) kernels run the float table of ``exact_softmax``;
with an int16 output the reference resolver runs gemmlowp's fixed-point
reference_ops::Softmax<In, int16_t> (TFLite Micro's keyword models end with it). SoftmaxPrepare
takes ``PreprocessSoftmaxScaling(beta, s_in, 5)`` (M_in, left shift) and ``diff_min =
-CalculateInputRadius(5, left shift)``. Per row of the last axis, with ``d = q - max(q)``:

    e(d)   = exp_on_negative_values<5>(MBQM>1(d, M_in, shift))          (Q0.31)
    S      = sum over d >= diff_min of Rescale<12>(e(d))                (Q12.19)
    c      = CountLeadingZeros(S);  r = one_over_one_plus_x(S << c - 2^31)   (GetReciprocal)
    q_out  = d >= diff_min ? clamp(RoundingDivideByPOT(SRDHM(r, e(d)), 27 - c) - 32768) : -32768

``e`` and its rescaled form depend on one element: 256-entry tables of d (numpy, gemmlowp's
arithmetic, shared with ``exact.log_softmax``). The row's reciprocal and the final products
are evaluated in the graph on integer-valued float64 tensors (``FixedPointGraph``).
"""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.fixed_point import cast, quantize_multiplier, raw_integers
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.common import reduce_axes
from tflite2qonnx.ops.exact.int8_tables import (
    multiply_by_quantized_multiplier,
    rounding_divide_by_pot,
)
from tflite2qonnx.ops.exact.log_softmax import (
    FixedPointGraph,
    exp_on_negative_values,
    row_max_tables,
)

_SCALED_DIFF_BITS = 5


def int16_output(b: GraphBuilder, op: Operator) -> bool:
    """Whether this kernel, not ``exact.softmax``'s table, runs (its record's ``when``): the
    output is int16."""
    return b.tensor(op.outputs[0]).dtype == "int16"


def prepare(s_in: float, beta: float, where: str, name: str = "") -> tuple[int, int, int]:
    """SoftmaxPrepare's (M_in, left shift, diff_min) for the reference kernel."""
    real = min(beta * float(np.float32(s_in)) * (1 << (31 - _SCALED_DIFF_BITS)), (1 << 31) - 1.0)
    if not (math.isfinite(real) and real > 1.0):  # QuantizeMultiplierGreaterThanOne's check
        raise ConversionError(
            f"bit_exact: SOFTMAX input '{name}': scale x beta x 2^26 is {real:g}, the kernel "
            "needs > 1",
            where,
        )
    m_in, left = quantize_multiplier(real)
    max_rescaled = (
        1.0 * ((1 << _SCALED_DIFF_BITS) - 1) * (1 << (31 - _SCALED_DIFF_BITS)) / (1 << left)
    )
    return int(m_in), int(left), -math.floor(max_rescaled)


def _output_grid(b: GraphBuilder, op: Operator) -> tuple[float, int]:
    """The int16 output's (scale, zero point): the kernel writes ``unsat - 32768`` whatever
    the zero point (-32768 in TF's models), so ``grid``'s 16x8 zero-point rule does not apply."""
    t = b.tensor(op.outputs[0])
    q = t.quantization
    if q is None or len(q.scale) != 1:
        raise ConversionError(f"bit_exact: SOFTMAX output '{t.name}' needs one scale", op.where)
    return float(np.float32(q.scale[0])), int(q.zero_point[0])


def softmax(b: GraphBuilder, op: Operator) -> None:
    where = op.where
    if b.tensor(op.inputs[0]).dtype not in ("int8", "uint8"):
        raise ConversionError("bit_exact: SOFTMAX to int16 needs an int8 / uint8 input", where)
    x_raw, g_in = raw_integers(b, op.inputs[0], where)
    s_out, zp_out = _output_grid(b, op)
    beta = float(op.options.get("beta", 1.0))
    m_in, left, diff_min = prepare(g_in.scale, beta, where, b.tensor(op.inputs[0]).name)
    d = np.arange(0, -256, -1, dtype=np.int64)  # table index k holds d = -k
    exps = exp_on_negative_values(multiply_by_quantized_multiplier(d, m_in, left), 5)
    axis, k, table = row_max_tables(b, op, x_raw)
    fx = FixedPointGraph(b)
    terms = np.where(d >= diff_min, rounding_divide_by_pot(exps, 12), 0)
    total = reduce_axes(b, "ReduceSum", table(terms, "softmax_exp_q12"), [axis], 1)
    clz = fx.clz(total)
    shifted = fx.op("Sub", fx.op("Mul", total, fx.op("Pow", fx.c(2.0), clz)), fx.c(2.0**31))
    recip = fx.one_over_one_plus_x(shifted)
    product = fx.srdhm(table(exps, "softmax_exp_q31"), recip)  # SRDHM is symmetric
    u = fx.op("Mul", product, fx.op("Pow", fx.c(2.0), fx.op("Sub", clz, fx.c(27.0))))
    unsat = fx.op("Floor", fx.op("Add", u, fx.c(0.5)))  # product >= 0: half away from zero
    q = fx.op(
        "Max", fx.op("Min", fx.op("Sub", unsat, fx.c(32768.0)), fx.c(32767.0)), fx.c(-32768.0)
    )
    kept_here = b.emit("LessOrEqual", [k, b.const(np.array(-diff_min, np.int64), "diff_min")])[0]
    q = b.emit("Where", [kept_here, q, fx.c(-32768.0)])[0]
    q = cast(b, fx.op("Sub", q, fx.c(float(zp_out))), TensorProto.FLOAT)
    y = b.emit("Mul", [q, b.const(np.array(s_out, np.float32), "output_scale")])[0]
    b.set_output(op.outputs[0], y)
