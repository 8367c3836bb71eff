"""The 16x8 kernels (int16 activations with zero point 0, int8 weights, int64 biases) as
TFLite's builtin reference kernels compute them: CONV_2D, DEPTHWISE_CONV_2D,
FULLY_CONNECTED, AVERAGE_POOL_2D and QUANTIZE from int16 (``ops.exact.softmax16`` has SOFTMAX,
``ops.exact.int8`` MEAN), and, under --bit-exact, ADD / SUB with pot_scale_int16 on power-of-two
scales.

They run both by default and under --bit-exact (their records' int16 kernels run BY_DEFAULT):
the 16x8 kernels requantize with a multiplier rounded to 16 bits, which moves about one output
in twenty by a step against any single rounding of the real product, so only their arithmetic
agrees with the interpreter end to end.

* Convolutions and FULLY_CONNECTED accumulate ``x * w`` in int64, add the int64 bias and
  requantize with the 64-bit MultiplyByQuantizedMultiplier (``requantize_single_rounding``).
  A float32 Conv is exact only while its partial sums stay below 2^24, so the int16 input is
  split into its high and low bytes (``x = 256 * hi + lo``), two int8-sized products that
  meet in float64.
* QUANTIZE from int16 (to int16, int8 or int32) requantizes with the 32-bit, double-rounding
  MultiplyByQuantizedMultiplier: with a right shift of a bit or two (int16 to int16) a
  quarter of the outputs land a step away from any single rounding.
* AVERAGE_POOL_2D sums the window's valid cells in int32 and divides by their count rounding
  half away from zero; the sum is a grouped Conv with a kernel of ones (exact in float32 below
  2^24: AveragePool's mean times the window is not, at int16 magnitudes), the quotient float64.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.fixed_point import (
    EXACT_F32,
    cast,
    conv_multipliers,
    f64,
    grid,
    integer_product,
    integer_weights,
    offsets,
    quantize_multiplier,
    requantize,
    rounding_divide_by_pot,
)
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.common import clip_bounds
from tflite2qonnx.ops.exact.int8 import finish_accumulator, pool_operands
from tflite2qonnx.ops.exact.table_gather import c_float_fn
from tflite2qonnx.ops.padding import spatial_attrs

_BYTE = 256.0


def split_product(b, op_type, x, w, w_idx, w_zp, out_axis, where, **attrs):
    """Exact ``op_type(x, w)`` for an int16-valued float32 ``x``: its bytes, stacked on the
    batch axis through one node (one reader of the weights, which --channels-last folds)."""
    inv_byte, byte = (b.const(np.array(v, np.float32), "byte") for v in (1 / _BYTE, _BYTE))
    hi = b.emit("Floor", [b.emit("Mul", [x, inv_byte])[0]])[0]
    lo = b.emit("Sub", [x, b.emit("Mul", [hi, byte])[0]])[0]
    both = b.emit("Concat", [hi, lo], axis=0)[0]
    # |hi| <= 128 and lo <= 255 bound the float32 sums (integer_product checks them)
    acc, _ = integer_product(b, op_type, both, w, w_idx, w_zp, out_axis, 255, where, **attrs)
    acc_hi, acc_lo = b.emit("Split", [acc], n_outputs=2, axis=0)
    acc = b.emit("Add", [b.emit("Mul", [acc_hi, f64(b, _BYTE, "byte")])[0], acc_lo])[0]
    moved = np.moveaxis(np.abs(w), out_axis, 0).reshape(w.shape[out_axis], -1)
    return acc, moved.sum(axis=1) * 32768.0


def conv(b: GraphBuilder, op: Operator, perm, kernel, groups: int) -> None:
    """16x8 CONV_2D / DEPTHWISE_CONV_2D (reference_integer_ops' int16 ConvPerChannel and
    DepthwiseConvPerChannel): per-channel multipliers in double; with an int64 bias one
    rounding (the 64-bit multiply), with an int32 bias the int32 instantiation (wrapped
    accumulator, the 32-bit double-rounding multiply: ``int8.finish_accumulator``)."""
    where = op.where
    if len(op.inputs) < 3 or op.inputs[2] < 0:
        raise ConversionError(
            "bit_exact: an int16 convolution without a bias is not emulated", where
        )
    g_in, g_out = grid(b, op.inputs[0], where), grid(b, op.outputs[0], where)
    w, w_zp = integer_weights(b, op.inputs[1], perm, where)
    attrs = spatial_attrs(b, op, kernel)
    x = offsets(b, op.inputs[0], where)
    acc, bound = split_product(
        b, "Conv", x, w, op.inputs[1], w_zp, 0, where,
        group=groups, kernel_shape=list(kernel), **attrs,
    )  # fmt: skip
    s_w = b.tensor(op.inputs[1]).quantization.scale
    m0, shift = conv_multipliers(g_in.scale, s_w, g_out.scale, False)
    finish_accumulator(
        b, op, acc, bound, m0, shift, w.shape[0], g_out, where, bias_slot=2, single=True
    )


def fully_connected(b: GraphBuilder, op: Operator, x_reshaped) -> None:
    """16x8 FULLY_CONNECTED as the reference kernel (FullyConnectedInt16 /
    FullyConnectedPerChannelInt16 with scales) computes it: the int64 accumulator times the
    double ``s_in * s_w[c] / s_out``, rounded half away from zero (C's round)."""
    where = op.where
    g_in, g_out = grid(b, op.inputs[0], where), grid(b, op.outputs[0], where)
    w, w_zp = integer_weights(b, op.inputs[1], (1, 0), where)
    x = x_reshaped(offsets(b, op.inputs[0], where))
    acc, bound = split_product(b, "MatMul", x, w, op.inputs[1], w_zp, 1, where)
    bias_idx = op.inputs[2] if len(op.inputs) > 2 else -1
    if bias_idx >= 0:
        t = b.tensor(bias_idx)
        if t.data is None or t.dtype not in ("int32", "int64"):
            raise ConversionError(f"int16 FULLY_CONNECTED: bias '{t.name}' not constant", where)
        acc = b.emit("Add", [acc, f64(b, np.asarray(t.data, np.float64).reshape(-1), "bias")])[0]
        bound = bound + np.abs(np.asarray(t.data, np.float64).reshape(-1))
    if np.max(bound) >= 2.0**53:
        raise ConversionError("int16 FULLY_CONNECTED: accumulator beyond float64", where)
    s_w = np.asarray(b.tensor(op.inputs[1]).quantization.scale, np.float32).astype(np.float64)
    real = float(np.float32(g_in.scale)) * s_w / float(np.float32(g_out.scale))
    v = b.emit("Mul", [acc, f64(b, real, "multiplier")])[0]  # one IEEE double product
    k = cast(b, _round_half_away(b, v), TensorProto.FLOAT)
    y = b.emit("Mul", [k, b.const(np.array(g_out.scale, np.float32), "output_scale")])[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))


