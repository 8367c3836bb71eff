"""--bit-exact RESIZE_BILINEAR on int8 (ResizeBilinearInteger's 10-bit fixed point) and uint8
(reference_ops::ResizeBilinear<uint8_t>'s float32 arithmetic, ``ops/exact/resize_uint8.py``)
against the interpreter's builtin reference kernels: every coordinate mode, upscale (2x, where
exact ties are common, and odd ratios) and downscale, on seeded inputs over the whole range.

The uint8 models are TF's int8 models stored as uint8 on the same grids (``as_uint8``): TF's
converter no longer writes uint8 activations, Coral's DeepLab and other older models do.
"""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest
from litert_compare import compare, reference_interpreter

from qonnx_ingest.errors import ConversionWarning
from tflite2qonnx.api import convert
from tflite2qonnx.ops.exact.resize_uint8 import axis_weights

pytestmark = pytest.mark.keras

MODES = {"asymmetric": (False, False), "align_corners": (True, False), "half_pixel": (False, True)}
# 8 -> 29 with align_corners steps by 1/4 exactly, as Coral's DeepLab (33 -> 513) by 1/16:
# sums land on exact halves, where the rounding direction decides
SIZES = {"up_2x": (16, 16), "up_29": (29, 29), "up_odd": (13, 7), "down": (5, 3)}
CASES = [(mode, size) for mode in MODES for size in SIZES]


@pytest.fixture(scope="module")
def int8_models() -> dict[tuple[str, str], bytes]:
    from tf_models import OpCase, _fn, build_tflite

    models = {}
    for mode, size in CASES:
        align, half = MODES[mode]
        case = OpCase(
            "RESIZE_BILINEAR",
            _fn(
                lambda tf, x, a=align, h=half, s=SIZES[size]: tf.compat.v1.image.resize_bilinear(
                    x, s, align_corners=a, half_pixel_centers=h
                )
            ),
        )
        seed = zlib.crc32(f"{mode}{size}".encode()) % 97
        models[mode, size] = build_tflite(case, True, seed=seed)
    return models


def _steps(data: bytes, dtype) -> np.ndarray:
    it = reference_interpreter(data)
    assert it.get_input_details()[0]["dtype"] == dtype
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConversionWarning)  # nothing left to a single rounding
        model = convert(data, bit_exact=True)
    pairs = compare(model, it, n_inputs=6)
    return np.concatenate([p.steps() for p in pairs])


@pytest.mark.parametrize("mode, size", CASES)
def test_int8_resize_bilinear_equals_builtin(int8_models, mode: str, size: str) -> None:
    steps = _steps(int8_models[mode, size], np.int8)
    assert steps.size and np.all(steps == 0), f"{np.mean(steps != 0):.4%} differ"


@pytest.mark.parametrize("mode, size", CASES)
def test_uint8_resize_bilinear_equals_builtin(int8_models, mode: str, size: str) -> None:
    from test_bit_exact_reduce import as_uint8

    data = as_uint8(int8_models[mode, size])
    steps = _steps(data, np.uint8)
    assert steps.size and np.all(steps == 0), f"{np.mean(steps != 0):.4%} differ"


def test_uint8_weights_follow_the_kernels_float32_steps() -> None:
    """Hand-derived: 33 -> 513 with align_corners (DeepLab's last resize) steps by 1/16
    exactly; half-pixel 2 -> 4 starts at -0.25 (both corners row 0, weights 1.25 and -0.25)
    and ends at 1.25 (both corners row 1)."""
    lower, upper, w_lower, w_upper = axis_weights(33, 513, True, False)
    assert (lower[17], upper[17], w_lower[17], w_upper[17]) == (1, 2, 0.9375, 0.0625)
    assert (lower[-1], upper[-1], w_upper[-1]) == (32, 32, 0.0)
    lower, upper, w_lower, w_upper = axis_weights(2, 4, False, True)
    assert list(lower) == [0, 0, 0, 1] and list(upper) == [0, 1, 1, 1]
    assert list(w_lower) == [1.25, 0.75, 0.25, 0.75] and list(w_upper) == [-0.25, 0.25, 0.75, 0.25]
