"""The default (float) form's rounding where TFLite's fixed-point requantization rounds twice.

A quantized op's float graph normally ends in one Quant, which rounds once, as XNNPACK
does. TFLite's builtin kernels requantize with ``MultiplyByQuantizedMultiplier``: a rounding
high multiply (onto a grid ``2^right`` times finer than the output's) and then
``RoundingDivideByPOT(right)``. Where the multiplier is near 1 (``right`` of 1 or 2: PRELU's
positive side, a QUANTIZE between int8 grids, MUL) that second rounding moves up to a quarter
of the values by a step; XNNPACK leaves int8 PRELU to the builtin kernel, so it moves them too,
and rounding once fell below it end to end. Here the two roundings are Quant nodes in the
float graph: a scale-1 Quant of ``x / (s_out / 2^right)`` and a ``2^right`` Quant of that
integer (half away from zero both times, before the zero point is added, as the kernel does);
the output's own Quant then only adds the zero point and clamps. No converter calls these:
each op that rounds twice has a default-running int8 kernel in its record, chosen by its
``when`` (``ops.arith.rounding``: MUL, PRELU, LEAKY_RELU, MEAN; ``ops.nn.quantize_rounding``;
``ops.nn.conv_rounding``, ``accumulator_rounds_twice`` here its ``when``).
"""

from __future__ import annotations

import numpy as np

from tflite2qonnx.dtypes import INT8_TYPES
from tflite2qonnx.fixed_point import quantize_multiplier
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator, ScaleRangeError


def per_tensor_scale(b: GraphBuilder, idx: int) -> float | None:
    """The float32 scale of an int8 / uint8 per-tensor tensor, else None."""
    t = b.tensor(idx)
    q = t.quantization
    if t.dtype not in INT8_TYPES or q is None or len(q.scale) != 1:
        return None
    return float(np.float32(q.scale[0]))


def int8_scales(b: GraphBuilder, op: Operator, inputs: int) -> list[float] | None:
    """The scales of ``op``'s first ``inputs`` inputs and its output, when every one is an
    int8 / uint8 per-tensor tensor (the kernels this module follows), else None."""
    scales = [per_tensor_scale(b, i) for i in (*op.inputs[:inputs], op.outputs[0])]
    return None if any(s is None for s in scales) else scales


# beyond this the second rounding moves under 2^-13 of the values, and ``x / (s_out / 2^right)``
# would outgrow float32's exact integers (and a saturating one the 32-bit Quant)
_MAX_RIGHT = 12


def _right_shift(multiplier: float) -> int:
    """How far QuantizeMultiplier's result shifts right (0 where it shifts left)."""
    try:
        _, shift = quantize_multiplier(multiplier)
    except ScaleRangeError:
        shift = 0  # a corrupt file's scales: one rounding, as by default
    return max(0, -shift)


def rounds_twice(right: int) -> bool:
    """Whether ``round_twice`` rounds twice (and adds nodes) for a right shift ``right``."""
    return 0 < right <= _MAX_RIGHT


def shifts_right(multiplier: float) -> bool:
    """Whether ``round_as_kernel`` rounds ``acc * multiplier`` twice (and adds nodes)."""
    return rounds_twice(_right_shift(multiplier))


def round_as_kernel(b: GraphBuilder, x: str, multiplier: float, s_out: float, hint: str) -> str:
    """``x`` (real values: an integer accumulator times its unit) rounded onto the grid
    ``s_out`` as ``MultiplyByQuantizedMultiplier(acc, QuantizeMultiplier(multiplier))``
    rounds it: at ``s_out / 2^right`` first where the multiplier shifts right, then at
    ``s_out``, half away from zero both times. Returns the real values ``k * s_out``, or
    ``x`` itself where the multiplier shifts left (one rounding, the output's Quant).

    The first rounding is a scale-1 Quant of ``x / (s_out / 2^right)``, so its result is an
    exact integer and the second (a ``2^right`` Quant, RoundingDivideByPOT) sees its ties
    exactly; rounded real values would be an ulp off them."""
    return round_twice(b, x, _right_shift(multiplier), s_out, hint)


def round_twice(b: GraphBuilder, x: str, right: int, s_out: float, hint: str) -> str:
    """``x`` rounded at ``s_out / 2^right`` and then at ``s_out`` (``round_as_kernel`` with
    the kernel's right shift given: MEAN derives its multiplier from the count)."""
    if not rounds_twice(right):
        return x  # one rounding: the output's own Quant
    pot = np.float32(2.0**right)
    fine = np.float32(np.float32(s_out) / pot)
    t = b.emit("Div", [x, b.const(np.array(fine, np.float32), f"{hint}_fine_scale")])[0]
    kwargs = {"bit_width": 32, "signed": True, "rounding_mode": "HALF_UP"}
    t = b.quant(t, f"{hint}_high_mul", None, scale=np.float32(1.0), **kwargs)
    t = b.quant(t, f"{hint}_divide_by_pot", None, scale=pot, **kwargs)
    return b.emit("Mul", [t, b.const(np.array(fine, np.float32), f"{hint}_fine_scale")])[0]


