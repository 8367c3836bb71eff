"""CONV_2D and DEPTHWISE_CONV_2D as ONNX Conv.

Convs are layout sources: they are emitted in ONNX form (OIHW weights, NCHW semantics) while
their activations keep TFLite's NHWC shapes; the layout pass then stores the activations
channels-first around them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.geometry import (
    OHWI_TO_IOHW,
    check_conv_filter,
    conv_2d_layout,
    depthwise_layout,
    transpose_conv_2d_attrs,
)
from tflite2qonnx.ops.nn.kernel_bias import kernel_bias
from tflite2qonnx.ops.padding import spatial_attrs

# what a kernel does to the accumulator's real values before the fused activation
Requantize = Callable[[GraphBuilder, Operator, str], str]

# CONV_3D weights [kd, kh, kw, I, O] -> [O, I, kd, kh, kw]
DHWIO_TO_OIDHW = (4, 3, 0, 1, 2)


def conv_2d(b: GraphBuilder, op: Operator, requantize: Requantize | None = None) -> None:
    """Float CONV_2D; its record's kernels take integer activations and int8 filters (the
    default one passes ``requantize``, ``ops.nn.conv_rounding``)."""
    _conv(b, op, *conv_2d_layout(b, op), requantize)


def depthwise_conv_2d(b: GraphBuilder, op: Operator, requantize: Requantize | None = None) -> None:
    """Float DEPTHWISE_CONV_2D; its record's kernels take integer activations and int8 filters
    (the default one passes ``requantize``, ``ops.nn.conv_rounding``)."""
    _conv(b, op, *depthwise_layout(b, op), requantize)


def _conv(
    b: GraphBuilder, op: Operator, perm, kernel, groups: int, requantize: Requantize | None
) -> None:
    check_conv_filter(b, op)
    inputs = [b.input(op.inputs[0]), b.input(op.inputs[1], perm=perm)]
    if len(op.inputs) > 2 and op.inputs[2] >= 0:
        inputs.append(kernel_bias(b, op, op.inputs[2], op.inputs[1]))
    attrs = spatial_attrs(b, op, kernel)
    y = b.emit("Conv", inputs, group=groups, kernel_shape=list(kernel), **attrs)[0]
    if requantize is not None:  # a kernel's rounding of the accumulator
        y = requantize(b, op, y)
    b.set_output(op.outputs[0], fused_activation(b, op, y))


def transpose_conv(b: GraphBuilder, op: Operator) -> None:
    """TRANSPOSE_CONV(output_shape, weights, input[, bias]) as ConvTranspose; its record's
    kernels take integer activations."""
    w_idx, x_idx = op.inputs[1], op.inputs[2]
    attrs = transpose_conv_2d_attrs(b, op)
    inputs = [b.input(x_idx), b.input(w_idx, perm=OHWI_TO_IOHW)]
    if len(op.inputs) > 3 and op.inputs[3] >= 0:
        inputs.append(b.input(op.inputs[3]))
    y = b.emit("ConvTranspose", inputs, **attrs)[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))


def conv_3d(b: GraphBuilder, op: Operator) -> None:
    """CONV_3D on NDHWC with [kd, kh, kw, I, O] weights; SAME pads like CONV_2D's."""
    w = b.tensor(op.inputs[1]).shape
    kernel = list(w[:3])
    o = op.options
    strides = [o.get("stride_d", 1), o.get("stride_h", 1), o.get("stride_w", 1)]
    dilations = [o.get(f"dilation_{a}_factor", 1) for a in "dhw"]
    in_dhw = b.tensor(op.inputs[0]).shape[1:4]
    begins, ends = [0] * 3, [0] * 3
    if o.get("padding", "VALID") == "SAME":
        for k, (size, kk, s, d) in enumerate(zip(in_dhw, kernel, strides, dilations, strict=True)):
            total = max((-(-size // s) - 1) * s + (kk - 1) * d + 1 - size, 0)
            begins[k], ends[k] = total // 2, total - total // 2
    groups = b.tensor(op.inputs[0]).shape[-1] // w[3]
    inputs = [b.input(op.inputs[0]), b.input(op.inputs[1], perm=DHWIO_TO_OIDHW)]
    if len(op.inputs) > 2 and op.inputs[2] >= 0:
        inputs.append(b.input(op.inputs[2]))
    y = b.emit(
        "Conv",
        inputs,
        kernel_shape=kernel,
        strides=strides,
        dilations=dilations,
        pads=begins + ends,
        group=groups,
    )[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))


def depth_to_space(b: GraphBuilder, op: Operator) -> None:
    """TF's depth_to_space is ONNX's DCR mode (depth read as [block, block, C])."""
    y = b.emit(
        "DepthToSpace",
        [b.raw_input(op.inputs[0], op.outputs[0])],
        blocksize=op.options["block_size"],
        mode="DCR",
    )[0]
    b.set_output(op.outputs[0], y)


def space_to_depth(b: GraphBuilder, op: Operator) -> None:
    x = b.raw_input(op.inputs[0], op.outputs[0])
    y = b.emit("SpaceToDepth", [x], blocksize=op.options["block_size"])[0]
    b.set_output(op.outputs[0], y)


def local_response_normalization(b: GraphBuilder, op: Operator) -> None:
    """x / (bias + alpha * sum of x^2 over 2r + 1 channels)^beta; ONNX LRN divides its alpha
    by the window size, so it gets alpha * size."""
    o = op.options
    size = 2 * int(o.get("radius", 5)) + 1
    y = b.emit(
        "LRN",
        [b.input(op.inputs[0])],
        size=size,
        alpha=float(np.float32(o.get("alpha", 1.0)) * size),
        beta=float(o.get("beta", 0.5)),
        bias=float(o.get("bias", 1.0)),
    )[0]
    b.set_output(op.outputs[0], y)
