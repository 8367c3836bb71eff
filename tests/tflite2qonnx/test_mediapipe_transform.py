"""MediaPipe's landmark-transform custom ops (Landmarks2TransformMatrix, TransformLandmarks,
TransformTensorBilinear, version 2 as MediaPipe registers them) on hand-built models, against
numpy transcriptions of mediapipe/util/tflite/operations/*.cc.

ai-edge-litert's interpreter has no kernel for them (neither builtin nor XNNPACK), so numpy is
the only reference; a test pins that, so an interpreter that gains them is noticed.
"""

from __future__ import annotations

import math

import numpy as np
import onnxruntime as ort
import pytest
from hand_built import (
    flex_options,
    landmarks_to_matrix_model,
    transform_landmarks_model,
    transform_tensor_model,
)
from litert_compare import reference_interpreter, run_ours
from tflite_writer import build_model

import tflite2qonnx
from qonnx_ingest.errors import ConversionError


def assert_close(ours: np.ndarray, ref: np.ndarray, rtol: float = 1e-4) -> None:
    """Elementwise 1e-4 relative, with an absolute floor of 1e-5 of the output's scale
    (entries that cancel to ~0 next to pixel-sized ones)."""
    assert ours.shape == ref.shape
    scale = max(1.0, float(np.max(np.abs(ref))))
    np.testing.assert_allclose(ours, ref, rtol=rtol, atol=1e-5 * scale)


