"""The default int8 / uint8 kernels of MUL, PRELU, LEAKY_RELU and MEAN: their float graph with
the requantization rounded as the builtin kernels' ``MultiplyByQuantizedMultiplier`` rounds it,
twice where the multiplier shifts right (``ops.kernel_rounding``). Their records run each by
default where its ``when`` (beside it here) holds (``ops.dispatch``), so the converters hold
the single-rounding float graph only; --bit-exact runs the emulated kernels before these.
"""

from __future__ import annotations

import numpy as np

from tflite2qonnx.fixed_point import quantize_multiplier
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator, ScaleRangeError
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.common import reduce_axes
from tflite2qonnx.ops.geometry import keep_dims, reduction_axes
from tflite2qonnx.ops.kernel_rounding import (
    int8_scales,
    round_as_kernel,
    round_twice,
    rounds_twice,
    shifts_right,
)


def _mul_multiplier(b: GraphBuilder, op: Operator) -> float | None:
    """MUL's ``s1 * s2 / s_out`` (its Prepare multiplies the scales in float32) where both
    operands and the output are int8 / uint8 per tensor and the operands of one type."""
    scales = int8_scales(b, op, 2)
    if scales is None or b.tensor(op.inputs[0]).dtype != b.tensor(op.inputs[1]).dtype:
        return None
    f32 = np.float32
    s1, s2, s_out = scales
    return float(f32(f32(s1) * f32(s2)) / f32(s_out))


def mul_rounds_twice(b: GraphBuilder, op: Operator) -> bool:
    """MUL's kernel's ``when``: its multiplier shifts right."""
    m = _mul_multiplier(b, op)
    return m is not None and shifts_right(m)


def mul(b: GraphBuilder, op: Operator) -> None:
    """int8 / uint8 MUL: the product rounded twice as the kernel rounds it, by
    ``s1 * s2 / s_out``; then the fused activation on the output grid."""
    s_out = int8_scales(b, op, 2)[2]
    y = b.emit("Mul", [b.input(op.inputs[0]), b.input(op.inputs[1])])[0]
    y = round_as_kernel(b, y, _mul_multiplier(b, op), s_out, "product")
    b.set_output(op.outputs[0], fused_activation(b, op, y))


def prelu_requantizes(b: GraphBuilder, op: Operator) -> bool:
    """PRELU's kernel's ``when``: x, alpha and the output int8 / uint8 per tensor (each side
    then rounds as the kernel's does, once where its multiplier shifts left)."""
    return int8_scales(b, op, 2) is not None


def prelu(b: GraphBuilder, op: Operator) -> None:
    """int8 / uint8 PRELU: each side rounded as the kernel rounds it, x by ``s_in / s_out``
    (near 1, where rounding twice moves a quarter of the values) and ``x * alpha`` by
    ``s_in * s_alpha / s_out``; XNNPACK leaves int8 PRELU to that kernel."""
    x, alpha = b.input(op.inputs[0]), b.input(op.inputs[1])
    s_in, s_alpha, s_out = int8_scales(b, op, 2)
    pos = round_as_kernel(b, x, s_in / s_out, s_out, "positive")
    product = b.emit("Mul", [x, alpha])[0]
    neg = round_as_kernel(b, product, s_in * s_alpha / s_out, s_out, "negative")
    negative = b.emit("Less", [x, b.const(np.array(0.0, np.float32), "zero")])[0]
    b.set_output(op.outputs[0], b.emit("Where", [negative, neg, pos])[0])


def _leaky_multipliers(b: GraphBuilder, op: Operator) -> tuple[float, float, float] | None:
    """LEAKY_RELU's alpha and its multipliers ``s_in / s_out`` and ``s_in * alpha / s_out``
    (float32 products, as its Prepare), on int8 / uint8 per-tensor grids."""
    scales = int8_scales(b, op, 1)
    if scales is None:
        return None
    f32 = np.float32
    alpha = float(f32(op.options.get("alpha", 0.0)))
    s_in, s_out = scales
    m_id, m_alpha = (float(f32(f32(s_in) * f32(a)) / f32(s_out)) for a in (1.0, alpha))
    return alpha, m_id, m_alpha


