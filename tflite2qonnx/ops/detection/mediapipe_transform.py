"""MediaPipe's landmark-transform custom ops (mediapipe/util/tflite/operations), the ones that
crop a region of interest and map landmarks back: Landmarks2TransformMatrix,
TransformTensorBilinear and TransformLandmarks.

MediaPipe's op resolver registers only version 2 of each, so that is what is converted; the
version 1 kernels (different formulas, and TransformTensorBilinear's is registered under
another name) are refused. Custom options are flexbuffer maps (parsed by the GPU delegate's
``Parse*V2Attributes``); a missing key reads as 0 there, so it fails the kernel's own checks.

The kernels are float-only and run on the first batch item; for batch > 1 the conversion
follows the GPU delegate, which pairs batch item b with transform matrix b (or one matrix
with every item). The 4x4 matrix maps output pixels (or crop-space landmarks) to input
pixels; only its first two rows are read.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from flatbuffers import flexbuffers
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.common import reduce_axes

_F32 = np.float32


# ---------------------------------------------------------------------- shared helpers
def _check_version(op: Operator) -> None:
    if op.opcode.version != 2:
        raise ConversionError(
            f"version {op.opcode.version} is not supported: MediaPipe's op resolver registers "
            "only version 2 of this op",
            op.where,
        )


def _options(op: Operator, *, required: bool) -> dict[str, Any]:
    """The flexbuffer map of custom options ({} when absent and not required)."""
    raw = op.custom_options
    if not raw:
        if required:
            raise ConversionError("custom options (a flexbuffer map) are missing", op.where)
        return {}
    try:
        value = flexbuffers.Loads(raw)
    except Exception as exc:  # malformed buffers raise anything from IndexError to ValueError
        raise ConversionError(f"custom options are not a flexbuffer: {exc}", op.where) from exc
    if not isinstance(value, dict):
        raise ConversionError(
            f"custom options are a flexbuffer {type(value).__name__}, not a map", op.where
        )
    return value


def _number(opts: dict[str, Any], key: str, op: Operator) -> float:
    """A scalar option; absent keys are 0, as flexbuffers' AsInt32 / AsFloat read them."""
    value = opts.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConversionError(f"option '{key}' must be a number, got {value!r}", op.where)
    return float(value)


def _int_option(opts: dict[str, Any], key: str, op: Operator) -> int:
    return int(_number(opts, key, op))


def _float_input(b: GraphBuilder, idx: int, op: Operator, what: str) -> tuple[int, ...]:
    """The static shape of a float32 operand (the kernels accept nothing else)."""
    tensor = b.tensor(idx)
    if tensor.dtype != "float32":
        raise ConversionError(f"{what} must be float32, not {tensor.dtype}", op.where)
    if any(d < 0 for d in tensor.shape_signature):
        raise ConversionError(f"{what} needs a static shape", op.where)
    return tuple(tensor.shape)


def _ints(b: GraphBuilder, value, hint: str) -> str:
    return b.const(np.asarray(value, np.int64), hint)


def _floats(b: GraphBuilder, value, hint: str) -> str:
    return b.const(np.asarray(value, _F32), hint)


def _slice(b: GraphBuilder, x: str, start: int, end: int, axis: int) -> str:
    args = [_ints(b, [start], "starts"), _ints(b, [end], "ends"), _ints(b, [axis], "axes")]
    return b.emit("Slice", [x, *args])[0]


def _matrix_rows(b: GraphBuilder, idx: int, batch: int, op: Operator) -> str:
    """The transform's first two rows as [M, 2, 4], M = 1 (shared) or ``batch``.

    The kernels read the first 8 floats of the matrix tensor, i.e. rows 0 and 1 of a
    row-major 4x4 ([1, 4, 4] as Landmarks2TransformMatrix writes it).
    """
    size = int(np.prod(_float_input(b, idx, op, "the transform matrix")))
    if size % 16 or size // 16 not in (1, batch):
        raise ConversionError(
            f"the transform matrix has {size} elements; expected 16 (one 4x4 matrix) or "
            f"16 * batch ({16 * batch})",
            op.where,
        )
    m = size // 16
    matrix = b.emit("Reshape", [b.input(idx), _ints(b, [m, 4, 4], "matrix_shape")])[0]
    return _slice(b, matrix, 0, 2, 1)


