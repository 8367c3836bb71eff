"""qonnx_ingest.targets.hls4ml_ties: whether sum k_i * a_i + b can be an integer plus one half,
hand-derived cases and an enumeration of every integer vector on small ones."""

from __future__ import annotations

import itertools
from fractions import Fraction as F

import numpy as np
import pytest

from qonnx_ingest.targets.hls4ml_ties import lattice, tie_reachable


def test_lattice_is_the_gcd_of_the_coefficients():
    assert lattice([F(1, 2), F(3, 4)]) == (F(1, 4), [2, 3])
    assert lattice([F(0), F(0)]) == (F(0), [0, 0])


@pytest.mark.parametrize(
    "coefficients, offset, k_low, k_high, tie",
    [
        ([F(1, 2)], 0, 0, 3, True),  # k = 1: 1/2
        ([F(1, 2)], 0, 0, 0, False),  # only 0
        ([F(1, 2)], 0, -2, 0, True),  # k = -1: -1/2 is a tie too
        ([F(1, 3)], 0, -100, 100, False),  # k/3: an odd denominator is never a half
        ([F(1, 4)], F(1, 4), 1, 1, True),  # (1 + 1) / 4
        ([F(1, 4)], F(1, 4), 2, 4, False),  # 3/4, 1, 5/4
        ([F(1, 4)], F(1, 4), 2, 5, True),  # 6/4
        ([F(1, 2), F(1, 2)], F(1, 2), 0, 0, True),  # k1 + k2 even: 0 + 1/2
        ([F(1, 2), F(1, 2)], F(1, 2), 1, 1, True),  # 1 + 1/2
        ([F(2, 3), F(4, 3)], 0, -50, 50, False),  # thirds only
        ([], F(5, 2), 0, 0, True),  # a constant tie
        ([], F(5, 3), 0, 0, False),
    ],
)
def test_hand_derived_cases(coefficients, offset, k_low, k_high, tie):
    assert tie_reachable(coefficients, F(offset), k_low, k_high) is tie


def _enumerated(coefficients, offset, k_low, k_high) -> bool:
    for ks in itertools.product(range(k_low, k_high + 1), repeat=len(coefficients)):
        value = sum((k * c for k, c in zip(ks, coefficients, strict=True)), F(offset))
        if (value - F(1, 2)).denominator == 1:
            return True
    return False


def test_no_tie_is_a_proof_on_random_small_cases():
    """Never "no tie" where enumerating every integer vector finds one; with one coefficient
    (every lattice point in the bounds is reached) the two agree exactly."""
    rng = np.random.default_rng(3)
    disagreements = 0
    for _ in range(300):
        n = int(rng.integers(1, 3))
        coefficients = [
            F(int(rng.integers(-6, 7)), int(rng.choice([1, 2, 3, 4, 6, 8]))) for _ in range(n)
        ]
        offset = F(int(rng.integers(-8, 9)), int(rng.choice([1, 2, 4, 5, 8])))
        k_low = int(rng.integers(-4, 1))
        k_high = int(rng.integers(0, 5))
        found = _enumerated(coefficients, offset, k_low, k_high)
        claimed = tie_reachable(coefficients, offset, k_low, k_high)
        assert claimed or not found, (coefficients, offset, k_low, k_high)
        if n == 1:
            assert claimed == found, (coefficients, offset, k_low, k_high)
        disagreements += claimed != found
    assert disagreements < 60  # conservative, not useless


def test_float32_scales_with_an_odd_mantissa_never_tie():
    """Nine int8 products times float32(0.1) / float32(0.3) = 13421773 / (8 * 5033165): a tie
    needs the integer sum times 13421773 to be an odd multiple of 4 * 5033165, so the sum a
    multiple of 5033165 (the two are coprime), far beyond 9 * 128."""
    a = F(float(np.float32(0.1))) / F(float(np.float32(0.3)))
    assert a == F(13421773, 8 * 5033165)
    assert not tie_reachable([a] * 9, F(0), -128, 127)
