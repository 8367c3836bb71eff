"""Hybrid (dynamic-range) CONV_2D and DEPTHWISE_CONV_2D: float input, constant int8 filters.

The builtin reference kernels quantize each batch element (all of H x W x C at once) on the
fly (``ops.hybrid.quant``) and convolve the integers, padding with the zero point's real 0:

- CONV_2D with per-tensor filters (or per-channel ones whose scales are all equal: the kernel
  tests them) is EvalHybrid: symmetric input, y = float(acc) * (factor * filter scale);
- CONV_2D with differing per-channel scales, or grouped, is EvalHybridPerChannel: asymmetric
  input, acc = sum w * (q - zp), y = (float(acc) * channel scale) * factor
  (reference_ops::HybridConvPerChannel; the builtin optimized kernel multiplies
  float(acc) * (factor * channel scale) instead, a last-bit difference on ~1 output in 7);
- DEPTHWISE_CONV_2D is always per channel: asymmetric input, y = float(acc) * (channel scale
  * factor) (reference_integer_ops::DepthwiseConvHybridPerChannel);

then + bias and the fused activation, all float32. The integer convolution runs as a float32
Conv on q - zp, exact while every output's bound stays under 2^24.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.geometry import check_conv_filter, conv_2d_layout, depthwise_layout
from tflite2qonnx.ops.hybrid.quant import quantize_rows, weight_integers
from tflite2qonnx.ops.padding import spatial_attrs

_EXACT_F32 = 2.0**24

# constant weights the hybrid kernels take; blockwise ones go through the float layer
_WEIGHTS = ("int8", "int4", "int2")


def is_hybrid_conv(b: GraphBuilder, op: Operator) -> bool:
    """Float input with int8 filters (or int4 / int2: the kernels unpack them to int8 and
    run the same hybrid path; measured exact on ai-edge-quantizer's dynamic_wi4c)."""
    w = b.tensor(op.inputs[1])
    blockwise = w.quantization is not None and w.quantization.block_size > 0
    return b.tensor(op.inputs[0]).dtype == "float32" and w.dtype in _WEIGHTS and not blockwise


def conv_2d(b: GraphBuilder, op: Operator) -> None:
    """Hybrid CONV_2D (its record's ``hybrid`` kernel, where ``is_hybrid_conv``)."""
    check_conv_filter(b, op)
    hybrid_conv(b, op, *conv_2d_layout(b, op))


def depthwise_conv_2d(b: GraphBuilder, op: Operator) -> None:
    """Hybrid DEPTHWISE_CONV_2D (its record's ``hybrid`` kernel, where ``is_hybrid_conv``)."""
    check_conv_filter(b, op)
    hybrid_conv(b, op, *depthwise_layout(b, op))


def _filter_scales(b: GraphBuilder, op: Operator, out_channels: int) -> np.ndarray:
    idx = op.inputs[1]
    t = b.tensor(idx)
    q = t.quantization
    where = f"{op.where}, tensor {idx} '{t.name}'"
    if t.data is None or q is None or len(q.scale) == 0 or np.any(q.zero_point != 0):
        raise ConversionError(f"hybrid {op.name} needs constant symmetric int8 filters", where)
    if len(q.scale) not in (1, out_channels):
        raise ConversionError(
            f"hybrid {op.name}: {len(q.scale)} filter scales for {out_channels} channels", where
        )
    return np.asarray(q.scale, np.float32)


def hybrid_conv(
    b: GraphBuilder, op: Operator, perm: Sequence[int], kernel: Sequence[int], groups: int
) -> None:
    """``perm``: TFLite's filter layout to ONNX's [O, I / groups, kh, kw]."""
    x_idx, w_idx = op.inputs[0], op.inputs[1]
    bias_idx = op.inputs[2] if len(op.inputs) > 2 else -1
    depthwise = op.name == "DEPTHWISE_CONV_2D"
    data = b.tensor(w_idx).data
    if data is None or np.ndim(data) != len(perm):
        raise ConversionError(
            f"hybrid {op.name} needs a constant rank-{len(perm)} filter",
            f"{op.where}, tensor {w_idx} '{b.tensor(w_idx).name}'",
        )
    raw = np.asarray(data, np.float64).transpose(perm)  # [O, I/g, kh, kw]
    scales = _filter_scales(b, op, raw.shape[0])
    per_channel = depthwise or groups != 1 or np.unique(scales).size > 1
    if per_channel and scales.size != raw.shape[0]:
        raise ConversionError(
            f"hybrid {op.name} takes the per-channel kernel, which reads one filter scale per "
            f"output channel; the filter has {scales.size}",
            op.where,
        )
    if bias_idx >= 0 and b.tensor(bias_idx).dtype != "float32":
        raise ConversionError(f"hybrid {op.name} needs a float bias", op.where)
    row_shape = tuple(b.tensor(x_idx).shape_signature[1:])
    if any(d < 0 for d in row_shape):
        raise ConversionError(
            f"hybrid {op.name} with a dynamic input shape {list(row_shape)}: the kernel's input "
            "quantizer rounds by position in each flattened batch element",
            op.where,
        )
    bound = (255.0 if per_channel else 127.0) * np.abs(raw).reshape(raw.shape[0], -1).sum(1).max()
    if bound >= _EXACT_F32:
        raise ConversionError(
            f"hybrid {op.name}: integer sums up to {bound:.0f} are not exact in float32", op.where
        )
    q_x, factor = quantize_rows(b, b.input(x_idx), row_shape, asymmetric=per_channel)
    attrs = spatial_attrs(b, op, kernel)
    w_int = weight_integers(b, w_idx, perm)
    acc = b.emit("Conv", [q_x, w_int], group=groups, kernel_shape=list(kernel), **attrs)[0]
    if not per_channel:
        scale = b.emit("Mul", [factor, b.const(np.float32(scales[0]), "filter_scale")])[0]
        y = b.emit("Mul", [acc, scale])[0]
    elif depthwise:
        scale = b.emit("Mul", [b.const(scales, "channel_scale"), factor])[0]
        y = b.emit("Mul", [acc, scale])[0]
    else:
        y = b.emit("Mul", [acc, b.const(scales, "channel_scale")])[0]
        y = b.emit("Mul", [y, factor])[0]
    if bias_idx >= 0:
        y = b.emit("Add", [y, b.input(bias_idx)])[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))