# ---------------------------------------------------------------------- Landmarks2TransformMatrix
def _landmark_index(opts: dict[str, Any], key: str, n_values: int, op: Operator) -> int:
    idx = _int_option(opts, key, op)
    _check_landmark(idx, key, n_values, op)
    return idx


def _check_landmark(idx: int, what: str, n_values: int, op: Operator) -> None:
    # the kernel reads x, y and z of landmark i at flat positions 3i .. 3i + 2
    if idx < 0 or 3 * idx + 2 >= n_values:
        raise ConversionError(
            f"{what} {idx} is outside the {n_values // 3} landmarks of the input", op.where
        )


def landmarks_to_transform_matrix(b: GraphBuilder, op: Operator) -> None:
    """The [1, 4, 4] matrix mapping crop pixels to input pixels for a rotated landmark box.

    MediaPipe (v2): with l, r the left/right rotation landmarks, the rotation is
    ``rot = target_rotation_radians - atan2(r.y - l.y, r.x - l.x)``; the subset landmarks are
    rotated by R(rot), their bounding box gives size (w, h) and a center that is rotated back;
    the result is ``Shift(center) . R(-rot) . Scale(scale_x * w / output_width,
    scale_y * h / output_height) . Shift(-output_width / 2, -output_height / 2)``.

    The landmarks are read as a flat array with stride 3 whatever the input shape. cos(rot)
    and sin(rot) come from the angle-difference identities on the normalized direction
    vector (ONNX has no Atan2), which is exact up to rounding; a zero direction is angle 0.
    """
    _check_version(op)
    opts = _options(op, required=True)
    shape = _float_input(b, op.inputs[0], op, "the landmarks")
    if len(shape) != 3:
        raise ConversionError(f"landmarks must be 3D, got shape {list(shape)}", op.where)
    n_values = int(np.prod(shape))
    left = _landmark_index(opts, "left_rotation_idx", n_values, op)
    right = _landmark_index(opts, "right_rotation_idx", n_values, op)
    out_h, out_w = _int_option(opts, "output_height", op), _int_option(opts, "output_width", op)
    scale_x, scale_y = _number(opts, "scale_x", op), _number(opts, "scale_y", op)
    target = _number(opts, "target_rotation_radians", op)
    for key, value in (("output_height", out_h), ("output_width", out_w)):
        if value <= 0:
            raise ConversionError(f"option '{key}' must be positive, got {value}", op.where)
    for key, value in (("scale_x", scale_x), ("scale_y", scale_y)):
        if not value > 0:
            raise ConversionError(f"option '{key}' must be positive, got {value}", op.where)
    subset = opts.get("subset_idxs")
    if not isinstance(subset, list) or not subset or not all(isinstance(i, int) for i in subset):
        raise ConversionError("option 'subset_idxs' must be a non-empty list of ints", op.where)
    for i in subset:
        _check_landmark(i, "subset index", n_values, op)
    out_shape = tuple(b.tensor(op.outputs[0]).shape)
    if out_shape != (1, 4, 4):
        raise ConversionError(f"output must be [1, 4, 4], got {list(out_shape)}", op.where)

    flat = b.emit("Reshape", [b.input(op.inputs[0]), _ints(b, [-1], "flat")])[0]
    # direction from the left to the right rotation landmark, and its angle a
    d = b.emit(
        "Sub",
        [
            b.emit("Gather", [flat, _ints(b, [3 * right, 3 * right + 1], "right_xy")])[0],
            b.emit("Gather", [flat, _ints(b, [3 * left, 3 * left + 1], "left_xy")])[0],
        ],
    )[0]
    norm = b.emit("Sqrt", [reduce_axes(b, "ReduceSum", b.emit("Mul", [d, d])[0], [0], 1)])[0]
    zero = b.emit("Equal", [norm, _floats(b, [0.0], "zero")])[0]
    safe = b.emit("Where", [zero, _floats(b, [1.0], "one"), norm])[0]
    # (cos a, sin a), or (1, 0) for a zero vector as atan2(0, 0) = 0
    cs_a = b.emit("Where", [zero, _floats(b, [1.0, 0.0], "angle0"), b.emit("Div", [d, safe])[0]])[0]
    # rot = t - a: cos = cos t cos a + sin t sin a, sin = sin t cos a - cos t sin a
    ct, st = math.cos(target), math.sin(target)
    to_rot = _floats(b, [[ct, st], [st, -ct]], "angle_difference")
    cs = b.emit("MatMul", [to_rot, b.emit("Unsqueeze", [cs_a, _ints(b, [1], "axis1")])[0]])[0]
    c = _slice(b, cs, 0, 1, 0)  # [1, 1]
    s = _slice(b, cs, 1, 2, 0)
    neg_s = b.emit("Neg", [s])[0]
    rot = b.emit("Concat", [b.emit("Concat", [c, neg_s], axis=1)[0],
                            b.emit("Concat", [s, c], axis=1)[0]], axis=0)[0]  # fmt: skip
    # subset landmarks as [2, K] (x row, y row), rotated; their box in the rotated frame
    idx = np.asarray(subset, np.int64) * 3
    points = b.emit("Gather", [flat, _ints(b, np.stack([idx, idx + 1]), "subset_xy")])[0]
    rotated = b.emit("MatMul", [rot, points])[0]
    hi = reduce_axes(b, "ReduceMax", rotated, [1], 1)  # [2, 1]
    lo = reduce_axes(b, "ReduceMin", rotated, [1], 1)
    size = b.emit("Sub", [hi, lo])[0]
    mid = b.emit("Mul", [b.emit("Add", [hi, lo])[0], _floats(b, 0.5, "half")])[0]
    rot_back = b.emit("Transpose", [rot], perm=[1, 0])[0]  # R(-rot) = R(rot)^T
    center = b.emit("MatMul", [rot_back, mid])[0]  # [2, 1]
    # A = R(-rot) . diag(scale * size / output size): columns scaled by a [1, 2] row
    scales = _floats(b, [[scale_x / out_w], [scale_y / out_h]], "scale_per_pixel")
    col_scale = b.emit("Transpose", [b.emit("Mul", [size, scales])[0]], perm=[1, 0])[0]
    a = b.emit("Mul", [rot_back, col_scale])[0]
    shift = b.emit("MatMul", [a, _floats(b, [[-out_w / 2.0], [-out_h / 2.0]], "to_center")])[0]
    t = b.emit("Add", [shift, center])[0]
    top = b.emit("Concat", [a, _floats(b, np.zeros((2, 1)), "zero_column"), t], axis=1)[0]
    bottom = _floats(b, [[0, 0, 1, 0], [0, 0, 0, 1]], "identity_rows")
    matrix = b.emit("Concat", [top, bottom], axis=0)[0]
    b.set_output(op.outputs[0], b.emit("Reshape", [matrix, _ints(b, out_shape, "shape")])[0])


