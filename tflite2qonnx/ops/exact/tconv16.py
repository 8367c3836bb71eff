"""16x8 TRANSPOSE_CONV (int16 input with zero point 0, per-channel int8 weights, int64 bias) as
reference_integer_ops::TransposeConv computes it for int16: the int64 accumulator of the
scattered products plus the bias, requantized per output channel with the 64-bit
MultiplyByQuantizedMultiplier (multiplier rounded to 16 bits, one rounding).

A single rounding of the real product is within a step of it but moves about one output in
twelve; this runs by default too (any bias or none; an int32 bias selects the kernel's int32
instantiation, a wrapped int32 accumulator and the 32-bit double-rounding multiply:
``int8.finish_accumulator``, ``transpose_conv_bias``). The
int16 input is split into bytes as for CONV_2D (``exact_int16``) so every float32
ConvTranspose sum stays exact.
"""

from __future__ import annotations

from tflite2qonnx.fixed_point import conv_multipliers, grid, integer_weights, offsets
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.exact.int8 import finish_accumulator
from tflite2qonnx.ops.exact.int16 import split_product


def transpose_conv(b: GraphBuilder, op: Operator, perm, attrs: dict) -> None:
    """TRANSPOSE_CONV(output_shape, weights, input[, bias]) on int16 activations."""
    where = op.where
    w_idx, x_idx = op.inputs[1], op.inputs[2]
    g_in, g_out = grid(b, x_idx, where), grid(b, op.outputs[0], where)
    w, w_zp = integer_weights(b, w_idx, perm, where)
    x = offsets(b, x_idx, where)
    acc, bound = split_product(b, "ConvTranspose", x, w, w_idx, w_zp, 1, where, **attrs)
    s_w = b.tensor(w_idx).quantization.scale
    m0, shift = conv_multipliers(g_in.scale, s_w, g_out.scale, False)
    finish_accumulator(
        b, op, acc, bound, m0, shift, w.shape[1], g_out, where, bias_slot=3, single=True
    )


def transpose_conv_bias(b: GraphBuilder, op: Operator) -> bool:
    """Whether ``transpose_conv`` runs by default (its record's ``when``): ``int16.wide_bias``
    for the bias at input 3, and with none the kernel runs too."""
    bias = op.inputs[3] if len(op.inputs) > 3 else -1
    return bias < 0 or b.tensor(bias).dtype in ("int64", "int32")
