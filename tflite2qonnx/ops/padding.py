"""TFLite SAME / VALID padding as ONNX attributes, explicit wherever the shapes are static."""

from __future__ import annotations

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator


def spatial_attrs(b: GraphBuilder, op: Operator, kernel) -> dict:
    """strides, dilations and pads of a 2D conv or pool (TF puts the odd pad at the end)."""
    strides = [op.options.get("stride_h", 1), op.options.get("stride_w", 1)]
    dilations = [op.options.get("dilation_h_factor", 1), op.options.get("dilation_w_factor", 1)]
    attrs = {"strides": strides}
    if "dilation_h_factor" in op.options:
        attrs["dilations"] = dilations
    padding = op.options.get("padding", "VALID")
    if padding == "VALID":
        attrs["pads"] = [0, 0, 0, 0]
        return attrs
    if padding != "SAME":
        raise ConversionError(f"padding {padding} unsupported", op.where)
    in_hw = b.tensor(op.inputs[0]).shape_signature[1:3]
    if any(d < 0 for d in in_hw):
        attrs["auto_pad"] = "SAME_UPPER"
        return attrs
    begins, ends = [], []
    for size, k, s, d in zip(in_hw, kernel, strides, dilations, strict=True):
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        begins.append(total // 2)
        ends.append(total - total // 2)
    attrs["pads"] = begins + ends
    return attrs
