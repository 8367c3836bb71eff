"""MediaPipe's custom ops (mediapipe/util/tflite/operations): transposed convolution with bias,
max pooling with argmax and max unpooling.

Their custom options are not flexbuffers but raw C structs: TfLiteTransposeConvParams
(padding, stride_width, stride_height) and TfLitePoolParams (padding, stride_width,
stride_height, filter_width, filter_height, activation, computed padding), int32 little-endian;
padding is TfLitePadding (1 SAME, 2 VALID).
"""

from __future__ import annotations

import dataclasses
import struct

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.geometry import OHWI_TO_IOHW

_PADDING = {1: "SAME", 2: "VALID"}
# TfLiteFusedActivation -> ActivationFunctionType names (fused_activation's table)
_ACTIVATION = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH"}


def _params(op: Operator, names: tuple[str, ...]) -> dict[str, int]:
    raw = op.custom_options or b""
    if len(raw) < 4 * len(names):
        raise ConversionError(
            f"custom options of {len(raw)} bytes, expected at least {4 * len(names)} "
            f"({', '.join(names)})",
            op.where,
        )
    params = dict(zip(names, struct.unpack_from(f"<{len(names)}i", raw), strict=True))
    if params["padding"] not in _PADDING:
        raise ConversionError(
            f"padding code {params['padding']} is neither SAME nor VALID", op.where
        )
    if params["stride_width"] < 1 or params["stride_height"] < 1:
        raise ConversionError("strides must be positive", op.where)
    return params


def _hw(b: GraphBuilder, idx: int, op: Operator) -> tuple[int, int]:
    shape = b.tensor(idx).shape_signature
    if len(shape) != 4 or any(d < 0 for d in shape[1:3]):
        raise ConversionError("needs a 4D NHWC tensor with static height and width", op.where)
    return shape[1], shape[2]


