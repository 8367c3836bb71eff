"""The --bit-exact kernels: CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV, FULLY_CONNECTED,
BATCH_MATMUL, ADD, SUB, MUL, PRELU, SQUARED_DIFFERENCE, MEAN and AVERAGE_POOL_2D as TFLite's
builtin int8 / uint8 reference kernels compute them.

``ops.dispatch`` runs the kernel its record names (here, or ``exact.entry`` where it needs
the operand geometry) under --bit-exact when the operator runs an integer kernel; the
fixed-point arithmetic and graph pieces are ``tflite2qonnx.fixed_point`` (which imports nothing
from ``ops``), whose docstring says how it is made exact.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.fixed_point import (
    EXACT_F32,
    Grid,
    cast,
    conv_multipliers,
    f64,
    grid,
    integer_product,
    integer_weights,
    offsets,
    quantize_multiplier,
    raw_integers,
    requantize,
    requantize_single_rounding,
    rounding_divide_by_pot,
    wrap_int32,
)
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.common import reduce_axes
from tflite2qonnx.ops.padding import spatial_attrs


def conv(b: GraphBuilder, op: Operator, perm, kernel, groups: int) -> None:
    """CONV_2D / DEPTHWISE_CONV_2D as the reference integer kernels compute them."""
    where = op.where
    g_in, g_out = grid(b, op.inputs[0], where), grid(b, op.outputs[0], where)
    w, w_zp = integer_weights(b, op.inputs[1], perm, where)
    x = offsets(b, op.inputs[0], where)
    attrs = spatial_attrs(b, op, kernel)
    acc, bound = integer_product(
        b,
        "Conv",
        x,
        w,
        op.inputs[1],
        w_zp,
        0,
        g_in.max_abs_offset,
        where,
        group=groups,
        kernel_shape=list(kernel),
        **attrs,
    )
    s_w = b.tensor(op.inputs[1]).quantization.scale
    per_tensor = len(s_w) == 1
    m0, shift = conv_multipliers(
        g_in.scale, s_w, g_out.scale, per_tensor and b.tensor(op.inputs[0]).dtype == "uint8"
    )
    finish_accumulator(b, op, acc, bound, m0, shift, w.shape[0], g_out, where, bias_slot=2)


def transpose_conv(b: GraphBuilder, op: Operator, perm, attrs: dict) -> None:
    """TRANSPOSE_CONV (int8 input, per-channel int8 weights): the integer ConvTranspose of
    ``q - zp`` (inputs: output shape, weights, input[, bias]), bias added, requantized per
    output channel with the 32-bit MultiplyByQuantizedMultiplier."""
    where = op.where
    w_idx, x_idx = op.inputs[1], op.inputs[2]
    if b.tensor(x_idx).dtype != "int8":
        raise ConversionError("bit_exact: only int8 TRANSPOSE_CONV is emulated", where)
    g_in, g_out = grid(b, x_idx, where), grid(b, op.outputs[0], where)
    w, w_zp = integer_weights(b, w_idx, perm, where)
    x = offsets(b, x_idx, where)
    max_x = g_in.max_abs_offset
    acc, bound = integer_product(b, "ConvTranspose", x, w, w_idx, w_zp, 1, max_x, where, **attrs)
    s_w = b.tensor(w_idx).quantization.scale
    m0, shift = conv_multipliers(g_in.scale, s_w, g_out.scale, False)
    finish_accumulator(b, op, acc, bound, m0, shift, w.shape[1], g_out, where, bias_slot=3)


def fully_connected(b: GraphBuilder, op: Operator, x_reshaped) -> None:
    """FULLY_CONNECTED; ``x_reshaped(x)`` applies the converter's input reshape."""
    where = op.where
    g_in, g_out = grid(b, op.inputs[0], where), grid(b, op.outputs[0], where)
    w, w_zp = integer_weights(b, op.inputs[1], (1, 0), where)
    x = x_reshaped(offsets(b, op.inputs[0], where))
    acc, bound = integer_product(
        b, "MatMul", x, w, op.inputs[1], w_zp, 1, g_in.max_abs_offset, where
    )
    s_w = b.tensor(op.inputs[1]).quantization.scale
    m0, shift = conv_multipliers(g_in.scale, s_w, g_out.scale, len(s_w) == 1)
    # int8 (per-channel and per-tensor weights alike) requantizes with one rounding and the
    # whole 31-bit multiplier (TFLITE_SINGLE_ROUNDING's MultiplyByQuantizedMultiplier); uint8
    # with the 32-bit double-rounding one. hello_world's layers tell the three apart (the
    # 64-bit overload's 16-bit multiplier was 5 of 48,000 off, double rounding 116).
    single = "full" if len(s_w) > 1 or b.tensor(op.inputs[0]).dtype == "int8" else False
    finish_accumulator(
        b, op, acc, bound, m0, shift, w.shape[1], g_out, where, bias_slot=2, single=single
    )


