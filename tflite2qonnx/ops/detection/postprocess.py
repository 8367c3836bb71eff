"""TFLite_Detection_PostProcess (the SSD post-processing custom op) in standard ONNX ops.

Follows the kernel, tensorflow/lite/kernels/detection_postprocess.cc:

- Decoding: each anchor's (y, x, h, w) encoding becomes a corner box, in double as the kernel
  computes it: ``yc = y / y_scale * anchor_h + anchor_y``, ``half_h = 0.5 * exp(h / h_scale)
  * anchor_h``, each rounded to float, then ``ymin = yc - half_h`` ... in float.
- Scores are used as they are (no sigmoid); a background column is dropped when the scores
  have ``num_classes + 1`` columns.
- NMS (per class for ``use_regular_nms``, else once on each anchor's best class score): the
  candidates are the scores ``>= nms_score_threshold``, taken in decreasing score order, the
  lower anchor first on ties (the kernel's stable sort); a candidate is kept unless its IoU
  with a kept box is ``> nms_iou_threshold`` (IoU 0 when either area is ``<= 0``). ONNX
  NonMaxSuppression leaves ties, the score comparison and the output order to the runtime,
  so the greedy loop is written out instead, unrolled over its static iteration count:
  each step keeps the first of the best remaining scores (ArgMax over the candidates that
  reach the maximum) and drops the candidates it overlaps.
- Outputs: boxes [1, D, 4], classes [1, D], scores [1, D], num_detections [1], with
  D = max_detections * max_classes_per_detection. The kernel leaves the slots past its
  detections unwritten (whatever the buffer held), except the first max_detections of
  regular NMS, which it zeroes: all are zeros here.

Equal scores: the kernel orders the NMS candidates with a stable sort (lower anchor first),
and its merge of the classes' detections (use_regular_nms) keeps lower class, then earlier
detection first (measured on ai-edge-litert with heavily tied scores): as here. An anchor's
best class is the first maximum (ArgMaxVector), as ONNX ArgMax's. With fast NMS and
max_classes_per_detection > 1 the kernel ranks each anchor's classes with std::partial_sort,
whose order among equal scores is the C++ library's heap order (and uint8 scores tie often):
that is refused.
Boxes with ymin > ymax (a negative anchor size) make the kernel fail; here they only never
overlap.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from flatbuffers import flexbuffers
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator, Shape
from tflite2qonnx.ops.common import reduce_axes

_F32 = np.float32
# the kernel's default for detections_per_class (kNumDetectionsPerClass)
_DETECTIONS_PER_CLASS = 100


@dataclasses.dataclass(frozen=True)
class _Options:
    max_detections: int
    max_classes_per_detection: int
    detections_per_class: int
    use_regular_nms: bool
    score_threshold: float  # float32 values, as the kernel reads them (AsFloat)
    iou_threshold: float
    num_classes: int
    scales: tuple[float, float, float, float]  # y, x, h, w


def _options(op: Operator) -> _Options:
    raw = op.custom_options
    if not raw:
        raise ConversionError("custom options (a flexbuffer map) are missing", op.where)
    try:
        m: Any = flexbuffers.Loads(raw)
    except Exception as exc:  # malformed buffers raise anything from IndexError to ValueError
        raise ConversionError(f"custom options are not a flexbuffer: {exc}", op.where) from exc
    if not isinstance(m, dict):
        raise ConversionError("custom options are not a flexbuffer map", op.where)

    def number(key: str, default=None) -> float:
        value = m.get(key, default)
        if value is None or isinstance(value, bool) or not isinstance(value, int | float):
            raise ConversionError(f"option '{key}' must be a number, got {value!r}", op.where)
        return value

    def f32(key: str) -> float:
        return float(_F32(number(key)))

    opts = _Options(
        max_detections=int(number("max_detections")),
        max_classes_per_detection=int(number("max_classes_per_detection")),
        detections_per_class=int(number("detections_per_class", _DETECTIONS_PER_CLASS)),
        use_regular_nms=bool(m.get("use_regular_nms", False)),
        score_threshold=f32("nms_score_threshold"),
        iou_threshold=f32("nms_iou_threshold"),
        num_classes=int(number("num_classes")),
        scales=(f32("y_scale"), f32("x_scale"), f32("h_scale"), f32("w_scale")),
    )
    problems = []
    if opts.max_detections < 0:
        problems.append("max_detections must be >= 0")
    if opts.use_regular_nms and opts.detections_per_class <= 0:
        problems.append("detections_per_class must be > 0")
    if not opts.use_regular_nms and opts.max_classes_per_detection <= 0:
        problems.append("max_classes_per_detection must be > 0")
    if not 0.0 < opts.iou_threshold <= 1.0:
        problems.append("nms_iou_threshold must be in (0, 1]")
    if not np.isfinite(opts.score_threshold):
        problems.append("nms_score_threshold must be finite")
    if opts.num_classes <= 0:
        problems.append("num_classes must be > 0")
    if opts.max_detections * max(opts.max_classes_per_detection, 1) >= 2**31:
        problems.append("max_detections * max_classes_per_detection overflows the kernel's int")
    if problems:
        raise ConversionError("; ".join(problems), op.where)
    return opts


def _static_shape(b: GraphBuilder, idx: int, op: Operator, what: str) -> tuple[int, ...]:
    t = b.tensor(idx)
    if t.dtype not in ("float32", "uint8"):
        raise ConversionError(f"{what} must be float32 or uint8, not {t.dtype}", op.where)
    if t.dtype == "uint8" and (t.quantization is None or t.quantization.per_axis):
        raise ConversionError(f"uint8 {what} needs one scale and zero point", op.where)
    if any(d < 0 for d in t.shape_signature):
        raise ConversionError(f"{what} needs a static shape", op.where)
    return tuple(t.shape)


def _declare_output(b: GraphBuilder, idx: int, shape: tuple[int, ...]) -> None:
    """The kernel sets its outputs' shapes and float32 type at Prepare (files leave the
    shapes empty); the tensor is recorded the way the interpreter resizes it."""
    t = b.tensor(idx)
    b.subgraph.tensors[idx] = dataclasses.replace(
        t,
        shape=Shape(shape, t.shape.where),
        shape_signature=Shape(shape, t.shape.where),
        dtype="float32",
        quantization=None,
    )


class _Emitter:
    """Shorthands for the many small nodes of the post-processing graph."""

    def __init__(self, b: GraphBuilder):
        self.b = b
        self._consts: dict[tuple, str] = {}

    def __call__(self, op_type: str, *inputs: str, **attrs) -> str:
        return self.b.emit(op_type, list(inputs), **attrs)[0]

    def const(self, value, dtype, hint: str = "c") -> str:
        array = np.asarray(value, dtype)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self._consts:
            self._consts[key] = self.b.const(array, hint)
        return self._consts[key]

    def i64(self, value) -> str:
        return self.const(value, np.int64, "i")

    def f32(self, value) -> str:
        return self.const(value, _F32, "f")

    def slice(self, x: str, start: int, end: int, axis: int) -> str:
        return self("Slice", x, self.i64([start]), self.i64([end]), self.i64([axis]))

    def reshape(self, x: str, shape) -> str:
        return self("Reshape", x, self.i64(list(shape)))

    def where(self, cond: str, x: str, y: str) -> str:
        return self("Where", cond, x, y)


def _decode(e: _Emitter, enc: str, anchors: str, n: int, scales) -> str:
    """[N, 4] corner boxes (ymin, xmin, ymax, xmax) from encodings and anchors ([N, 4])."""
    enc_d = e("Cast", enc, to=TensorProto.DOUBLE)
    anc_d = e("Cast", anchors, to=TensorProto.DOUBLE)
    col = [e.slice(enc_d, k, k + 1, 1) for k in range(4)]  # y, x, h, w: [N, 1]
    a = [e.slice(anc_d, k, k + 1, 1) for k in range(4)]  # anchor y, x, h, w

    def scaled(k: int) -> str:
        return e("Div", col[k], e.const(scales[k], np.float64, "scale"))

    def to_float(x: str) -> str:
        return e("Cast", x, to=TensorProto.FLOAT)

    yc = to_float(e("Add", e("Mul", scaled(0), a[2]), a[0]))
    xc = to_float(e("Add", e("Mul", scaled(1), a[3]), a[1]))
    half = e.const(0.5, np.float64, "half")
    half_h = to_float(e("Mul", e("Mul", half, e("Exp", scaled(2))), a[2]))
    half_w = to_float(e("Mul", e("Mul", half, e("Exp", scaled(3))), a[3]))
    corners = [e("Sub", yc, half_h), e("Sub", xc, half_w), e("Add", yc, half_h)]
    corners.append(e("Add", xc, half_w))
    return e("Concat", *corners, axis=1)


@dataclasses.dataclass
class _Selection:
    """The greedy NMS result, one row per score row: [R, T] each."""

    index: str  # int64 anchor index of each step's pick (0 where invalid)
    score: str  # its score
    valid: str  # bool: the step picked something


def _greedy_nms(
    e: _Emitter, boxes: str, scores: str, rows: int, n: int, steps: int, o: _Options
) -> _Selection:
    """TFLite's single-class NMS on each of the ``rows`` rows of ``scores`` [R, N] at once."""
    b = e.b
    coords = [e.reshape(e.slice(boxes, k, k + 1, 1), [1, n]) for k in range(4)]
    ymin, xmin, ymax, xmax = coords
    area = e("Mul", e("Sub", ymax, ymin), e("Sub", xmax, xmin))  # [1, N]
    zero = e.f32(0.0)
    positive = e("Greater", area, zero)
    flat_coords = [e.reshape(c, [n]) for c in (*coords, area)]
    flat_positive = e.reshape(positive, [n])
    positions = e.i64(np.arange(n).reshape(1, n))
    neg_inf = e.f32(-np.inf)
    threshold = e.f32(o.score_threshold)
    iou_threshold = e.f32(o.iou_threshold)
    active = e("GreaterOrEqual", scores, threshold)
    picks, best_scores, valids = [], [], []
    for _ in range(steps):
        best = reduce_axes(b, "ReduceMax", e.where(active, scores, neg_inf), [1], 1)  # [R, 1]
        valid = e("GreaterOrEqual", best, threshold)
        first = e("And", active, e("Equal", scores, best))
        pick = e("ArgMax", e("Cast", first, to=TensorProto.FLOAT), axis=1, keepdims=1)
        sy0, sx0, sy1, sx1, sarea = (e("Gather", c, pick, axis=0) for c in flat_coords)
        inter_h = e("Max", e("Sub", e("Min", sy1, ymax), e("Max", sy0, ymin)), zero)
        inter_w = e("Max", e("Sub", e("Min", sx1, xmax), e("Max", sx0, xmin)), zero)
        inter = e("Mul", inter_h, inter_w)
        iou = e("Div", inter, e("Sub", e("Add", sarea, area), inter))
        both = e("And", e("Gather", flat_positive, pick, axis=0), positive)
        overlaps = e("And", e("Greater", iou, iou_threshold), both)
        dropped = e("Or", overlaps, e("Equal", positions, pick))
        active = e("And", active, e("Not", dropped))
        picks.append(pick)
        best_scores.append(best)
        valids.append(valid)

    def cat(xs: list[str]) -> str:
        return xs[0] if len(xs) == 1 else e("Concat", *xs, axis=1)

    return _Selection(cat(picks), cat(best_scores), cat(valids))


