"""TFLite_Detection_PostProcess against the interpreter (ai-edge-litert), run by onnxruntime.

Generated models hold the post-processing op alone (float encodings and scores as inputs,
constant anchors), so each option and both NMS modes are compared directly; the corpus SSD
(uint8) is compared op alone on the interpreter's own post-processing inputs, and end to
end. The kernel writes only the slots of its detections (fast NMS leaves the others as they
were, uninitialised memory in a fresh interpreter): those slots are compared, the rest must
be zeros here.
"""

from __future__ import annotations

import numpy as np
import pytest
from flatbuffers import flexbuffers
from litert_compare import real_value, reference_interpreter
from tflite_writer import build_model

import tflite2qonnx
from layout import stored_perms
from qonnx_ingest.errors import ConversionError
from qonnx_ingest.verification import run_converted
from support import CORPUS, requires_corpus
from tflite2qonnx.api import convert_subgraph, slice_subgraph
from tflite2qonnx.reader import read_model

N_ANCHORS, N_CLASSES = 40, 5
DEFAULTS = {
    "max_detections": 6,
    "max_classes_per_detection": 1,
    "nms_score_threshold": 0.1,
    "nms_iou_threshold": 0.5,
    "num_classes": N_CLASSES,
    "y_scale": 10.0,
    "x_scale": 10.0,
    "h_scale": 5.0,
    "w_scale": 5.0,
}


def anchors(rng: np.random.Generator, n: int = N_ANCHORS) -> np.ndarray:
    """Anchors (y, x, h, w) crowded in the middle of the image so that many boxes overlap."""
    centre = rng.uniform(0.3, 0.7, (n, 2))
    size = rng.uniform(0.1, 0.4, (n, 2))
    return np.concatenate([centre, size], 1).astype(np.float32)


def postprocess_model(anchor_values: np.ndarray, columns: int, **options) -> bytes:
    """A model of one TFLite_Detection_PostProcess; ``columns`` score columns per anchor."""
    n = anchor_values.shape[0]
    tensors = [
        {"name": "encodings", "shape": [1, n, 4]},
        {"name": "scores", "shape": [1, n, columns]},
        {"name": "anchors", "shape": [n, 4], "data": anchor_values},
        *({"name": name, "shape": []} for name in ("boxes", "classes", "out_scores", "count")),
    ]
    op = {
        "op": "TFLite_Detection_PostProcess",
        "inputs": [0, 1, 2],
        "outputs": [3, 4, 5, 6],
        "custom_options": flexbuffers.Dumps({**DEFAULTS, **options}),
    }
    return build_model(tensors, [op], [0, 1], [3, 4, 5, 6])


def run_both(data: bytes, encodings: np.ndarray, scores: np.ndarray):
    """The four outputs of the interpreter and of the converted model in onnxruntime."""
    it = reference_interpreter(data)
    enc_in, score_in = it.get_input_details()
    it.set_tensor(enc_in["index"], encodings)
    it.set_tensor(score_in["index"], scores)
    it.invoke()
    ref = [it.get_tensor(d["index"]) for d in it.get_output_details()]
    model = tflite2qonnx.convert(data)
    (ours,), runner = run_converted(model, [{"encodings": encodings, "scores": scores}])
    assert runner == "onnxruntime"
    return ref, [ours[o.name] for o in model.graph.output]


