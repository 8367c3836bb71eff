"""CONV_3D_TRANSPOSE(output_shape, weights [kd, kh, kw, O, I], input NDHWC[, bias]) as
ConvTranspose, padded as TRANSPOSE_CONV is (``ops.conv.transpose_conv``) in three dims."""

from __future__ import annotations

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation

DHWOI_TO_IODHW = (4, 3, 0, 1, 2)


def conv_3d_transpose(b: GraphBuilder, op: Operator) -> None:
    w_idx, x_idx = op.inputs[1], op.inputs[2]
    o = op.options
    if any(o.get(f"dilation_{a}_factor", 1) != 1 for a in "dhw"):
        raise ConversionError("CONV_3D_TRANSPOSE with dilation is not converted", op.where)
    if b.tensor(x_idx).quant is not None:
        raise ConversionError("CONV_3D_TRANSPOSE has a float kernel only", op.where)
    out_shape = b.tensor(op.outputs[0]).shape
    in_dhw = b.tensor(x_idx).shape[1:4]
    kernel = list(b.tensor(w_idx).shape[:3])
    strides = [o.get("stride_d", 1), o.get("stride_h", 1), o.get("stride_w", 1)]
    begins, ends, extra = [], [], []
    for size, out, k, s in zip(in_dhw, out_shape[1:4], kernel, strides, strict=True):
        total = 0
        if o.get("padding", "SAME") == "SAME":
            total = max((-(-out // s) - 1) * s + k - out, 0)
        begin = total // 2
        end = (size - 1) * s + k - begin - out
        begins.append(begin)
        ends.append(max(end, 0))
        extra.append(max(-end, 0))
    attrs = {"kernel_shape": kernel, "strides": strides, "pads": begins + ends}
    if any(extra):
        attrs["output_padding"] = extra
    inputs = [b.input(x_idx), b.input(w_idx, perm=DHWOI_TO_IODHW)]
    if len(op.inputs) > 3 and op.inputs[3] >= 0:
        inputs.append(b.input(op.inputs[3]))
    y = b.emit("ConvTranspose", inputs, **attrs)[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))