# ---------------------------------------------------------------------- TransformLandmarks
def transform_landmarks(b: GraphBuilder, op: Operator) -> None:
    """Landmarks [B, N, C] (C = 2 or 3) through the matrix: ``(x, y) -> A (x, y) + t`` with
    A the matrix's top-left 2x2 and t its column 3 (MediaPipe reads (x, y, 0, 1) against
    rows 0 and 1); z, when present, passes through. The v2 kernel takes C from the shape and
    has no options; other C are errors there too.
    """
    _check_version(op)
    shape = _float_input(b, op.inputs[0], op, "the landmarks")
    if len(shape) != 3 or shape[2] not in (2, 3):
        raise ConversionError(
            f"landmarks must be [batch, n, 2 or 3], got shape {list(shape)}", op.where
        )
    rows = _matrix_rows(b, op.inputs[1], shape[0], op)  # [M, 2, 4]
    lin = b.emit("Transpose", [_slice(b, rows, 0, 2, 2)], perm=[0, 2, 1])[0]  # [M, 2, 2]: A^T
    offset = b.emit("Transpose", [_slice(b, rows, 3, 4, 2)], perm=[0, 2, 1])[0]  # [M, 1, 2]
    x = b.input(op.inputs[0])
    xy = _slice(b, x, 0, 2, 2) if shape[2] == 3 else x
    y = b.emit("Add", [b.emit("MatMul", [xy, lin])[0], offset])[0]
    if shape[2] == 3:
        y = b.emit("Concat", [y, _slice(b, x, 2, 3, 2)], axis=2)[0]
    b.set_output(op.outputs[0], y)