def written_slots(ref: list[np.ndarray], per_detection: int, regular: bool) -> np.ndarray:
    """The detection slots the kernel writes: the first max_detections with regular NMS,
    with fast NMS the first slot of each of the num_detections detections."""
    slots = np.arange(ref[1].shape[1])
    if regular:
        return slots < ref[1].shape[1] // per_detection
    return (slots // per_detection < int(ref[3][0])) & (slots % per_detection == 0)


def assert_same_detections(ref, ours, per_detection: int = 1, regular: bool = False) -> None:
    assert [o.shape for o in ours] == [r.shape for r in ref]
    assert ours[3][0] == ref[3][0], "num_detections"
    written = written_slots(ref, per_detection, regular)
    for name, r, o in zip(("boxes", "classes", "scores"), ref, ours, strict=False):
        np.testing.assert_array_equal(o[0][written], r[0][written], err_msg=name)
        assert not np.any(o[0][~written]), f"{name}: slots past the detections are zeros"


def random_inputs(rng: np.random.Generator, columns: int, levels: int | None = None):
    encodings = rng.normal(0.0, 1.0, (1, N_ANCHORS, 4)).astype(np.float32)
    scores = rng.uniform(0.0, 1.0, (1, N_ANCHORS, columns)).astype(np.float32)
    if levels:  # few distinct scores: ties everywhere, as uint8 scores have
        scores = (np.round(scores * levels) / levels).astype(np.float32)
    return encodings, scores


# name: (options, score levels (None: continuous scores), optional score columns)
CASES = {
    "fast": ({}, None),
    "fast_tied_scores": ({}, 4),
    "fast_no_background_column": ({"num_classes": N_CLASSES + 1}, None),
    "fast_strict_iou": ({"nms_iou_threshold": 0.2, "nms_score_threshold": 0.5}, None),
    "fast_more_detections_than_anchors": ({"max_detections": N_ANCHORS + 5}, 3),
    "fast_one_class_three_slots": ({"num_classes": 1, "max_classes_per_detection": 3}, 4, 2),
    "regular": ({"use_regular_nms": True, "detections_per_class": 4, "max_detections": 8}, None),
    "regular_tied_scores": (
        {"use_regular_nms": True, "detections_per_class": 10, "max_detections": 20},
        3,
    ),
    "regular_two_slots_per_detection": (
        {"use_regular_nms": True, "detections_per_class": 3, "max_classes_per_detection": 2},
        4,
    ),
    "regular_iou_one": ({"use_regular_nms": True, "nms_iou_threshold": 1.0}, 2),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_postprocess_alone_matches_interpreter(name: str) -> None:
    options, levels, *columns = CASES[name]
    rng = np.random.default_rng(sorted(CASES).index(name))
    columns = columns[0] if columns else N_CLASSES + 1  # num_classes + a background column
    data = postprocess_model(anchors(rng), columns, **options)
    per_detection = options.get("max_classes_per_detection", 1)
    regular = options.get("use_regular_nms", False)
    for _ in range(6):
        ref, ours = run_both(data, *random_inputs(rng, columns, levels))
        assert ref[3][0] > 0, "the case should detect something"
        assert_same_detections(ref, ours, per_detection, regular)


@pytest.mark.parametrize("regular", [False, True], ids=["fast", "regular"])
def test_equal_scores_keep_the_lower_anchor(regular: bool) -> None:
    """Anchors 1 and 2 overlap (IoU 0.8) with equal scores: both NMS modes keep anchor 1 and
    drop 2; anchor 0 (apart, lower score) comes second. Derived by hand, and the interpreter's."""
    anchor_values = np.array(
        [[0.1, 0.1, 0.1, 0.1], [0.5, 0.5, 0.2, 0.2], [0.5, 0.52, 0.2, 0.2]], np.float32
    )
    data = postprocess_model(anchor_values, 2, num_classes=1, use_regular_nms=regular)
    encodings = np.zeros((1, 3, 4), np.float32)
    scores = np.array([[[0, 0.5], [0, 0.75], [0, 0.75]]], np.float32)
    ref, ours = run_both(data, encodings, scores)
    assert_same_detections(ref, ours, regular=regular)
    assert ours[3][0] == 2
    np.testing.assert_allclose(ours[0][0, :2], [[0.4, 0.4, 0.6, 0.6], [0.05, 0.05, 0.15, 0.15]])
    np.testing.assert_array_equal(ours[2][0, :2], [0.75, 0.5])


def test_box_decoding_uses_the_scales_and_no_sigmoid() -> None:
    """One anchor (y 0.5, x 0.5, h 0.2, w 0.4), encoding (1, -2, ln 4 * 5, 0) with scales
    10, 10, 5, 5: centre (0.52, 0.42), size (0.8, 0.4); the score passes unchanged."""
    data = postprocess_model(np.array([[0.5, 0.5, 0.2, 0.4]], np.float32), 2, num_classes=1)
    encodings = np.array([[[1.0, -2.0, 5 * np.log(4.0), 0.0]]], np.float32)
    scores = np.array([[[0.0, 0.3]]], np.float32)
    ref, ours = run_both(data, encodings, scores)
    assert_same_detections(ref, ours)
    np.testing.assert_allclose(ours[0][0, 0], [0.12, 0.22, 0.92, 0.62], rtol=1e-6)
    assert ours[2][0, 0] == np.float32(0.3)


def test_nothing_above_the_score_threshold_gives_zero_detections() -> None:
    rng = np.random.default_rng(5)
    data = postprocess_model(anchors(rng), N_CLASSES + 1, nms_score_threshold=0.9)
    encodings, scores = random_inputs(rng, N_CLASSES + 1)
    ref, ours = run_both(data, encodings, scores * np.float32(0.5))
    assert ref[3][0] == ours[3][0] == 0
    assert not any(np.any(o) for o in ours)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"max_classes_per_detection": 3}, "partial_sort"),
        ({"nms_iou_threshold": 0.0}, "nms_iou_threshold"),
        ({"num_classes": N_CLASSES - 1}, "score columns"),
    ],
    ids=["fast_several_classes", "iou_zero", "two_background_columns"],
)
def test_refused_options_name_the_reason(options: dict, message: str) -> None:
    data = postprocess_model(anchors(np.random.default_rng(0)), N_CLASSES + 1, **options)
    with pytest.raises(ConversionError, match=message) as err:
        tflite2qonnx.convert(data)
    assert "TFLite_Detection_PostProcess" in str(err.value)