def _round_half_away(b: GraphBuilder, v: str) -> str:
    """C's round of a float64 value, exactly (``floor(|v| + 0.5)`` can round the sum up)."""
    a = b.emit("Abs", [v])[0]
    whole = b.emit("Floor", [a])[0]
    up = b.emit("GreaterOrEqual", [b.emit("Sub", [a, whole])[0], f64(b, 0.5, "half")])[0]
    r = b.emit("Add", [whole, cast(b, up, TensorProto.DOUBLE)])[0]
    return b.emit("Mul", [b.emit("Sign", [v])[0], r])[0]


def average_pool(b: GraphBuilder, op: Operator, kernel) -> None:
    """16x8 AVERAGE_POOL_2D (reference_integer_ops::AveragePool for int16)."""
    where = op.where
    g_out, raw, attrs, counts = pool_operands(b, op, kernel)
    window = int(kernel[0] * kernel[1])
    if window * 32768 >= EXACT_F32:
        raise ConversionError("bit_exact: AVERAGE_POOL_2D window too large for exact sums", where)
    channels = b.tensor(op.inputs[0]).shape[-1]
    ones = b.const(np.ones((channels, 1, *kernel), np.float32), "window_ones")
    attrs = {"dilations": [1, 1], **attrs}  # spelled out: --channels-last's Conv needs it
    total = b.emit("Conv", [raw, ones], group=channels, kernel_shape=list(kernel), **attrs)[0]
    mean_ = b.emit(
        "Div", [cast(b, total, TensorProto.DOUBLE), f64(b, counts.astype(np.float64), "count")]
    )[0]
    # round half away from zero: (acc +- count / 2) / count in C's truncating division
    magnitude = b.emit("Add", [b.emit("Abs", [mean_])[0], f64(b, 0.5, "half")])[0]
    magnitude = b.emit("Floor", [magnitude])[0]
    k = cast(b, b.emit("Mul", [b.emit("Sign", [mean_])[0], magnitude])[0], TensorProto.FLOAT)
    y = b.emit("Mul", [k, b.const(np.array(g_out.scale, np.float32), "scale")])[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))


def checked_log2(scale: float) -> int | None:
    """TFLite's CheckedLog2: the rounded ``logf(x) / logf(2)`` (float32) if within 1e-3 of an
    integer, else None."""
    f32 = np.float32
    x_log2 = f32(c_float_fn("logf", np.array(scale, f32))) * (f32(1) / c_float_fn("logf", f32(2)))
    rounded = float(np.sign(x_log2) * np.floor(abs(float(x_log2)) + 0.5))
    return int(rounded) if abs(float(f32(x_log2 - f32(rounded)))) < 1e-3 else None


def pot_scaled(b: GraphBuilder, op: Operator) -> bool:
    """Whether an int16 ADD / SUB runs the power-of-two kernel: pot_scale_int16 (the default)
    and every scale a power of two by CheckedLog2; otherwise the general-scale one runs."""
    sides = (*op.inputs[:2], op.outputs[0])
    if any(b.tensor(i).dtype != "int16" for i in sides):
        return False
    if not op.options.get("pot_scale_int16", True):
        return False
    return all(checked_log2(grid(b, i, op.where).scale) is not None for i in sides)