# ---------------------------------------------------------------------- TransformTensorBilinear
def _output_hw(b: GraphBuilder, op: Operator, opts: dict[str, Any]) -> tuple[int, int]:
    """The output size: the output tensor's (what the CPU kernel uses), checked against the
    output_height / output_width options (what the GPU delegate uses) when both exist."""
    sig = b.tensor(op.outputs[0]).shape_signature
    if len(sig) != 4:
        raise ConversionError(f"output must be 4D NHWC, got shape {list(sig)}", op.where)
    hw = [sig[1], sig[2]]
    for k, key in enumerate(("output_height", "output_width")):
        if key in opts:
            value = _int_option(opts, key, op)
            if value <= 0 or (hw[k] >= 0 and hw[k] != value):
                raise ConversionError(
                    f"option '{key}' = {value} disagrees with the output shape {list(sig)}",
                    op.where,
                )
            hw[k] = value
        elif hw[k] < 0:
            raise ConversionError(f"output size unknown: no static shape, no '{key}'", op.where)
    return hw[0], hw[1]


def _grid(out_h: int, out_w: int) -> np.ndarray:
    """[4, OH * OW]: each output pixel as (x + 0.5, y + 0.5, 0, 1), raster order.

    The v2 kernel's align-corners correction adds ``0.5 * (m0 + m1) - 0.5`` to each row's
    column 3; ``row . (x + 0.5, y + 0.5, 0, 1) - 0.5`` is the same sum.
    """
    ys, xs = np.meshgrid(np.arange(out_h), np.arange(out_w), indexing="ij")
    ones = np.ones(out_h * out_w)
    return np.stack([xs.ravel() + 0.5, ys.ravel() + 0.5, 0 * ones, ones]).astype(_F32)