def _outputs(
    b: GraphBuilder, op: Operator, e: _Emitter, rows: list, n_rows: int, o: _Options
) -> None:
    """Write the four outputs from the first ``n_rows`` detection slots (boxes [S, 4], classes
    [S], scores [S]) and the float count [1]; the slots after them are zeros."""
    total = o.max_detections * o.max_classes_per_detection
    outs = []
    for value, tail in zip(rows[:3], ([4], [], []), strict=True):
        if total > n_rows:  # zeros made at run time: max_detections may be far above N
            pad = e("ConstantOfShape", e.i64([total - n_rows, *tail]))
            value = pad if n_rows == 0 else e("Concat", value, pad, axis=0)
        outs.append(e.reshape(value, [1, total, *tail]))
    shapes = ([1, total, 4], [1, total], [1, total], [1])
    for idx, value, shape in zip(op.outputs, [*outs, rows[3]], shapes, strict=True):
        _declare_output(b, idx, tuple(shape))
        b.set_output(idx, value)


def _gather_rows(e: _Emitter, x: str, index: str) -> str:
    return e("Gather", x, index, axis=0)


def _fast(b, op, e, boxes, class_scores, n, c, o: _Options) -> None:
    """One NMS over each anchor's best score; each kept anchor reports its best class."""
    k = min(o.max_classes_per_detection, c)
    if k > 1:
        raise ConversionError(
            f"fast NMS with max_classes_per_detection = {o.max_classes_per_detection}: the "
            "kernel ranks an anchor's classes with std::partial_sort, whose order among equal "
            "scores is the C++ library's heap order, not a stable one; only 1 is converted",
            op.where,
        )
    best = reduce_axes(b, "ReduceMax", class_scores, [1], 0)  # [N]
    top_classes = e("ArgMax", class_scores, axis=1, keepdims=1)  # [N, 1], the first maximum
    top_scores = e.reshape(best, [n, 1])
    steps = min(o.max_detections, n)
    if steps == 0:
        return _outputs(b, op, e, [None, None, None, e.f32([0.0])], 0, o)
    sel = _greedy_nms(e, boxes, e.reshape(best, [1, n]), 1, n, steps, o)
    index = e.reshape(sel.index, [steps])
    valid = e.reshape(sel.valid, [steps, 1])
    zero = e.f32(0.0)
    picked_boxes = e.where(valid, _gather_rows(e, boxes, index), zero)  # [T, 4]
    picked_classes = e("Cast", _gather_rows(e, top_classes, index), to=TensorProto.FLOAT)
    picked_classes = e.where(valid, picked_classes, zero)  # [T, k]
    picked_scores = e.where(valid, _gather_rows(e, top_scores, index), zero)
    m = o.max_classes_per_detection
    picked_boxes = e("Expand", e.reshape(picked_boxes, [steps, 1, 4]), e.i64([steps, k, 4]))
    if m > k:  # slots the kernel never writes for lack of classes
        picked_boxes = e("Concat", picked_boxes, e.f32(np.zeros([steps, m - k, 4])), axis=1)
        picked_classes = e("Concat", picked_classes, e.f32(np.zeros([steps, m - k])), axis=1)
        picked_scores = e("Concat", picked_scores, e.f32(np.zeros([steps, m - k])), axis=1)
    count = reduce_axes(b, "ReduceSum", e("Cast", valid, to=TensorProto.FLOAT), [0], 0)
    slots = steps * m  # detection t fills slots [t * m, (t + 1) * m)
    rows = [e.reshape(picked_boxes, [slots, 4])]
    rows += [e.reshape(x, [slots]) for x in (picked_classes, picked_scores)]
    _outputs(b, op, e, [*rows, count], slots, o)


