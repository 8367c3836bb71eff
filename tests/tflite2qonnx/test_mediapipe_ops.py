"""MediaPipe's custom ops, on hand-built models, against numpy transcriptions of MediaPipe's
kernels (mediapipe/util/tflite/operations) and, where the interpreter runs them (its XNNPACK
delegate implements them), against the interpreter; plus the selfie segmentation model end to
end."""

from __future__ import annotations

import numpy as np
import pytest
import tflite
from hand_built import (
    SAME,
    VALID,
    argmax_pool_model,
    pool_options,
    transpose_conv_bias_model,
    unpool_model,
)
from litert_compare import compare, reference_interpreter, run_ours
from tflite_writer import build_model

import tflite2qonnx
from qonnx_ingest.errors import ConversionError
from support import CORPUS


def _out_size(size: int, k: int, s: int, padding: int) -> tuple[int, int]:
    """MediaPipe's transposed-conv output size and start pad."""
    total = max(0, k - (size - 1) % s - 1) if padding == SAME else 0
    return s * (size - 1) + k - total, total // 2


def transpose_conv_reference(x, w, bias, stride, padding):
    """Scatter every input pixel through the [O, kh, kw, I] filter, as MediaPipe's loop does."""
    n, h, wd, _ = x.shape
    o, kh, kw, _ = w.shape
    (oh, ph), (ow, pw) = _out_size(h, kh, stride[0], padding), _out_size(wd, kw, stride[1], padding)
    full = np.zeros((n, (h - 1) * stride[0] + kh, (wd - 1) * stride[1] + kw, o), np.float64)
    for fy in range(kh):
        for fx in range(kw):
            contrib = np.einsum("nhwi,oi->nhwo", x, w[:, fy, fx, :].astype(np.float64))
            full[:, fy : fy + (h - 1) * stride[0] + 1 : stride[0],
                 fx : fx + (wd - 1) * stride[1] + 1 : stride[1]] += contrib  # fmt: skip
    return (full[:, ph : ph + oh, pw : pw + ow] + bias).astype(np.float32)


@pytest.mark.parametrize(
    "x_shape, kernel, stride, padding",
    [
        ((1, 5, 6, 3), (3, 3), (2, 2), SAME),  # odd total pad: the extra row/column at the end
        ((1, 4, 4, 3), (4, 4), (2, 2), SAME),
        ((2, 4, 5, 2), (2, 2), (2, 2), SAME),  # the selfie model's shape of op
        ((1, 4, 5, 3), (3, 2), (1, 2), VALID),
    ],
    ids=["same_k3s2", "same_k4s2", "same_k2s2_batch2", "valid_k3x2_s1x2"],
)
def test_convolution_2d_transpose_bias_matches_numpy_scatter(x_shape, kernel, stride, padding):
    rng = np.random.default_rng(1)
    w = rng.uniform(-1, 1, (4, *kernel, x_shape[-1])).astype(np.float32)
    bias = rng.uniform(-1, 1, (4,)).astype(np.float32)
    data = transpose_conv_bias_model(x_shape, w, bias, stride, padding)
    model = tflite2qonnx.convert(data)
    assert "ConvTranspose" in {n.op_type for n in model.graph.node}
    x = rng.uniform(-1, 1, x_shape).astype(np.float32)
    ours = run_ours(model, {"x": x})["y"]
    np.testing.assert_allclose(ours, transpose_conv_reference(x, w, bias, stride, padding),
                               rtol=1e-5, atol=1e-5)  # fmt: skip


def test_convolution_2d_transpose_bias_matches_xnnpack_interpreter():
    """The interpreter runs the op only through XNNPACK (no builtin kernel): same numbers."""
    rng = np.random.default_rng(2)
    w = rng.uniform(-1, 1, (3, 3, 3, 4)).astype(np.float32)
    bias = rng.uniform(-1, 1, (3,)).astype(np.float32)
    data = transpose_conv_bias_model((1, 5, 6, 4), w, bias, (2, 2), SAME)
    pairs = compare(tflite2qonnx.convert(data), reference_interpreter(data, xnnpack=True))
    assert all(p.float_error_ok() for p in pairs)


# ---------------------------------------------------------------------- argmax pooling


def _pool_pad(size, out, k, s):
    return max((out - 1) * s + k - size, 0) // 2