def transform_tensor_bilinear(b: GraphBuilder, op: Operator) -> None:
    """Sample an NHWC image at the matrix's image of each output pixel, bilinearly.

    MediaPipe (v2): the source point (sx, sy) of output pixel (x, y) is rows 0 and 1 of the
    (align-corners corrected) matrix applied to (x, y, 0, 1); a point outside
    [0, W - 1] x [0, H - 1] gives 0 in every channel, any other interpolates its four
    neighbours (a neighbour past the edge has weight 0 there).

    Expressed as Gathers from the image flattened to [N * H * W, C] (valid at any opset,
    unlike GridSample, and its border rule differs anyway): the Reshapes are terminate ops,
    so the layout pass feeds them the source-order (NHWC) image it needs.
    """
    _check_version(op)
    opts = _options(op, required=False)
    shape = _float_input(b, op.inputs[0], op, "the input image")
    if len(shape) != 4:
        raise ConversionError(f"input must be 4D NHWC, got shape {list(shape)}", op.where)
    n, h, w, ch = shape
    out_h, out_w = _output_hw(b, op, opts)
    out_sig = b.tensor(op.outputs[0]).shape_signature
    if out_sig[0] not in (-1, n) or out_sig[3] not in (-1, ch):
        raise ConversionError(
            f"output {list(out_sig)} must keep the input's batch and channels ({n}, {ch})",
            op.where,
        )
    rows = _matrix_rows(b, op.inputs[1], n, op)  # [M, 2, 4]
    src = b.emit("MatMul", [rows, _floats(b, _grid(out_h, out_w), "pixel_grid")])[0]
    src = b.emit("Sub", [src, _floats(b, 0.5, "half")])[0]  # [M, 2, P]
    sx = b.emit("Squeeze", [_slice(b, src, 0, 1, 1), _ints(b, [1], "axis1")])[0]  # [M, P]
    sy = b.emit("Squeeze", [_slice(b, src, 1, 2, 1), _ints(b, [1], "axis1")])[0]

    def outside(v: str, limit: int) -> str:
        below = b.emit("Less", [v, _floats(b, 0.0, "zero")])[0]
        above = b.emit("Greater", [v, _floats(b, float(limit), "limit")])[0]
        return b.emit("Or", [below, above])[0]

    out_of_bounds = b.emit("Or", [outside(sx, w - 1), outside(sy, h - 1)])[0]

    def corners(v: str, size: int) -> tuple[str, str, str]:
        """(weight of the far corner, near index, far index), indices clamped to the image:
        only out-of-bounds points (masked) and far corners of weight 0 are clamped."""
        lo = b.emit("Floor", [v])[0]
        frac = b.emit("Sub", [v, lo])[0]
        top = _floats(b, float(size - 1), "last")
        bottom = _floats(b, 0.0, "zero")
        near = b.emit("Clip", [lo, bottom, top])[0]
        far = b.emit("Clip", [b.emit("Add", [lo, _floats(b, 1.0, "one")])[0], bottom, top])[0]
        return frac, near, far

    ax, x0, x1 = corners(sx, w)
    ay, y0, y1 = corners(sy, h)
    # flat row of (b, y, x) in the [N * H * W, C] image; one matrix serves every item
    base = _floats(b, (np.arange(n) * (h * w)).reshape(n, 1), "item_base")
    image = b.emit("Reshape", [b.input(op.inputs[0]), _ints(b, [n * h * w, ch], "image_rows")])[0]

    def gather(y: str, x: str) -> str:
        flat = b.emit("Add", [b.emit("Mul", [y, _floats(b, float(w), "width")])[0], x])[0]
        flat = b.emit("Cast", [b.emit("Add", [flat, base])[0]], to=TensorProto.INT64)[0]
        return b.emit("Gather", [image, flat], axis=0)[0]  # [N, P, C]

    q11, q21, q12, q22 = gather(y0, x0), gather(y0, x1), gather(y1, x0), gather(y1, x1)

    def column(v: str) -> str:  # [M, P] -> [M, P, 1], to weight every channel
        return b.emit("Unsqueeze", [v, _ints(b, [2], "axis2")])[0]

    def lerp(p: str, q: str, t: str) -> str:
        """(1 - t) * p + t * q, the kernel's order of terms."""
        one_minus = b.emit("Sub", [_floats(b, 1.0, "one"), t])[0]
        return b.emit("Add", [b.emit("Mul", [one_minus, p])[0], b.emit("Mul", [t, q])[0]])[0]

    ax, ay = column(ax), column(ay)
    value = lerp(lerp(q11, q21, ax), lerp(q12, q22, ax), ay)
    value = b.emit("Where", [column(out_of_bounds), _floats(b, 0.0, "zero"), value])[0]
    y = b.emit("Reshape", [value, _ints(b, [n, out_h, out_w, ch], "shape")])[0]
    b.set_output(op.outputs[0], y)