def _regular(b, op, e, boxes, class_scores, n, c, o: _Options) -> None:
    """NMS per class (up to detections_per_class each), then the best max_detections."""
    steps = min(o.detections_per_class, n)
    sel = _greedy_nms(e, boxes, e("Transpose", class_scores, perm=[1, 0]), c, n, steps, o)
    flat = c * steps
    keep = min(o.max_detections, flat)
    if keep == 0:
        return _outputs(b, op, e, [None, None, None, e.f32([0.0])], 0, o)
    key = e.reshape(e.where(sel.valid, sel.score, e.f32(-np.inf)), [flat])
    top_scores, position = b.emit("TopK", [key, e.i64([keep])], 2, axis=0, largest=1, sorted=1)
    total = reduce_axes(b, "ReduceSum", e("Cast", sel.valid, to=TensorProto.INT64), [0, 1], 0)
    count = e("Min", total, e.i64(keep))
    row_valid = e.reshape(e("Less", e.i64(np.arange(keep)), count), [keep, 1])
    anchor = _gather_rows(e, e.reshape(sel.index, [flat]), position)
    zero = e.f32(0.0)
    out_boxes = e.where(row_valid, _gather_rows(e, boxes, anchor), zero)  # [K, 4]
    out_classes = e("Cast", e("Div", position, e.i64(steps)), to=TensorProto.FLOAT)
    out_classes = e.where(row_valid, e.reshape(out_classes, [keep, 1]), zero)
    out_scores = e.where(row_valid, e.reshape(top_scores, [keep, 1]), zero)
    # the kernel fills the first max_detections slots, whatever max_classes_per_detection
    rows = [out_boxes, e.reshape(out_classes, [keep]), e.reshape(out_scores, [keep])]
    count = e.reshape(e("Cast", count, to=TensorProto.FLOAT), [1])
    _outputs(b, op, e, [*rows, count], keep, o)