def convolution_2d_transpose_bias(b: GraphBuilder, op: Operator) -> None:
    """ConvTranspose + bias. SAME pads ``max(0, k - (in - 1) % s - 1)`` in total, half of it
    (rounded down) at the start; the output is ``s * (in - 1) + k - total`` long."""
    p = _params(op, ("padding", "stride_width", "stride_height"))
    weights = b.tensor(op.inputs[1]).shape
    kernel = [weights[1], weights[2]]
    strides = [p["stride_height"], p["stride_width"]]
    begins, ends = [], []
    for size, k, s in zip(_hw(b, op.inputs[0], op), kernel, strides, strict=True):
        total = max(0, k - (size - 1) % s - 1) if _PADDING[p["padding"]] == "SAME" else 0
        begins.append(total // 2)
        ends.append(total - total // 2)
    inputs = [b.input(op.inputs[0]), b.input(op.inputs[1], perm=OHWI_TO_IOHW)]
    if len(op.inputs) > 2 and op.inputs[2] >= 0:
        inputs.append(b.input(op.inputs[2]))
    y = b.emit("ConvTranspose", inputs, kernel_shape=kernel, strides=strides, pads=begins + ends)[0]
    b.set_output(op.outputs[0], y)


_POOL_PARAMS = (
    "padding",
    "stride_width",
    "stride_height",
    "filter_width",
    "filter_height",
    "activation",
)


def _pool_params(op: Operator) -> dict[str, int]:
    p = _params(op, _POOL_PARAMS)
    if p["activation"] not in _ACTIVATION:
        raise ConversionError(f"activation code {p['activation']} unsupported", op.where)
    return p


def _pool_pad(size: int, out: int, k: int, s: int) -> tuple[int, int]:
    """TFLite's ComputePadding (dilation 1): the start pad; the end takes the rest."""
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2


def _grid(shape: tuple[int, ...], axis: int, scale: int, offset: int) -> np.ndarray:
    """An int64 [1, .., n, .., 1] tensor holding ``k * scale + offset`` along ``axis``."""
    bshape = [1] * len(shape)
    bshape[axis] = shape[axis]
    return (np.arange(shape[axis], dtype=np.int64) * scale + offset).reshape(bshape)


def _ints(b: GraphBuilder, value, hint: str) -> str:
    return b.const(np.asarray(value, np.int64), hint)


def max_pooling_with_argmax_2d(b: GraphBuilder, op: Operator) -> None:
    """MaxPool with Indices; the flat NCHW indices become MediaPipe's window-local ones.

    MediaPipe writes ``dy * filter_width + dx + 0.1`` (a float) for the first maximum of each
    window, as ONNX MaxPool picks the first one too. From the flat index g of an [N, C, H, W]
    tensor, y = (g / W) % H and x = g % W; subtracting each window's origin
    ``out * stride - pad`` gives (dy, dx).
    """
    p = _pool_params(op)
    h, w = _hw(b, op.inputs[0], op)
    out_shape = b.tensor(op.outputs[0]).shape
    kernel = [p["filter_height"], p["filter_width"]]
    strides = [p["stride_height"], p["stride_width"]]
    pad_h = _pool_pad(h, out_shape[1], kernel[0], strides[0])
    pad_w = _pool_pad(w, out_shape[2], kernel[1], strides[1])
    pads = [pad_h[0], pad_w[0], pad_h[1], pad_w[1]]
    x = b.input(op.inputs[0])
    values, flat = b.emit("MaxPool", [x], 2, kernel_shape=kernel, strides=strides, pads=pads)
    y = b.emit("Mod", [b.emit("Div", [flat, _ints(b, w, "width")])[0], _ints(b, h, "height")])[0]
    x_pos = b.emit("Mod", [flat, _ints(b, w, "width")])[0]
    # the window origins, in the indices' source (NHWC) shape
    dy = b.emit("Sub", [y, _ints(b, _grid(out_shape, 1, strides[0], -pad_h[0]), "y0")])[0]
    dx = b.emit("Sub", [x_pos, _ints(b, _grid(out_shape, 2, strides[1], -pad_w[0]), "x0")])[0]
    local = b.emit("Add", [b.emit("Mul", [dy, _ints(b, kernel[1], "filter_w")])[0], dx])[0]
    local = b.emit("Cast", [local], to=TensorProto.FLOAT)[0]
    local = b.emit("Add", [local, b.const(np.array(0.1, np.float32), "tenth")])[0]
    fused = dataclasses.replace(
        op, options={"fused_activation_function": _ACTIVATION[p["activation"]]}
    )
    b.set_output(op.outputs[0], fused_activation(b, fused, values))
    b.set_output(op.outputs[1], local)


def max_unpooling_2d(b: GraphBuilder, op: Operator) -> None:
    """MaxUnpool to ``in * filter``: MediaPipe's window-local indices become flat NCHW ones.

    The value at input (n, iy, ix, c) with index i lands at output row
    ``iy * stride - pad + i // filter_width``, column ``ix * stride - pad + i % filter_width``
    (later writes win, in both). Indices that decode outside the output, which MediaPipe
    skips, are an error for ONNX MaxUnpool; argmax pooling never produces them.
    """
    p = _pool_params(op)
    h, w = _hw(b, op.inputs[0], op)
    in_shape = b.tensor(op.inputs[0]).shape
    n, c = in_shape[0], in_shape[3]
    kernel = [p["filter_height"], p["filter_width"]]
    strides = [p["stride_height"], p["stride_width"]]
    out_h, out_w = h * kernel[0], w * kernel[1]
    pad_h = _pool_pad(out_h, h, kernel[0], strides[0])[0]
    pad_w = _pool_pad(out_w, w, kernel[1], strides[1])[0]
    local = b.emit("Cast", [b.emit("Floor", [b.input(op.inputs[1])])[0]], to=TensorProto.INT64)[0]
    kw = _ints(b, kernel[1], "filter_w")
    dy = b.emit("Div", [local, kw])[0]
    dx = b.emit("Mod", [local, kw])[0]
    oy = b.emit("Add", [dy, _ints(b, _grid(in_shape, 1, strides[0], -pad_h), "y0")])[0]
    ox = b.emit("Add", [dx, _ints(b, _grid(in_shape, 2, strides[1], -pad_w), "x0")])[0]
    # flat = ((n * C + c) * OH + oy) * OW + ox, with n and c as [N,1,1,1] / [1,1,1,C] grids
    plane = _grid(in_shape, 0, c, 0) + _grid(in_shape, 3, 1, 0)
    base = _ints(b, plane * (out_h * out_w), "plane_base")
    rows = b.emit("Mul", [oy, _ints(b, out_w, "out_w")])[0]
    flat = b.emit("Add", [b.emit("Add", [rows, ox])[0], base])[0]
    shape = _ints(b, [n, c, out_h, out_w], "unpool_shape")
    y = b.emit(
        "MaxUnpool",
        [b.input(op.inputs[0]), flat, shape],
        kernel_shape=kernel,
        strides=strides,
    )[0]
    b.set_output(op.outputs[0], y)