def batch_matmul_operands(
    b: GraphBuilder, op: Operator, values: Iterable[str]
) -> tuple[list[str], int]:
    """BATCH_MATMUL's two operand ``values`` with adj_x / adj_y applied (the last two axes
    transposed), and the depth its products sum over."""
    operands = []
    for idx, key, x in zip(op.inputs[:2], ("adj_x", "adj_y"), values, strict=True):
        if op.options.get(key, False):
            rank = len(b.tensor(idx).shape)
            x = b.emit("Transpose", [x], perm=[*range(rank - 2), rank - 1, rank - 2])[0]
        operands.append(x)
    lhs_shape = b.tensor(op.inputs[0]).shape
    return operands, lhs_shape[-2] if op.options.get("adj_x", False) else lhs_shape[-1]


def batch_matmul(b: GraphBuilder, op: Operator) -> None:
    """BATCH_MATMUL (int8): the integer product of both operands' ``q - zp`` (adj_x / adj_y
    transpose the last two axes first), requantized with the float32 product of the input
    scales over the output scale (GetQuantizedConvolutionMultipler) by the 32-bit
    MultiplyByQuantizedMultiplier (two roundings, unlike int8 FULLY_CONNECTED)."""
    where = op.where
    grids = [grid(b, i, where) for i in op.inputs[:2]]
    g_out = grid(b, op.outputs[0], where)
    operands, depth = batch_matmul_operands(b, op, (offsets(b, i, where) for i in op.inputs[:2]))
    if depth * grids[0].max_abs_offset * grids[1].max_abs_offset >= EXACT_F32:
        raise ConversionError("bit_exact: BATCH_MATMUL too deep for exact float32 sums", where)
    acc = cast(b, b.emit("MatMul", operands)[0], TensorProto.DOUBLE)
    m0, shift = conv_multipliers(grids[0].scale, [grids[1].scale], g_out.scale, True)
    bound = float(depth * grids[0].max_abs_offset * grids[1].max_abs_offset)
    y = requantize(b, acc, m0[0], shift[0], bound, g_out.scale, where)
    b.set_output(op.outputs[0], y)


def finish_accumulator(
    b, op, acc, bound, m0, shift, channels, g_out, where, bias_slot, single=False
):
    """Add the bias and requantize: ``single`` False for the double-rounding multiply, True
    for the 64-bit one (16-bit multiplier), "full" for one rounding with the whole one.

    A 16x8 kernel given an int32 bias is its int32 instantiation: the accumulator wraps to
    int32 and the 32-bit, double-rounding multiply requantizes it (``single`` is dropped)."""
    bias_idx = op.inputs[bias_slot] if len(op.inputs) > bias_slot else -1
    if bias_idx >= 0:
        t = b.tensor(bias_idx)
        x_idx = op.inputs[2] if op.name == "TRANSPOSE_CONV" else op.inputs[0]
        int16 = b.tensor(x_idx).dtype == "int16"  # 16x8
        wanted = ("int64", "int32") if int16 else ("int32",)
        if t.data is None or t.dtype not in wanted:
            raise ConversionError(
                f"bit_exact: bias '{t.name}' must be a constant {' or '.join(wanted)}", where
            )
        bias = np.broadcast_to(np.asarray(t.data, np.float64).reshape(-1), (channels,))
        acc = b.emit("Add", [acc, f64(b, bias, "bias")])[0]
        bound = bound + np.abs(bias)
        if int16 and t.dtype == "int32":  # 16x8 with an int32 accumulator
            single = False
            if np.max(bound) >= 2.0**31:
                acc, bound = wrap_int32(b, acc), np.minimum(bound, 2.0**31)
    if m0.size == 1:
        m0, shift, bound = m0[0], shift[0], np.max(bound)
    if single:
        widest = 0xFFFF if single == "full" else 0x7FFF  # a multiplier part, or all 16 bits
        if np.max(bound) * widest >= 2.0**53:
            raise ConversionError("bit_exact: accumulator too wide for exact products", where)
        full = single == "full"
        y = requantize_single_rounding(b, acc, m0, shift, g_out.scale, full, where)
    else:
        y = requantize(b, acc, m0, shift, bound, g_out.scale, where, g_out.bits)
    b.set_output(op.outputs[0], fused_activation(b, op, y))