# ---------------------------------------------------------------------- numpy references
def landmarks_to_matrix_reference(landmarks: np.ndarray, opts: dict) -> np.ndarray:
    """landmarks_to_transform_matrix.cc, v2: landmarks read flat with stride 3; subset_idxs
    taken in pairs (an odd last one paired with itself); matrices multiplied in order."""
    flat = landmarks.astype(np.float64).ravel()

    def xy(i: int) -> np.ndarray:
        return flat[3 * i : 3 * i + 2]

    left, right = xy(opts["left_rotation_idx"]), xy(opts["right_rotation_idx"])
    rotation = opts.get("target_rotation_radians", 0.0) - math.atan2(
        right[1] - left[1], right[0] - left[0]
    )
    idxs = list(opts["subset_idxs"])
    pairs = [(idxs[2 * k], idxs[2 * k + 1]) for k in range(len(idxs) // 2)]
    if len(idxs) % 2:
        pairs.append((idxs[-1], idxs[-1]))
    points = [np.append(xy(i), 1.0) for pair in pairs for i in pair]

    def rot3(r: float) -> np.ndarray:
        return np.array([[math.cos(r), -math.sin(r), 0], [math.sin(r), math.cos(r), 0], [0, 0, 1]])

    rotated = np.array([rot3(rotation) @ p for p in points])
    hi, lo = rotated.max(axis=0), rotated.min(axis=0)
    width, height = hi[0] - lo[0], hi[1] - lo[1]
    center = rot3(-rotation) @ np.array([(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, 1.0])

    def mat4(a: np.ndarray) -> np.ndarray:  # 2x2 linear part, 2-vector shift
        m = np.eye(4)
        m[:2, :2], m[:2, 3] = a[:, :2], a[:, 2]
        return m

    r = -rotation
    out_w, out_h = opts["output_width"], opts["output_height"]
    sx = opts["scale_x"] * width / out_w
    sy = opts["scale_y"] * height / out_h
    t = np.eye(4)
    t = t @ mat4(np.array([[1, 0, center[0]], [0, 1, center[1]]]))
    t = t @ mat4(np.array([[math.cos(r), -math.sin(r), 0], [math.sin(r), math.cos(r), 0]]))
    t = t @ mat4(np.array([[sx, 0, 0], [0, sy, 0]]))
    t = t @ mat4(np.array([[1, 0, -out_w / 2.0], [0, 1, -out_h / 2.0]]))
    return t.reshape(1, 4, 4).astype(np.float32)


def _matrix_for(matrix: np.ndarray, item: int) -> np.ndarray:
    """The 4x4 of batch item ``item``: one matrix for all (the CPU kernel's single item), or
    one per item (the GPU delegate's batch handling)."""
    per_item = matrix.reshape(-1, 4, 4)
    return per_item[item if len(per_item) > 1 else 0].astype(np.float64)


def transform_landmarks_reference(landmarks: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """transform_landmarks.cc, v2: each landmark as (x, y, 0, 1) dotted with matrix rows 0
    and 1; a third coordinate is copied."""
    out = landmarks.copy()
    for item in range(landmarks.shape[0]):
        m = _matrix_for(matrix, item)
        for k in range(landmarks.shape[1]):
            lv = np.array([landmarks[item, k, 0], landmarks[item, k, 1], 0.0, 1.0])
            out[item, k, 0] = m[0] @ lv
            out[item, k, 1] = m[1] @ lv
    return out


def transform_tensor_reference(x: np.ndarray, matrix: np.ndarray, out_hw) -> np.ndarray:
    """transform_tensor_bilinear.cc, v2: align-corners correction of column 3, then per
    output pixel a source point; outside [0, W-1] x [0, H-1] -> 0, else bilinear with
    neighbours past the edge read as 0."""
    n, h, w, c = x.shape
    out = np.zeros((n, *out_hw, c), np.float32)
    for item in range(n):
        m = _matrix_for(matrix, item)
        row_x, row_y = m[0].copy(), m[1].copy()
        row_x[3] += row_x[0] * 0.5 + row_x[1] * 0.5 - 0.5
        row_y[3] += row_y[0] * 0.5 + row_y[1] * 0.5 - 0.5

        def read(yy: int, xx: int) -> np.ndarray:
            inside = 0 <= yy < h and 0 <= xx < w
            return x[item, yy, xx].astype(np.float64) if inside else np.zeros(c)  # noqa: B023

        for oy in range(out_hw[0]):
            for ox in range(out_hw[1]):
                coord = np.array([ox, oy, 0.0, 1.0])
                tx, ty = row_x @ coord, row_y @ coord
                if tx < 0 or tx > w - 1 or ty < 0 or ty > h - 1:
                    continue
                fx, fy = math.floor(tx), math.floor(ty)
                q11, q21 = read(fy, fx), read(fy, fx + 1)
                q12, q22 = read(fy + 1, fx), read(fy + 1, fx + 1)
                right, lower = tx - fx, ty - fy
                upper_v = (1 - right) * q11 + right * q21
                lower_v = (1 - right) * q12 + right * q22
                out[item, oy, ox] = lower * lower_v + (1 - lower) * upper_v
    return out


def affine(angle: float, scale: tuple[float, float], shift: tuple[float, float], rng) -> np.ndarray:
    """A [1, 4, 4] matrix with a rotated, scaled 2x2 part and a shift; the entries the
    kernels must ignore (column 2, rows 2 and 3) are random."""
    m = rng.uniform(-5, 5, (4, 4)).astype(np.float32)
    c, s = math.cos(angle), math.sin(angle)
    m[:2, :2] = np.array([[c, -s], [s, c]]) * np.array(scale)
    m[:2, 3] = shift
    return m.reshape(1, 4, 4)


# ---------------------------------------------------------------------- Landmarks2TransformMatrix
HAND = dict(subset_idxs=[0, 1, 2, 3, 5, 6, 9, 10, 13, 14, 17, 18], left_rotation_idx=0,
            right_rotation_idx=9, output_height=224, output_width=224, scale_x=2.6,
            scale_y=2.6)  # fmt: skip


@pytest.mark.parametrize(
    "shape, opts",
    [
        ((1, 21, 3), {**HAND, "target_rotation_radians": 0.0}),
        ((1, 21, 3), {**HAND, "target_rotation_radians": math.pi / 2}),
        (
            (1, 21, 3),
            {
                **HAND,
                "left_rotation_idx": 9,
                "right_rotation_idx": 0,
                "target_rotation_radians": -0.7,
            },
        ),  # fmt: skip
        # odd subset (last index paired with itself), non-square crop, unequal scales
        (
            (1, 8, 3),
            dict(
                subset_idxs=[1, 4, 7],
                left_rotation_idx=2,
                right_rotation_idx=5,
                target_rotation_radians=2.5,
                output_height=64,
                output_width=96,
                scale_x=1.5,
                scale_y=0.75,
            ),
        ),  # fmt: skip
        # left == right: atan2(0, 0) = 0, so the rotation is the target
        (
            (1, 6, 3),
            dict(
                subset_idxs=[0, 1, 2, 3, 4, 5],
                left_rotation_idx=3,
                right_rotation_idx=3,
                target_rotation_radians=0.3,
                output_height=32,
                output_width=32,
                scale_x=1.0,
                scale_y=1.0,
            ),
        ),  # fmt: skip
        # batch 2: the flat stride-3 reads only ever reach the first item here
        (
            (2, 5, 3),
            dict(
                subset_idxs=[0, 4],
                left_rotation_idx=1,
                right_rotation_idx=2,
                output_height=16,
                output_width=8,
                scale_x=1.0,
                scale_y=2.0,
            ),
        ),  # fmt: skip
    ],
    ids=[
        "hand_target0",
        "hand_target_pi_2",
        "swapped_negative",
        "odd_subset_non_square",
        "zero_direction",
        "batch2",
    ],  # fmt: skip
)
def test_landmarks_to_transform_matrix_matches_numpy(shape, opts):
    rng = np.random.default_rng(11)
    model = tflite2qonnx.convert(landmarks_to_matrix_model(shape, flex_options(**opts)))
    for _ in range(4):
        landmarks = rng.uniform(0, 224, shape).astype(np.float32)
        ours = run_ours(model, {"landmarks": landmarks})["matrix"]
        assert_close(ours, landmarks_to_matrix_reference(landmarks, opts))


def test_landmarks_to_transform_matrix_at_opset_18():
    """ReduceMax / ReduceMin take their axes as an input from opset 18."""
    rng = np.random.default_rng(12)
    opts = {**HAND, "target_rotation_radians": 1.0}
    model = tflite2qonnx.convert(landmarks_to_matrix_model((1, 21, 3), flex_options(**opts)),
                                 opset=18)  # fmt: skip
    landmarks = rng.uniform(0, 224, (1, 21, 3)).astype(np.float32)
    ours = run_ours(model, {"landmarks": landmarks})["matrix"]
    assert_close(ours, landmarks_to_matrix_reference(landmarks, opts))


OK_OPTS = dict(subset_idxs=[0, 1], left_rotation_idx=0, right_rotation_idx=1,
               output_height=8, output_width=8, scale_x=1.0, scale_y=1.0)  # fmt: skip


@pytest.mark.parametrize(
    "options, message",
    [
        (None, "custom options"),
        (b"\x01\x02\x03", "flexbuffer"),
        ({**OK_OPTS, "subset_idxs": []}, "subset_idxs"),
        ({k: v for k, v in OK_OPTS.items() if k != "subset_idxs"}, "subset_idxs"),
        ({k: v for k, v in OK_OPTS.items() if k != "scale_x"}, "scale_x"),  # reads as 0
        ({**OK_OPTS, "output_width": 0}, "output_width"),
        ({**OK_OPTS, "right_rotation_idx": 4}, "right_rotation_idx 4"),
        ({**OK_OPTS, "subset_idxs": [0, 7]}, "subset index 7"),
        ({**OK_OPTS, "left_rotation_idx": -1}, "left_rotation_idx -1"),
    ],
    ids=[
        "missing",
        "not_flexbuffer",
        "empty_subset",
        "no_subset",
        "no_scale_x",
        "zero_width",
        "index_past_end",
        "subset_past_end",
        "negative_index",
    ],  # fmt: skip
)
def test_landmarks_to_transform_matrix_bad_options_are_errors(options, message):
    raw = flex_options(**options) if isinstance(options, dict) else options
    with pytest.raises(ConversionError, match=message) as err:
        tflite2qonnx.convert(landmarks_to_matrix_model((1, 4, 3), raw))
    assert err.value.where == "operator 0 (Landmarks2TransformMatrix)"


# ---------------------------------------------------------------------- TransformLandmarks
@pytest.mark.parametrize(
    "shape, matrix_shape",
    [
        ((1, 21, 3), (1, 4, 4)),
        ((1, 468, 3), (1, 4, 4)),
        ((1, 10, 2), (1, 4, 4)),
        ((2, 7, 3), (1, 4, 4)),  # one matrix for both items
        ((3, 5, 2), (3, 4, 4)),  # a matrix per item
    ],
    ids=["xyz_21", "xyz_468", "xy", "batch2_shared", "batch3_per_item"],
)
def test_transform_landmarks_matches_numpy(shape, matrix_shape):
    rng = np.random.default_rng(13)
    model = tflite2qonnx.convert(transform_landmarks_model(shape, matrix_shape))
    for _ in range(3):
        landmarks = rng.uniform(-1, 256, shape).astype(np.float32)
        matrix = np.concatenate(
            [
                affine(rng.uniform(-3, 3), rng.uniform(0.2, 3, 2), rng.uniform(-100, 100, 2), rng)
                for _ in range(matrix_shape[0])
            ]  # fmt: skip
        )
        ours = run_ours(model, {"landmarks": landmarks, "matrix": matrix})["y"]
        assert_close(ours, transform_landmarks_reference(landmarks, matrix))


@pytest.mark.parametrize(
    "shape, matrix_shape, version, message",
    [
        ((1, 5, 5), (1, 4, 4), 2, r"2 or 3"),  # 5 coordinates: the kernel's dimensions check
        ((1, 5, 4, 3), (1, 4, 4), 2, r"2 or 3"),  # v1's 4D layout
        ((1, 5, 3), (1, 4, 4), 1, "version 1"),
        ((2, 5, 3), (3, 4, 4), 2, "16 \\* batch"),
    ],
    ids=["five_coords", "rank4", "version1", "matrix_batch_mismatch"],
)
def test_transform_landmarks_unsupported_forms_are_errors(shape, matrix_shape, version, message):
    data = transform_landmarks_model(shape, matrix_shape, version=version)
    with pytest.raises(ConversionError, match=message) as err:
        tflite2qonnx.convert(data)
    assert err.value.where == "operator 0 (TransformLandmarks)"


# ---------------------------------------------------------------------- TransformTensorBilinear
def test_transform_tensor_identity_matrix_copies_the_image():
    """The align-corners correction leaves the identity an identity: pixel (x, y) reads
    source (x, y) exactly."""
    rng = np.random.default_rng(14)
    x = rng.uniform(-1, 1, (1, 6, 5, 3)).astype(np.float32)
    model = tflite2qonnx.convert(transform_tensor_model(x.shape, (6, 5)))
    ours = run_ours(model, {"x": x, "matrix": np.eye(4, dtype=np.float32).reshape(1, 4, 4)})["y"]
    np.testing.assert_array_equal(ours, x)


@pytest.mark.parametrize(
    "x_shape, out_hw, n_matrices, angle, scale, shift",
    [
        ((1, 8, 8, 3), (8, 8), 1, 0.3, (1.0, 1.0), (0.5, -0.5)),
        ((1, 10, 7, 2), (5, 9), 1, -1.1, (1.4, 0.6), (3.0, 2.0)),  # non-square in and out
        ((1, 6, 6, 4), (12, 12), 1, 0.0, (0.5, 0.5), (-1.0, -1.0)),  # upsampling, left edge out
        ((1, 5, 6, 1), (7, 7), 1, 2.0, (1.3, 1.3), (8.0, 2.0)),  # mostly outside
        ((2, 7, 6, 3), (4, 5), 1, 0.5, (1.2, 0.9), (1.0, 0.0)),  # one matrix for the batch
        ((2, 7, 6, 3), (6, 4), 2, 0.5, (1.2, 0.9), (1.0, 0.0)),  # a matrix per item
    ],
    ids=[
        "rotate_small",
        "non_square",
        "upsample",
        "mostly_outside",
        "batch2_shared",
        "batch2_per_item",
    ],  # fmt: skip
)
def test_transform_tensor_bilinear_matches_numpy(x_shape, out_hw, n_matrices, angle, scale, shift):
    rng = np.random.default_rng(15)
    model = tflite2qonnx.convert(transform_tensor_model(x_shape, out_hw, (n_matrices, 4, 4)))
    outside = inside = 0
    for _ in range(3):
        x = rng.uniform(-1, 1, x_shape).astype(np.float32)
        matrix = np.concatenate(
            [affine(angle + 0.2 * k, scale, shift, rng) for k in range(n_matrices)]
        )
        ref = transform_tensor_reference(x, matrix, out_hw)
        ours = run_ours(model, {"x": x, "matrix": matrix})["y"]
        assert_close(ours, ref)
        zero = np.all(ref == 0, axis=-1)
        outside, inside = outside + zero.sum(), inside + (~zero).sum()
    assert inside > 0
    if (angle, shift) != (0.3, (0.5, -0.5)):
        assert outside > 0  # the zero rule is exercised


def test_transform_tensor_bilinear_between_convolutions_keeps_the_layout():
    """Conv -> TransformTensorBilinear -> Conv: the convs run channels-first, the sampler
    reads its image in NHWC, so the layout pass must transpose around it."""
    rng = np.random.default_rng(16)
    w1 = rng.uniform(-1, 1, (4, 1, 1, 3)).astype(np.float32)
    w2 = rng.uniform(-1, 1, (2, 1, 1, 4)).astype(np.float32)
    b1, b2 = np.zeros(4, np.float32), np.zeros(2, np.float32)
    conv = ("Conv2DOptions", {"Padding": 1, "StrideW": 1, "StrideH": 1})
    tensors = [
        {"name": "x", "shape": (1, 7, 9, 3)},
        {"name": "matrix", "shape": (1, 4, 4)},
        {"name": "w1", "shape": w1.shape, "data": w1},
        {"name": "b1", "shape": b1.shape, "data": b1},
        {"name": "features", "shape": (1, 7, 9, 4)},
        {"name": "crop", "shape": (1, 5, 6, 4)},
        {"name": "w2", "shape": w2.shape, "data": w2},
        {"name": "b2", "shape": b2.shape, "data": b2},
        {"name": "y", "shape": (1, 5, 6, 2)},
    ]
    ops = [
        {"op": "CONV_2D", "inputs": [0, 2, 3], "outputs": [4], "options": conv},
        {"op": "TransformTensorBilinear", "inputs": [4, 1], "outputs": [5], "version": 2,
         "custom_options": flex_options(output_height=5, output_width=6)},
        {"op": "CONV_2D", "inputs": [5, 6, 7], "outputs": [8], "options": conv},
    ]  # fmt: skip
    model = tflite2qonnx.convert(build_model(tensors, ops, [0, 1], [8]))
    assert [n.op_type for n in model.graph.node].count("Conv") == 2
    x = rng.uniform(-1, 1, (1, 7, 9, 3)).astype(np.float32)
    matrix = affine(0.4, (1.1, 0.9), (1.5, -0.5), rng)
    features = np.einsum("nhwi,oi->nhwo", x, w1[:, 0, 0, :])
    ref = np.einsum("nhwi,oi->nhwo", transform_tensor_reference(features, matrix, (5, 6)),
                    w2[:, 0, 0, :])  # fmt: skip
    assert_close(run_ours(model, {"x": x, "matrix": matrix})["y"], ref)


@pytest.mark.parametrize(
    "options, out_hw, matrix_shape, version, message",
    [
        (flex_options(output_height=5, output_width=4), (4, 4), (1, 4, 4), 2, "output_height"),
        (b"\x07", (4, 4), (1, 4, 4), 2, "flexbuffer"),
        (None, (4, 4), (1, 4, 4), 1, "version 1"),
        (None, (4, 4), (3, 4, 4), 2, "16 \\* batch"),
        (None, (4, 4), (1, 3, 4), 2, "16 \\* batch"),
    ],
    ids=["size_disagrees", "not_flexbuffer", "version1", "matrix_batch", "matrix_size"],
)
def test_transform_tensor_bilinear_bad_forms_are_errors(
    options, out_hw, matrix_shape, version, message
):
    data = transform_tensor_model((2, 4, 4, 2), out_hw, matrix_shape, options, version)
    with pytest.raises(ConversionError, match=message) as err:
        tflite2qonnx.convert(data)
    assert err.value.where == "operator 0 (TransformTensorBilinear)"


# ---------------------------------------------------------------------- the three together
def test_attention_mesh_pipeline_matches_numpy_in_qonnx_and_onnxruntime():
    """MediaPipe's pattern: landmarks -> crop matrix -> crop the image -> crop-space
    landmarks back to the image. Run by qonnx's executor and by onnxruntime."""
    rng = np.random.default_rng(17)
    opts = dict(subset_idxs=[0, 2, 4, 6], left_rotation_idx=1, right_rotation_idx=5,
                target_rotation_radians=0.0, output_height=6, output_width=8, scale_x=1.5,
                scale_y=1.5)  # fmt: skip
    tensors = [
        {"name": "landmarks", "shape": (1, 8, 3)},
        {"name": "image", "shape": (1, 16, 12, 3)},
        {"name": "crop_landmarks", "shape": (1, 8, 3)},
        {"name": "matrix", "shape": (1, 4, 4)},
        {"name": "crop", "shape": (1, 6, 8, 3)},
        {"name": "image_landmarks", "shape": (1, 8, 3)},
    ]
    ops = [
        {"op": "Landmarks2TransformMatrix", "inputs": [0], "outputs": [3], "version": 2,
         "custom_options": flex_options(**opts)},
        {"op": "TransformTensorBilinear", "inputs": [1, 3], "outputs": [4], "version": 2,
         "custom_options": flex_options(output_height=6, output_width=8)},
        {"op": "TransformLandmarks", "inputs": [2, 3], "outputs": [5], "version": 2,
         "custom_options": flex_options()},
    ]  # fmt: skip
    model = tflite2qonnx.convert(build_model(tensors, ops, [0, 1, 2], [4, 5]))
    feeds = {
        "landmarks": rng.uniform(2, 10, (1, 8, 3)).astype(np.float32),
        "image": rng.uniform(-1, 1, (1, 16, 12, 3)).astype(np.float32),
        "crop_landmarks": rng.uniform(0, 8, (1, 8, 3)).astype(np.float32),
    }
    matrix = landmarks_to_matrix_reference(feeds["landmarks"], opts)
    ref = {
        "crop": transform_tensor_reference(feeds["image"], matrix, (6, 8)),
        "image_landmarks": transform_landmarks_reference(feeds["crop_landmarks"], matrix),
    }
    ours = run_ours(model, feeds)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    from_ort = dict(zip(names, session.run(None, feeds), strict=True))
    for name, value in ref.items():
        assert_close(ours[name], value)
        assert_close(from_ort[name], value)


# ---------------------------------------------------------------------- no interpreter kernel
@pytest.mark.parametrize("xnnpack", [False, True], ids=["builtin_ref", "xnnpack"])
@pytest.mark.parametrize(
    "data",
    [
        landmarks_to_matrix_model((1, 4, 3), flex_options(**OK_OPTS)),
        transform_landmarks_model((1, 4, 3)),
        transform_tensor_model((1, 4, 4, 2), (3, 3)),
    ],
    ids=["Landmarks2TransformMatrix", "TransformLandmarks", "TransformTensorBilinear"],
)
def test_interpreter_has_no_kernel_so_numpy_is_the_reference(data, xnnpack):
    """If this starts failing, the interpreter runs the op: compare against it too."""
    with pytest.raises(RuntimeError, match="unresolved custom op"):
        reference_interpreter(data, xnnpack=xnnpack)
