"""What a float converter and its operator's integer kernels both derive from the operator: the
weight permutations, windows, groups, reshapes and axes. Shared here so that the record's
kernel (``ops.dispatch``) runs on its own, never called from inside the converter.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator

OHWI_TO_OIHW = (0, 3, 1, 2)
# depthwise [1, H, W, C*M] -> [C*M, 1, H, W]: ONNX's grouped form with group = C
DEPTHWISE_TO_GROUPED = (3, 0, 1, 2)
# weights [O, kh, kw, I] -> ONNX ConvTranspose's [I, O, kh, kw]
OHWI_TO_IOHW = (3, 0, 1, 2)

ConvLayout = tuple[tuple[int, ...], Sequence[int], int]


def conv_2d_layout(b: GraphBuilder, op: Operator) -> ConvLayout:
    """CONV_2D's (weight permutation, kernel size, groups)."""
    weights = b.tensor(op.inputs[1])
    groups = b.tensor(op.inputs[0]).shape[-1] // weights.shape[-1]
    return OHWI_TO_OIHW, weights.shape[1:3], groups


def depthwise_layout(b: GraphBuilder, op: Operator) -> ConvLayout:
    """DEPTHWISE_CONV_2D's (weight permutation, kernel size, groups = input channels)."""
    weights = b.tensor(op.inputs[1])
    return DEPTHWISE_TO_GROUPED, weights.shape[1:3], b.tensor(op.inputs[0]).shape[-1]


def check_conv_filter(b: GraphBuilder, op: Operator) -> None:
    """Refuse the filters no convolution kernel computes (the float and hybrid ones alike)."""
    if b.tensor(op.inputs[1]).dtype == "int2":
        # measured: LiteRT 2.3's reference, builtin and XNNPACK conv kernels all return
        # values near 1e37 for ai-edge-quantizer's int2 filters: no reference to agree with
        raise ConversionError(
            "int2 filters: LiteRT's convolution kernels do not compute them (outputs ~1e37)",
            op.where,
        )
    q = b.tensor(op.inputs[1]).quantization
    if q is not None and q.block_size:
        # no blockwise conv to measure (ai-edge-quantizer 0.10 leaves convolutions per
        # channel): its kernel's on-the-fly quantization is unknown, so no exact form
        raise ConversionError("blockwise-quantized filters are not supported", op.where)


def transpose_conv_2d_attrs(b: GraphBuilder, op: Operator) -> dict:
    """TRANSPOSE_CONV(output_shape, weights, input[, bias])'s ConvTranspose attributes."""
    return transpose_conv_attrs(
        b.tensor(op.inputs[2]).shape[1:3],
        b.tensor(op.outputs[0]).shape[1:3],
        list(b.tensor(op.inputs[1]).shape[1:3]),
        [op.options.get("stride_h", 1), op.options.get("stride_w", 1)],
        op.options.get("padding", "SAME"),
    )


def transpose_conv_attrs(
    in_sizes: Sequence[int],
    out_sizes: Sequence[int],
    kernel: list[int],
    strides: list[int],
    padding: str,
) -> dict:
    """ConvTranspose attributes reproducing TFLite's transposed convolution placement.

    Input pixel i lands at ``i * stride - pad + k`` for the forward conv's padding computed
    from the output size (SAME: ``max((ceil(out / s) - 1) * s + k - out, 0)``, half of it
    rounded down at the start); whatever of the full ``(in - 1) * s + k`` lies past the
    output is the end pad (negative: ``output_padding``).
    """
    begins, ends, extra = [], [], []
    for size, out, k, s in zip(in_sizes, out_sizes, kernel, strides, strict=True):
        total = max((-(-out // s) - 1) * s + k - out, 0) if padding == "SAME" else 0
        begin = total // 2
        end = (size - 1) * s + k - begin - out
        begins.append(begin)
        ends.append(max(end, 0))
        extra.append(max(-end, 0))
    attrs = {"kernel_shape": kernel, "strides": strides, "pads": begins + ends}
    if any(extra):
        attrs["output_padding"] = extra
    return attrs


def check_fc_weights(op: Operator) -> None:
    """FULLY_CONNECTED's weights must be in the default (not shuffled) format."""
    if op.options.get("weights_format", "DEFAULT") != "DEFAULT":
        fmt = op.options["weights_format"]
        raise ConversionError(f"weights_format {fmt} unsupported", op.where)


def flatten_fc(b: GraphBuilder, op: Operator, x: str) -> str:
    """FULLY_CONNECTED's input ``x`` as [-1, depth] unless 2-D already or ``keep_num_dims``."""
    depth = b.tensor(op.inputs[1]).shape[-1]
    if len(b.tensor(op.inputs[0]).shape) != 2 and not op.options.get("keep_num_dims", False):
        x = b.emit("Reshape", [x, b.const(np.array([-1, depth], np.int64), "fc_shape")])[0]
    return x


def fc_rows(b: GraphBuilder, op: Operator) -> tuple[str, int]:
    """FULLY_CONNECTED's input as rows (``flatten_fc``, its weights checked by
    ``check_fc_weights``) and its bias's index, -1 without one."""
    check_fc_weights(op)
    bias_idx = op.inputs[2] if len(op.inputs) > 2 else -1
    return flatten_fc(b, op, b.input(op.inputs[0])), bias_idx


def pool_window(op: Operator) -> list[int]:
    """A 2-D pool's [filter height, filter width]."""
    return [op.options["filter_height"], op.options["filter_width"]]


def reduction_axes(b: GraphBuilder, op: Operator) -> list[int]:
    """A reduction's constant axes (input 1), non-negative, sorted, in TFLite's order."""
    rank = len(b.tensor(op.inputs[0]).shape)
    return sorted({int(a) % rank for a in b.int_constant(op.inputs[1], op.where).reshape(-1)})


def keep_dims(op: Operator) -> int:
    """A reduction's ``keep_dims`` option as ONNX's ``keepdims``."""
    return int(bool(op.options.get("keep_dims", False)))