def _rescaled_inputs(b: GraphBuilder, op: Operator, left_shift: int):
    """Both inputs' ``(q - zp) << left_shift`` on twice the larger input scale, each with its
    own multiplier (SRDHM, then RoundingDivideByPOT): float64 values, their bounds, and that
    doubled scale (a double of the larger float32 scale, as ADD, SUB and SQUARED_DIFFERENCE's
    Prepare compute it)."""
    where = op.where
    g1, g2 = grid(b, op.inputs[0], where), grid(b, op.inputs[1], where)
    twice_max = 2.0 * float(np.float32(max(np.float32(g1.scale), np.float32(g2.scale))))
    parts, bounds = [], []
    for idx, g in ((op.inputs[0], g1), (op.inputs[1], g2)):
        m, e = quantize_multiplier(g.scale / twice_max)
        if e > 0:
            raise ConversionError(f"bit_exact: {op.name} input multiplier >= 1", where)
        x = cast(b, offsets(b, idx, where), TensorProto.DOUBLE)
        # (x << left_shift) * m / 2^31: x * m has at most 40 bits, so this product is exact
        v = b.emit("Mul", [x, f64(b, m * 2.0 ** (left_shift - 31), "multiplier")])[0]
        t = b.emit("Floor", [b.emit("Add", [v, f64(b, 0.5, "half")])[0]])[0]
        parts.append(rounding_divide_by_pot(b, t, -e))
        bounds.append(g.max_abs_offset * (1 << left_shift) * m / 2.0**31 / 2.0**-e + 1)
    return parts, bounds, twice_max


def add(b: GraphBuilder, op: Operator, subtract: bool = False) -> None:
    """ADD / SUB (int8 / uint8): the inputs rescaled with a left shift of 20, summed
    (subtracted), then requantized to the output. SUB's Prepare derives its multipliers
    exactly as ADD's. int16 with general scales: a left shift of 15 (pot_scale_int16 on
    power-of-two scales is another kernel, ``exact_int16.add_pot``)."""
    where = op.where
    g_out = grid(b, op.outputs[0], where)
    left_shift = 15 if g_out.bits == 16 else 20
    parts, bounds, twice_max = _rescaled_inputs(b, op, left_shift)
    out_real = twice_max / float(np.float32((1 << left_shift) * np.float32(g_out.scale)))
    raw = b.emit("Sub" if subtract else "Add", parts)[0]
    m_out, e_out = quantize_multiplier(out_real)
    y = requantize(
        b, raw, np.int64(m_out), np.int64(e_out), sum(bounds), g_out.scale, where, g_out.bits
    )
    b.set_output(op.outputs[0], fused_activation(b, op, y))


def squared_difference(b: GraphBuilder, op: Operator) -> None:
    """SQUARED_DIFFERENCE (int8): the inputs rescaled with a left shift of 7, their
    difference squared (below 2^31, exact in float64), requantized by ``twice_max^2 /
    (2^14 * s_out)``."""
    where = op.where
    g_out = grid(b, op.outputs[0], where)
    parts, bounds, twice_max = _rescaled_inputs(b, op, 7)
    out_real = twice_max * twice_max / float(np.float32((1 << 14) * np.float32(g_out.scale)))
    diff = b.emit("Sub", parts)[0]
    square = b.emit("Mul", [diff, diff])[0]
    m_out, e_out = quantize_multiplier(out_real)
    bound = sum(bounds) ** 2
    y = requantize(b, square, np.int64(m_out), np.int64(e_out), bound, g_out.scale, where)
    b.set_output(op.outputs[0], y)