def argmax_pool_reference(x, kernel, stride, padding):
    """MediaPipe's MaxPoolArgmax: first strict maximum of the clamped window, and its
    window-local index dy * filter_width + dx + 0.1."""
    n, h, w, c = x.shape
    if padding == SAME:
        oh, ow = -(-h // stride[0]), -(-w // stride[1])
    else:
        oh, ow = (h - kernel[0]) // stride[0] + 1, (w - kernel[1]) // stride[1] + 1
    ph, pw = _pool_pad(h, oh, kernel[0], stride[0]), _pool_pad(w, ow, kernel[1], stride[1])
    values = np.zeros((n, oh, ow, c), np.float32)
    index = np.zeros((n, oh, ow, c), np.float32)
    for b in range(n):
        for oy in range(oh):
            for ox in range(ow):
                for ch in range(c):
                    best, arg = -np.inf, 0
                    for fy in range(kernel[0]):
                        for fx in range(kernel[1]):
                            iy, ix = oy * stride[0] - ph + fy, ox * stride[1] - pw + fx
                            if 0 <= iy < h and 0 <= ix < w and x[b, iy, ix, ch] > best:
                                best, arg = x[b, iy, ix, ch], fy * kernel[1] + fx
                    values[b, oy, ox, ch] = best
                    index[b, oy, ox, ch] = np.float32(arg + 0.1)
    return values, index


@pytest.mark.parametrize(
    "x_shape, kernel, stride, padding",
    [
        ((1, 8, 6, 3), (2, 2), (2, 2), VALID),
        ((2, 7, 7, 2), (3, 3), (2, 2), SAME),  # padded windows at the borders
        ((1, 6, 9, 2), (2, 3), (2, 3), SAME),
    ],
    ids=["valid_k2s2", "same_k3s2_batch2", "same_k2x3"],
)
@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
def test_max_pooling_with_argmax_matches_numpy_first_maximum(
    x_shape, kernel, stride, padding, ties
):
    """With ties (values in {0, 1, 2}) the index must be the first maximum in raster order."""
    rng = np.random.default_rng(3)
    x = (rng.integers(0, 3, x_shape) if ties else rng.uniform(-1, 1, x_shape)).astype(np.float32)
    values, index = argmax_pool_reference(x, kernel, stride, padding)
    data = argmax_pool_model(x_shape, values.shape, kernel, stride, padding)
    ours = run_ours(tflite2qonnx.convert(data), {"x": x})
    np.testing.assert_array_equal(ours["values"], values)
    np.testing.assert_allclose(ours["indices"], index, atol=1e-6)


def unpool_reference(x, index, kernel, stride):
    """MediaPipe's MaxUnpooling: output in * filter, each value written at its window-local
    index (later writes win)."""
    n, h, w, c = x.shape
    oh, ow = h * kernel[0], w * kernel[1]
    ph, pw = _pool_pad(oh, h, kernel[0], stride[0]), _pool_pad(ow, w, kernel[1], stride[1])
    out = np.zeros((n, oh, ow, c), np.float32)
    for b in range(n):
        for iy in range(h):
            for ix in range(w):
                for ch in range(c):
                    i = int(index[b, iy, ix, ch])
                    oy = iy * stride[0] - ph + i // kernel[1]
                    ox = ix * stride[1] - pw + i % kernel[1]
                    if 0 <= oy < oh and 0 <= ox < ow:
                        out[b, oy, ox, ch] = x[b, iy, ix, ch]
    return out


@pytest.mark.parametrize(
    "x_shape, kernel, stride",
    [((1, 4, 3, 3), (2, 2), (2, 2)), ((2, 3, 4, 2), (3, 2), (2, 2))],
    ids=["k2s2", "k3x2s2_overlapping_batch2"],
)
def test_max_unpooling_matches_numpy_scatter(x_shape, kernel, stride):
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, x_shape).astype(np.float32)
    index = (rng.integers(0, kernel[0] * kernel[1], x_shape) + 0.1).astype(np.float32)
    data = unpool_model(x_shape, kernel, stride)
    ours = run_ours(tflite2qonnx.convert(data), {"x": x, "indices": index})["y"]
    np.testing.assert_array_equal(ours, unpool_reference(x, index, kernel, stride))


def test_argmax_pool_then_unpool_round_trip_keeps_each_window_maximum():
    """The segmentation-net pairing: unpooling the pooled values puts each maximum back."""
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (1, 6, 8, 3)).astype(np.float32)
    tensors = [
        {"name": "x", "shape": x.shape},
        {"name": "values", "shape": (1, 3, 4, 3)},
        {"name": "indices", "shape": (1, 3, 4, 3)},
        {"name": "y", "shape": x.shape},
    ]
    options = pool_options(VALID, (2, 2), (2, 2))
    ops = [
        {"op": "MaxPoolingWithArgmax2D", "inputs": [0], "outputs": [1, 2],
         "custom_options": options},
        {"op": "MaxUnpooling2D", "inputs": [1, 2], "outputs": [3], "custom_options": options},
    ]  # fmt: skip
    ours = run_ours(tflite2qonnx.convert(build_model(tensors, ops, [0], [3])), {"x": x})["y"]
    blocks = x.reshape(1, 3, 2, 4, 2, 3)
    is_max = blocks == blocks.max(axis=(2, 4), keepdims=True)
    np.testing.assert_array_equal(ours, np.where(is_max, blocks, 0).reshape(x.shape))


# ---------------------------------------------------------------------- errors, corpus


def test_unknown_custom_op_is_an_error_naming_it():
    tensors = [{"name": "x", "shape": (1, 4)}, {"name": "y", "shape": (1, 4)}]
    data = build_model(tensors, [{"op": "FancyOp", "inputs": [0], "outputs": [1]}], [0], [1])
    with pytest.raises(ConversionError, match="FancyOp"):
        tflite2qonnx.convert(data)


SELFIE = CORPUS / "tflite" / "mediapipe__selfie_segmentation.tflite"


@pytest.mark.skipif(not SELFIE.is_file(), reason=f"no corpus model {SELFIE}")
def test_selfie_segmentation_logits_match_xnnpack_interpreter():
    """End to end, with the model's output moved from the mask to its logits (the tensor the
    final LOGISTIC reads): on random images the mask saturates at 0, the logits do not.

    The interpreter runs the custom op only through XNNPACK, so that is the reference.
    """
    data = bytearray(SELFIE.read_bytes())
    sg = tflite.Model.GetRootAsModel(data, 0).Subgraphs(0)
    last = sg.Operators(sg.OperatorsLength() - 1)
    outputs = sg.OutputsAsNumpy()  # a view into ``data``: rewrite the output index in place
    assert outputs[0] == last.Outputs(0)
    outputs[0] = last.Inputs(0)
    data = bytes(data)
    model = tflite2qonnx.convert(data)
    pairs = compare(model, reference_interpreter(data, xnnpack=True), n_inputs=3, low=0, high=1)
    for p in pairs:
        assert np.ptp(p.reference) > 1.0  # not saturated
        assert p.float_error_ok()
