"""RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR as ONNX Resize with the matching coordinate
transformation (and, for nearest, rounding).

Resize is a layout source like Conv, so ``sizes`` is written in ONNX's NCHW order.
"""

from __future__ import annotations

import numpy as np

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator


def _coordinate_mode(op: Operator) -> str:
    # TFLite: align_corners -> in = out * (in - 1) / (out - 1); half_pixel_centers ->
    # in = (out + 0.5) * in / out - 0.5 clamped at 0; neither -> in = out * in / out.
    if op.options.get("align_corners", False):
        return "align_corners"
    if op.options.get("half_pixel_centers", False):
        return "half_pixel"
    return "asymmetric"


def _nearest_mode(op: Operator) -> dict:
    # TFLite: align_corners -> in = round(out * (in - 1) / (out - 1)) (half away from zero);
    # half_pixel_centers -> in = floor((out + 0.5) * in / out), which is half_pixel's
    # (out + 0.5) * in / out - 0.5 rounded half up (Resize-11's tf_half_pixel_for_nn is gone
    # from the spec since opset 13); neither -> floor(out * in / out)
    if op.options.get("align_corners", False):
        return {
            "coordinate_transformation_mode": "align_corners",
            "nearest_mode": "round_prefer_ceil",
        }
    if op.options.get("half_pixel_centers", False):
        return {"coordinate_transformation_mode": "half_pixel", "nearest_mode": "round_prefer_ceil"}
    return {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}


def resize_bilinear(b: GraphBuilder, op: Operator) -> None:
    """Integer kernel (int16 always, int8 under --bit-exact): its record's ``kernel``."""
    _resize(b, op, {"mode": "linear", "coordinate_transformation_mode": _coordinate_mode(op)})


def resize_nearest_neighbor(b: GraphBuilder, op: Operator) -> None:
    _resize(b, op, {"mode": "nearest", **_nearest_mode(op)})


def _resize(b: GraphBuilder, op: Operator, attrs: dict) -> None:
    x = b.raw_input(op.inputs[0], op.outputs[0])  # both modes interpolate raw integers
    in_shape = b.tensor(op.inputs[0]).shape_signature
    out_hw = [int(v) for v in b.int_constant(op.inputs[1], op.where)]
    empty = ""
    if any(d < 0 for d in in_shape[1:3]):
        raise ConversionError("dynamic input height/width is not supported", op.where)
    if all(d > 0 for d in (in_shape[0], in_shape[-1])):
        sizes = np.array([in_shape[0], in_shape[-1], *out_hw], np.int64)
        y = b.emit("Resize", [x, empty, empty, b.const(sizes, "resize_sizes")], **attrs)[0]
    else:  # dynamic batch or channels: scales, exact as TFLite's output sizes are integers
        scales = np.array([1, 1, out_hw[0] / in_shape[1], out_hw[1] / in_shape[2]], np.float32)
        y = b.emit("Resize", [x, empty, b.const(scales, "resize_scales")], **attrs)[0]
    b.set_output(op.outputs[0], y)