def mul(b: GraphBuilder, op: Operator) -> None:
    """MUL (int8 / uint8 / int16): ``(q1 - zp1) * (q2 - zp2)`` requantized with the multiplier
    ``s1 * s2 / s_out``, which its Prepare computes in float32 before QuantizeMultiplier."""
    where = op.where
    g1, g2 = grid(b, op.inputs[0], where), grid(b, op.inputs[1], where)
    g_out = grid(b, op.outputs[0], where)
    # |products| <= 255 * 255 (int8) exact in float32; int16 ones are multiplied in float64
    x1, x2 = offsets(b, op.inputs[0], where), offsets(b, op.inputs[1], where)
    if g_out.bits == 16:
        x1, x2 = cast(b, x1, TensorProto.DOUBLE), cast(b, x2, TensorProto.DOUBLE)
        acc = b.emit("Mul", [x1, x2])[0]
    else:
        acc = cast(b, b.emit("Mul", [x1, x2])[0], TensorProto.DOUBLE)
    f32 = np.float32
    m0, shift = quantize_multiplier(float(f32(f32(g1.scale) * f32(g2.scale)) / f32(g_out.scale)))
    bound = float(g1.max_abs_offset * g2.max_abs_offset)
    y = requantize(b, acc, np.int64(m0), np.int64(shift), bound, g_out.scale, where, g_out.bits)
    b.set_output(op.outputs[0], fused_activation(b, op, y))


def prelu(b: GraphBuilder, op: Operator) -> None:
    """PRELU (int8 / uint8): ``x = q - zp`` requantized by ``s_in / s_out`` where x >= 0, and
    ``x * (alpha - zp_alpha)`` by ``s_in * s_alpha / s_out`` elsewhere (both in double, as
    its Prepare computes them); alpha broadcasts against x as numpy's rules say."""
    where = op.where
    g_in, g_a = grid(b, op.inputs[0], where), grid(b, op.inputs[1], where)
    g_out = grid(b, op.outputs[0], where)
    x = offsets(b, op.inputs[0], where)
    x64 = cast(b, x, TensorProto.DOUBLE)
    m1, sh1 = quantize_multiplier(g_in.scale / g_out.scale)
    pos = requantize(b, x64, np.int64(m1), np.int64(sh1), g_in.max_abs_offset, g_out.scale, where)
    product = cast(b, b.emit("Mul", [x, offsets(b, op.inputs[1], where)])[0], TensorProto.DOUBLE)
    m2, sh2 = quantize_multiplier(g_in.scale * g_a.scale / g_out.scale)
    bound = float(g_in.max_abs_offset * g_a.max_abs_offset)
    neg = requantize(b, product, np.int64(m2), np.int64(sh2), bound, g_out.scale, where)
    zero = b.const(np.array(0.0, np.float32), "zero")
    y = b.emit("Where", [b.emit("Less", [x, zero])[0], neg, pos])[0]
    b.set_output(op.outputs[0], y)