def detection_postprocess(b: GraphBuilder, op: Operator) -> None:
    """TFLite_Detection_PostProcess: decode, NMS, top detections (see the module docstring)."""
    o = _options(op)
    if len(op.inputs) != 3 or len(op.outputs) != 4:
        raise ConversionError("needs 3 inputs and 4 outputs", op.where)
    enc_shape = _static_shape(b, op.inputs[0], op, "box encodings")
    score_shape = _static_shape(b, op.inputs[1], op, "class predictions")
    anchor_shape = _static_shape(b, op.inputs[2], op, "anchors")
    if len(enc_shape) != 3 or len(score_shape) != 3 or len(anchor_shape) != 2:
        raise ConversionError(
            "needs [1, N, 4+] encodings, [1, N, C] scores, [N, 4] anchors", op.where
        )
    n = enc_shape[1]
    if enc_shape[0] != 1 or score_shape[0] != 1:
        raise ConversionError("the kernel takes batch 1 only", op.where)
    if enc_shape[2] < 4 or score_shape[1] != n or anchor_shape != (n, 4):
        raise ConversionError(
            f"shapes {list(enc_shape)}, {list(score_shape)}, {list(anchor_shape)} do not fit "
            "[1, N, 4+], [1, N, C], [N, 4]",
            op.where,
        )
    if b.tensor(op.inputs[0]).dtype != b.tensor(op.inputs[2]).dtype:
        # the kernel reads the anchors with the encodings' type
        raise ConversionError("box encodings and anchors must have one type", op.where)
    offset = score_shape[2] - o.num_classes
    if offset not in (0, 1):
        raise ConversionError(
            f"{score_shape[2]} score columns for num_classes = {o.num_classes}", op.where
        )
    e = _Emitter(b)
    enc = e.reshape(e.slice(b.input(op.inputs[0]), 0, 4, 2), [n, 4])
    boxes = _decode(e, enc, b.input(op.inputs[2]), n, o.scales)
    class_scores = e.slice(
        e.reshape(b.input(op.inputs[1]), [n, score_shape[2]]), offset, score_shape[2], 1
    )
    (_regular if o.use_regular_nms else _fast)(b, op, e, boxes, class_scores, n, o.num_classes, o)
