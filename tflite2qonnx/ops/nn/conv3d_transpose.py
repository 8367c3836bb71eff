"""CONV_3D_TRANSPOSE(output_shape, weights [kd, kh, kw, O, I], input NDHWC[, bias]) as
ConvTranspose, padded as TRANSPOSE_CONV is (``ops.geometry.transpose_conv_attrs``) in three dims."""

from __future__ import annotations

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.geometry import transpose_conv_attrs

DHWOI_TO_IODHW = (4, 3, 0, 1, 2)


def conv_3d_transpose(b: GraphBuilder, op: Operator) -> None:
    w_idx, x_idx = op.inputs[1], op.inputs[2]
    o = op.options
    if any(o.get(f"dilation_{a}_factor", 1) != 1 for a in "dhw"):
        raise ConversionError("CONV_3D_TRANSPOSE with dilation is not converted", op.where)
    if b.tensor(x_idx).quant is not None:
        raise ConversionError("CONV_3D_TRANSPOSE has a float kernel only", op.where)
    attrs = transpose_conv_attrs(
        b.tensor(x_idx).shape[1:4],
        b.tensor(op.outputs[0]).shape[1:4],
        list(b.tensor(w_idx).shape[:3]),
        [o.get("stride_d", 1), o.get("stride_h", 1), o.get("stride_w", 1)],
        o.get("padding", "SAME"),
    )
    inputs = [b.input(x_idx), b.input(w_idx, perm=DHWOI_TO_IODHW)]
    if len(op.inputs) > 3 and op.inputs[3] >= 0:
        inputs.append(b.input(op.inputs[3]))
    y = b.emit("ConvTranspose", inputs, **attrs)[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))
