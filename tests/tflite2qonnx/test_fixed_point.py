"""TFLite's QuantizeMultiplier as fixed_point computes it, against values derived by hand."""

from __future__ import annotations

import numpy as np
import pytest

from tflite2qonnx.fixed_point import quantize_multiplier
from tflite2qonnx.model import ScaleRangeError


@pytest.mark.parametrize(
    "real, expected",
    [
        (0.5, (1 << 30, 0)),  # 0.5 = 2^30 * 2^(0 - 31)
        (1.0, (1 << 30, 1)),
        (0.75, (3 << 29, 0)),
        (-0.5, (-(1 << 30), 0)),
        (0.0, (0, 0)),  # LEAKY_RELU's alpha 0
        (2.0**-40, (0, 0)),  # shift below -31: the kernel's zero multiplier
        (2.0**40, ((1 << 31) - 1, 30)),  # shift above 30 saturates
    ],
)
def test_quantize_multiplier_matches_hand_derived_pairs(real: float, expected) -> None:
    assert quantize_multiplier(real) == expected


@pytest.mark.parametrize("real", [float("inf"), float("-inf"), float("nan"), 1e-40, -1e-45])
def test_quantize_multiplier_refuses_infinite_nan_and_denormal(real: float) -> None:
    with pytest.raises(ScaleRangeError, match="is not a finite, normal number"):
        quantize_multiplier(real)


def test_smallest_normal_float32_multiplier_is_accepted() -> None:
    assert quantize_multiplier(float(np.finfo(np.float32).tiny)) == (0, 0)
