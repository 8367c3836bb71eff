"""NON_MAX_SUPPRESSION_V4 / V5 (hard NMS on one class) as ONNX NonMaxSuppression.

TFLite's kernel (reference_ops::NonMaxSuppression) keeps boxes scoring above the threshold,
takes them by descending score and drops one whose IoU with an already selected box is
``>=`` the IoU threshold; ONNX drops it where the IoU is ``>``: the threshold is moved one
float32 step down, which makes the two the same test. The selected indices (and V5's scores)
are zero-padded to max_output_size, as the kernel writes them. Soft-NMS (sigma > 0) re-ranks
decayed scores: no ONNX form, refused.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator


def _scalar(b: GraphBuilder, op: Operator, idx: int, what: str) -> float:
    value = b.constant(idx)
    if value is None or value.size != 1:
        raise ConversionError(f"{what} (input) must be one constant value", op.where)
    return float(value.reshape(-1)[0])


def _i64(b: GraphBuilder, values, hint: str) -> str:
    return b.const(np.asarray(values, np.int64), hint)


def non_max_suppression(b: GraphBuilder, op: Operator) -> None:
    boxes_idx, scores_idx, max_idx, iou_idx, score_idx = (op.inputs[i] for i in range(5))
    v5 = op.name == "NON_MAX_SUPPRESSION_V5"
    if any(b.tensor(i).quant is not None for i in (boxes_idx, scores_idx)):
        raise ConversionError(f"quantized {op.name} is not converted", op.where)
    if v5 and _scalar(b, op, op.inputs[5], "soft_nms_sigma") != 0.0:
        raise ConversionError("soft_nms_sigma > 0 (Soft-NMS) has no ONNX form", op.where)
    iou = _scalar(b, op, iou_idx, "iou_threshold")
    if iou <= 0.0:
        raise ConversionError(f"iou_threshold {iou} <= 0 keeps one box only", op.where)
    # iou >= t  <=>  iou > the float32 below t; above 1 nothing is ever dropped
    iou = 1.0 if iou > 1.0 else float(np.nextafter(np.float32(iou), np.float32(-np.inf)))
    boxes = b.emit("Unsqueeze", [b.input(boxes_idx), _i64(b, [0], "axis")])[0]
    scores = b.emit("Reshape", [b.input(scores_idx), _i64(b, [1, 1, -1], "nms_scores")])[0]
    flat = _i64(b, [1], "one_dim")
    max_out = b.emit("Cast", [b.input(max_idx)], to=TensorProto.INT64)[0]
    max_out = b.emit("Reshape", [max_out, flat])[0]
    score_t = b.emit("Reshape", [b.input(score_idx), flat])[0]
    iou_t = b.const(np.array([iou], np.float32), "iou_threshold")
    selected = b.emit(
        "NonMaxSuppression", [boxes, scores, max_out, iou_t, score_t], center_point_box=0
    )[0]
    indices = b.emit("Gather", [selected, _i64(b, 2, "box_column")], axis=1)[0]  # [n]
    count = b.emit("Shape", [indices])[0]
    pads = b.emit("Concat", [_i64(b, [0], "zero"), b.emit("Sub", [max_out, count])[0]], axis=0)[0]
    padded = b.emit("Pad", [b.emit("Cast", [indices], to=TensorProto.INT32)[0], pads])[0]
    b.set_output(op.outputs[0], padded)
    if v5:
        picked = b.emit("Gather", [b.input(scores_idx), indices], axis=0)[0]
        b.set_output(op.outputs[1], b.emit("Pad", [picked, pads])[0])
    valid = b.emit("Cast", [count], to=TensorProto.INT32)[0]
    valid = b.emit("Reshape", [valid, b.const(np.array([], np.int64), "scalar")])[0]
    b.set_output(op.outputs[-1], valid)