def leaky_relu_rounds_twice(b: GraphBuilder, op: Operator) -> bool:
    """LEAKY_RELU's kernel's ``when``: either multiplier shifts right."""
    m = _leaky_multipliers(b, op)
    return m is not None and (shifts_right(m[1]) or shifts_right(m[2]))


def leaky_relu(b: GraphBuilder, op: Operator) -> None:
    """int8 / uint8 LEAKY_RELU: each side rounded as QuantizeLeakyRelu rounds it, x by
    ``s_in / s_out`` and by ``s_in * alpha / s_out`` (RetinaFace's: 93-99.9% equal op by op
    rounding once)."""
    alpha, m_id, m_alpha = _leaky_multipliers(b, op)
    s_out = int8_scales(b, op, 1)[1]
    x = b.input(op.inputs[0])
    pos = round_as_kernel(b, x, m_id, s_out, "positive")
    product = b.emit("Mul", [x, b.const(np.array(alpha, np.float32), "alpha")])[0]
    neg = round_as_kernel(b, product, m_alpha, s_out, "negative")
    negative = b.emit("Less", [x, b.const(np.array(0.0, np.float32), "zero")])[0]
    b.set_output(op.outputs[0], b.emit("Where", [negative, neg, pos])[0])


def _mean_right_shift(b: GraphBuilder, op: Operator) -> int | None:
    """The right shift of the int8 MEAN kernel's requantization (``exact.int8.mean``): its
    multiplier ``(M0 << adj) / count`` and shift ``shift - adj``; None where that kernel does
    not run (same grids, uint8 over H and W, dynamic shapes)."""
    scales = int8_scales(b, op, 1)
    shape = b.tensor(op.inputs[0]).shape
    if scales is None or shape is None or any(d is None or d < 1 for d in shape):
        return None
    axes = [a % len(shape) for a in reduction_axes(b, op)]
    src, dst = b.tensor(op.inputs[0]), b.tensor(op.outputs[0])
    spatial = keep_dims(op) and len(shape) == 4 and sorted(axes) == [1, 2]
    same_grid = tuple(src.quant.scale.ravel()) + tuple(src.quant.zero_point.ravel()) == tuple(
        dst.quant.scale.ravel()
    ) + tuple(dst.quant.zero_point.ravel())
    if (spatial and src.dtype == "uint8") or (not spatial and same_grid) or not axes:
        return None
    count = int(np.prod([shape[a] for a in set(axes)]))
    s_in, s_out = scales
    try:
        _, shift = quantize_multiplier(s_in / s_out)
    except ScaleRangeError:
        return None
    adj = min(count.bit_length() - 1, 32, 31 + shift)
    return adj - shift


def mean_rounds_twice(b: GraphBuilder, op: Operator) -> bool:
    """MEAN's kernel's ``when``: int8 / uint8 on two grids (not uint8 over H and W, another
    kernel), its requantization shifting right."""
    right = _mean_right_shift(b, op)
    return right is not None and rounds_twice(right)


def mean(b: GraphBuilder, op: Operator) -> None:
    """int8 / uint8 MEAN: the mean rounded twice as the kernel rounds its sum (OSNet's MEANs:
    94-99.6% equal op by op rounding once)."""
    right = _mean_right_shift(b, op)
    x = b.input(op.inputs[0])
    y = reduce_axes(b, "ReduceMean", x, reduction_axes(b, op), keep_dims(op))
    s_out = float(np.float32(b.tensor(op.outputs[0]).quantization.scale[0]))
    b.set_output(op.outputs[0], round_twice(b, y, right, s_out, "mean"))