# ---------------------------------------------------------------------- the corpus SSD
SSD = CORPUS / "tflite" / "tfexamples__ssd_mobilenet_v1_coco_quant_detect.tflite"


def ssd_images(n: int, seed: int = 0):
    """Uniform noise and blocky images (large flat patches, closer to a photo's statistics)."""
    rng = np.random.default_rng(seed)
    for k in range(n):
        if k % 2 == 0:
            yield rng.integers(0, 256, (1, 300, 300, 3)).astype(np.uint8)
        else:
            blocks = rng.integers(0, 256, (1, 10, 10, 3))
            yield np.kron(blocks, np.ones((1, 30, 30, 1))).astype(np.uint8)


@requires_corpus
def test_ssd_postprocess_is_exact_on_the_interpreters_own_inputs() -> None:
    """The uint8 post-processing op alone, fed the interpreter's encodings and scores."""
    subgraph = read_model(SSD).subgraphs[0]
    piece = slice_subgraph(subgraph, [len(subgraph.operators) - 1])
    model = convert_subgraph(piece, keep_io_layout=True)
    it = reference_interpreter(SSD, preserve_all=True)
    details = it.get_tensor_details()
    (image,) = it.get_input_details()
    for x in ssd_images(6):
        it.set_tensor(image["index"], x)
        it.invoke()
        feeds = {
            details[i]["name"]: real_value(it.get_tensor(i), details[i]["quantization"])
            for i in piece.inputs
        }
        (ours,), runner = run_converted(model, [feeds])
        assert runner.startswith("onnxruntime")
        ref = [it.get_tensor(i) for i in piece.outputs]
        assert_same_detections(ref, [ours[details[i]["name"]] for i in piece.outputs])


@requires_corpus
def test_ssd_end_to_end_runs_in_onnxruntime_at_xnnpack_agreement() -> None:
    """The whole model through the QCDQ lowering: outputs in TFLite's order and shapes, and
    the post-processing inputs (encodings, scores) no further from the builtin kernels, in
    steps, than XNNPACK's (the op itself is exact on them, test above)."""
    model = tflite2qonnx.convert(SSD)
    assert [o.name for o in model.graph.output] == [
        "TFLite_Detection_PostProcess",
        *(f"TFLite_Detection_PostProcess:{k}" for k in range(1, 4)),
    ]
    dims = [[d.dim_value for d in o.type.tensor_type.shape.dim] for o in model.graph.output]
    assert dims == [[1, 10, 4], [1, 10], [1, 10], [1]]
    subgraph = read_model(SSD).subgraphs[0]
    post = subgraph.operators[-1]
    network = convert_subgraph(
        slice_subgraph(subgraph, range(len(subgraph.operators) - 1), post.inputs[:2]),
        keep_io_layout=True,
    )
    builtin = reference_interpreter(SSD, preserve_all=True)
    xnnpack = reference_interpreter(SSD, preserve_all=True, xnnpack=True)
    (image,) = builtin.get_input_details()
    perms = stored_perms(model)
    ours_steps, xnn_steps = [], []
    for x in ssd_images(4, seed=1):
        for it in (builtin, xnnpack):
            it.set_tensor(image["index"], x)
            it.invoke()
        real = real_value(x, image["quantization"])
        (ours,), runner = run_converted(network, [{image["name"]: real}])
        assert runner.startswith("onnxruntime")
        (whole,), _ = run_converted(model, [{image["name"]: real.transpose(perms[image["name"]])}])
        assert 0 <= whole["TFLite_Detection_PostProcess:3"][0] <= 10
        for idx in post.inputs[:2]:
            detail = builtin.get_tensor_details()[idx]
            scale, zero_point = detail["quantization"]
            reference = builtin.get_tensor(idx).astype(np.int64)
            ours_q = np.round(ours[detail["name"]] / scale) + zero_point
            ours_steps.append(np.abs(ours_q - reference).ravel())
            xnn_steps.append(np.abs(xnnpack.get_tensor(idx).astype(np.int64) - reference).ravel())
    ours_steps, xnn_steps = np.concatenate(ours_steps), np.concatenate(xnn_steps)
    assert ours_steps.max() <= xnn_steps.max()
    assert np.mean(ours_steps == 0) >= np.mean(xnn_steps == 0) - 0.001