def add_pot(b: GraphBuilder, op: Operator, subtract: bool = False) -> None:
    """ADD / SUB with pot_scale_int16 on power-of-two scales (the LSTM kernel, reference_ops'
    int16 Add / Sub16): the input on a finer grid is shifted right to the output's (gemmlowp's
    RoundingDivideByPOT), the other must lie on it; the int16 sum saturates."""
    where = op.where
    logs = [checked_log2(grid(b, i, where).scale) for i in (*op.inputs[:2], op.outputs[0])]
    shifts = [logs[0] - logs[2], logs[1] - logs[2]]
    if max(shifts) > 0 or 0 not in shifts:  # the kernel's Prepare refuses these too
        raise ConversionError(f"int16 {op.name}: one input must share the output's scale", where)
    if b.tensor(op.inputs[0]).shape != b.tensor(op.inputs[1]).shape:
        raise ConversionError(f"int16 {op.name} with power-of-two scales: no broadcasting", where)
    parts = []
    for idx, shift in zip(op.inputs[:2], shifts, strict=True):
        x = offsets(b, idx, where)
        if shift:
            x = rounding_divide_by_pot(b, cast(b, x, TensorProto.DOUBLE), -shift)
            x = cast(b, x, TensorProto.FLOAT)  # |x| <= 2^15: exact
        parts.append(x)
    k = b.emit("Sub" if subtract else "Add", parts)[0]
    k = b.emit("Clip", [k, *clip_bounds(b, -32768.0, 32767.0)])[0]
    s_out = np.array(grid(b, op.outputs[0], where).scale, np.float32)
    y = b.emit("Mul", [k, b.const(s_out, "scale")])[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))


def requantizes(b: GraphBuilder, op: Operator) -> bool:
    """Whether QUANTIZE from int16 is the kernel ``quantize`` emulates (per-tensor grids, a
    ratio below 2^15); the others round once by default and are refused by --bit-exact."""
    return 0.0 < _ratio(b.tensor(op.inputs[0]), b.tensor(op.outputs[0])) < 2.0**15


def _ratio(x_t, y_t) -> float:
    if not _requantizable(x_t, y_t):
        return 0.0
    return float(np.float32(x_t.quant.scale)) / float(np.float32(y_t.quant.scale))


def quantize(b: GraphBuilder, op: Operator) -> None:
    """QUANTIZE from int16 to int8 / int16 / int32 (reference_ops::Requantize) where
    ``requantizes``: ``MultiplyByQuantizedMultiplier(q - zp_in, s_in / s_out) + zp_out``,
    clamped to the output type, the ratio in double, in float64 ops. The int16 input may have
    a zero point unless the output is int16 (Prepare checks both zero). TFLite Micro's keyword
    model ends in int16 (zero point -32768) to int32, whose one rounding is a step off where
    the kernel's lands on a tie. On one grid a copy (the output's Quant alone)."""
    where = op.where
    x_t, y_t = b.tensor(op.inputs[0]), b.tensor(op.outputs[0])
    ratio = _ratio(x_t, y_t)
    zp_in, zp_out = float(x_t.quant.zero_point), float(y_t.quant.zero_point)
    bits = {"int8": 8, "int16": 16, "int32": 32}[y_t.dtype]
    if y_t.dtype == "int16" and ratio == 1.0 and zp_in == zp_out:
        return b.set_output(op.outputs[0], b.input(op.inputs[0]))  # a copy
    m0, shift = quantize_multiplier(ratio)
    # q - zp_in, integers on the int16 grid (a Quant whose zero point is the input's)
    scaled = b.emit("Div", [b.input(op.inputs[0]), b.const(np.float32(x_t.quant.scale), "scale")])
    x = b.quant(
        scaled[0], f"{b.tensor_name(op.inputs[0])}_int", x_t.shape, scale=1.0,
        zero_point=zp_in, bit_width=16, signed=True,
    )  # fmt: skip
    x = cast(b, x, TensorProto.DOUBLE)
    s_out = float(np.float32(y_t.quant.scale))
    y = requantize(b, x, np.int64(m0), np.int64(shift), 65535.0, s_out, where, bits)
    b.set_output(op.outputs[0], y)  # the output's Quant adds zp_out and clamps


def _requantizable(x_t, y_t) -> bool:
    """Per-tensor int16 in, int8 / int16 / int32 out; int16 to int16 with zero points 0
    (what the kernel's Prepare checks)."""
    if x_t.dtype != "int16" or y_t.dtype not in ("int8", "int16", "int32"):
        return False
    if any(t.quant is None or t.quant.axis is not None for t in (x_t, y_t)):
        return False
    if y_t.dtype == "int16":
        return float(x_t.quant.zero_point) == 0 == float(y_t.quant.zero_point)
    return True


def wide_bias(b: GraphBuilder, op: Operator) -> bool:
    """Whether ``conv`` runs by default (its records' ``when``): the bias (input 2) is int64 or
    int32, each the 16x8 convolution kernel's own instantiation, which no single rounding agrees
    with; without a bias the default rounds once."""
    idx = op.inputs[2] if len(op.inputs) > 2 else -1
    return idx >= 0 and b.tensor(idx).dtype in ("int64", "int32")