def mean(b: GraphBuilder, op: Operator, axes: list[int], keepdims: int) -> None:
    """MEAN as EvalMeanReferenceOps dispatches it for int8 / uint8, and int16 (16x8).

    Both the int8 H-and-W kernel (reference_integer_ops::Mean) and QuantizedMeanOrSum (other
    axes, differing grids, and every int16 MEAN) sum ``q - zp`` and requantize it with the
    input/output multiplier divided by the count in fixed point: ``(M0 << s) / count`` with
    s = min(floor(log2 count), 32, 31 + shift). uint8 over H and W (a float-derived multiplier
    and bias) and int8 / uint8 with equal input / output grids (an integer division) are other
    kernels, not emulated. Sums that float32 could round are taken in float64.
    """
    where = op.where
    g_in, g_out = grid(b, op.inputs[0], where), grid(b, op.outputs[0], where)
    shape = b.tensor(op.inputs[0]).shape
    count = int(np.prod([shape[a] for a in axes]))
    spatial = keepdims and len(shape) == 4 and sorted(axes) == [1, 2]
    uint8 = b.tensor(op.inputs[0]).dtype == "uint8"
    same_grid = (g_in.scale, g_in.zero_point) == (g_out.scale, g_out.zero_point)
    if (spatial and uint8) or (not spatial and same_grid and g_in.bits == 8):
        raise ConversionError(
            "bit_exact: this MEAN variant (uint8 over H and W, or equal input and output "
            "grids) is not emulated",
            where,
        )
    bound = float(count * g_in.max_abs_offset)
    if bound >= 2.0**31:
        raise ConversionError("bit_exact: MEAN's int32 sum could overflow", where)
    m0, sh = quantize_multiplier(float(np.float32(g_in.scale)) / float(np.float32(g_out.scale)))
    adj = min(count.bit_length() - 1, 32, 31 + sh)
    m1, sh1 = (m0 << adj) // count, sh - adj
    x = offsets(b, op.inputs[0], where)
    if bound >= EXACT_F32:
        x = cast(b, x, TensorProto.DOUBLE)
    acc = reduce_axes(b, "ReduceSum", x, axes, keepdims)
    if bound < EXACT_F32:
        acc = cast(b, acc, TensorProto.DOUBLE)
    y = requantize(b, acc, np.int64(m1), np.int64(sh1), bound, g_out.scale, where, g_out.bits)
    b.set_output(op.outputs[0], y)


def pool_operands(b: GraphBuilder, op: Operator, kernel) -> tuple[Grid, str, dict, np.ndarray]:
    """AVERAGE_POOL_2D's (int8 and 16x8) output grid, raw input integers, ONNX spatial
    attributes (static spatial dims only) and each window's count of valid cells."""
    where = op.where
    g_out = grid(b, op.outputs[0], where)
    raw, _ = raw_integers(b, op.inputs[0], where)
    attrs = spatial_attrs(b, op, kernel)
    if "auto_pad" in attrs:
        raise ConversionError("bit_exact: AVERAGE_POOL_2D needs static spatial dims", where)
    in_hw, out_hw = (b.tensor(i).shape[1:3] for i in (op.inputs[0], op.outputs[0]))
    return g_out, raw, attrs, valid_counts(in_hw, out_hw, kernel, attrs)


def average_pool(b: GraphBuilder, op: Operator, kernel) -> None:
    """AVERAGE_POOL_2D: the raw integers summed over the window's valid cells, divided by
    their count rounding half away from zero, on the output's grid."""
    g_out, raw, attrs, counts = pool_operands(b, op, kernel)
    window = int(kernel[0] * kernel[1])
    pool_attrs = {"kernel_shape": list(kernel), "count_include_pad": 1, **attrs}
    pooled = b.emit("AveragePool", [raw], **pool_attrs)[0]
    # mean * window is within a few ulps of the integer sum: Round recovers it exactly
    total = b.emit(
        "Round", [b.emit("Mul", [pooled, b.const(np.array(window, np.float32), "window")])[0]]
    )[0]
    # |sum / count - (m + 1/2)| >= 1 / (2 count) >> float32's error: ties stay exact ties
    mean_ = b.emit("Div", [total, b.const(counts, "count")])[0]
    k = b.quant(
        mean_, "rounded", None, scale=1.0, bit_width=32, signed=True, rounding_mode="HALF_UP"
    )
    if g_out.zero_point:
        k = b.emit("Sub", [k, b.const(np.array(g_out.zero_point, np.float32), "zero_point")])[0]
    y = b.emit("Mul", [k, b.const(np.array(g_out.scale, np.float32), "scale")])[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))


def valid_counts(in_hw, out_hw, kernel, attrs) -> np.ndarray:
    """Cells of each window inside the input (TFLite divides by that), NHWC-broadcastable."""
    per_axis = []
    for a in range(2):
        begin, stride = attrs["pads"][a], attrs["strides"][a]
        starts = np.arange(out_hw[a]) * stride - begin
        ends = np.minimum(starts + kernel[a], in_hw[a])
        per_axis.append(ends - np.maximum(starts, 0))
    counts = np.outer(per_axis[0], per_axis[1]).astype(np.float32)
    if np.all(counts == counts.flat[0]):
        return np.array(counts.flat[0], np.float32)
    return counts.reshape(1, out_hw[0], out_hw[1], 1)