# an accumulator's multiplier shifts right by up to 21 (Coral MobileNet v2); at 15 the fine
# grid's integers stay within float32's exact ones (255 steps * 2^15 < 2^24), and a deeper
# shift's first rounding differs from 2^-15's only within 2^-16 of a tie
_ACC_MAX_RIGHT = 15


def _accumulator_rights(b: GraphBuilder, op: Operator) -> np.ndarray | None:
    """Each output channel's right shift of an int8 / uint8 convolution's requantization
    (``QuantizeMultiplier(s_in * s_w[c] / s_out)``), capped; None for other types and hybrid
    or blockwise weights."""
    s_in, s_out = per_tensor_scale(b, op.inputs[0]), per_tensor_scale(b, op.outputs[0])
    q = b.tensor(op.inputs[1]).quantization
    if s_in is None or s_out is None or q is None or q.block_size:
        return None
    if b.tensor(op.inputs[1]).dtype not in INT8_TYPES:
        return None
    f32 = np.float32
    multipliers = [float(f32(f32(s_in) * f32(s))) / float(f32(s_out)) for s in q.scale]
    return np.array([min(_right_shift(m), _ACC_MAX_RIGHT) for m in multipliers])


def accumulator_rounds_twice(b: GraphBuilder, op: Operator) -> bool:
    """The ``when`` of the int8 convolutions' default kernel (their records): int8 / uint8
    activations, output and weights, per-tensor activation scales, and some channel's
    multiplier shifting right (where every one shifts left, the output's Quant rounds once
    as the kernel does). Both convolutions are needed (either alone leaves the gesture model
    where it was); not FULLY_CONNECTED, which moved no corpus figure and is the hls4ml MLP's
    layer."""
    rights = _accumulator_rights(b, op)
    return rights is not None and bool(rights.any())


def requantize_accumulator(b: GraphBuilder, op: Operator, y: str) -> str:
    """``y`` (an int8 / uint8 CONV_2D or DEPTHWISE_CONV_2D's float result, before its fused
    activation, where ``accumulator_rounds_twice`` holds) rounded as the builtin kernels
    requantize the accumulator, per output channel: ``MultiplyByQuantizedMultiplier(acc,
    QuantizeMultiplier(s_in * s_w[c] / s_out))`` rounds at ``s_out / 2^right[c]`` and then at
    ``s_out``, half away from zero both times. XNNPACK rounds once, as one Quant does;
    rounding once on every convolution of the gesture model left its regressors below
    XNNPACK end to end (68.6% equal to the builtin kernels, XNNPACK 69.3%), twice 75.8% (each
    convolution alone 99.998%).

    This is the reference kernels' rounding (--verify's first reference), every convolution
    output of eight corpus models equal to them op by op. The optimized builtin kernels break
    the second rounding's ties upward instead (CONV_2D through ruy, int8 DEPTHWISE_CONV_2D's
    NEON_2_SSE ``Quantize``): against them this form is off on up to 0.55% of a model's 1x1
    convolution outputs (the gesture model), where ties upward are exact; not followed here."""
    rights = _accumulator_rights(b, op)
    assert rights is not None and rights.any(), "requantize_accumulator: its kernel's when"
    f32 = np.float32
    s_out = per_tensor_scale(b, op.outputs[0])
    pot = (2.0**rights).astype(np.float32)
    fine = (f32(s_out) / pot).astype(np.float32)
    if np.all(rights == rights[0]):
        pot, fine = pot[:1].reshape(()), fine[:1].reshape(())
    kwargs = {"bit_width": 32, "signed": True, "rounding_mode": "HALF_UP", "scale": f32(1.0)}
    t = b.emit("Div", [y, b.const(fine, "accumulator_fine_scale")])[0]
    t = b.quant(t, "accumulator_high_mul", None, **kwargs)  # an integer on the fine grid
    t = b.emit("Div", [t, b.const(pot, "accumulator_pot")])[0]  # exact: a power of two
    t = b.quant(t, "accumulator_divide_by_pot", None, **kwargs)
    return b.emit("Mul", [t, b.const(np.array(s_out, np.float32), "accumulator_scale")])[0]
