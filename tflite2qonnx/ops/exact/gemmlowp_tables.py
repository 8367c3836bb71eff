"""gemmlowp's int16 fixed-point logistic and tanh, tabulated over every int16 input.

TFLite's integer LSTM kernel (8x8_16) applies ``gemmlowp::logistic`` to its Q3.12 gates and
``gemmlowp::tanh`` to Q3.12 gates and the Q(15+cs).(-cs) cell state, with Q0.15 outputs. Those
are polynomial / Newton-Raphson approximations evaluated in int16 fixed point (rounding
doubling high multiplies, wrapping adds), a few steps off the true function here and there.
Evaluating the same integer steps once per possible input (numpy, vectorized) gives a table a
Gather reads, so the converted graph computes the kernel's exact outputs.
"""

from __future__ import annotations

from functools import cache

import numpy as np

I16_MIN, I16_MAX = -32768, 32767


def _wrap(x: np.ndarray) -> np.ndarray:
    """int16 wrap-around of an int64 array (C++'s conversion of an int sum to int16)."""
    return ((x + 32768) % 65536) - 32768


def _sat(x: np.ndarray) -> np.ndarray:
    return np.clip(x, I16_MIN, I16_MAX)


def _mul(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul for int16 (C++ division truncates toward zero)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    q = np.trunc((ab + nudge) / (1 << 15)).astype(np.int64)
    return np.where((a == I16_MIN) & (b == I16_MIN), I16_MAX, q)


def _rdivpot(x: np.ndarray, exponent: int) -> np.ndarray:
    """RoundingDivideByPOT: round half away from zero."""
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def _mul_pot(x: np.ndarray, exponent: int) -> np.ndarray:
    """SaturatingRoundingMultiplyByPOT."""
    if exponent > 0:
        return _sat(x * (1 << exponent))
    return _rdivpot(x, -exponent) if exponent < 0 else x


def _const(int32_value: int) -> int:
    """A gemmlowp constant given as int32 raw, rescaled to int16 (rounding shift by 16)."""
    return int(_rdivpot(np.array(int32_value, np.int64), 16))


def _exp_quarter(a: np.ndarray) -> np.ndarray:
    """exp on [-1/4, 0), F0 in and out."""
    constant_term, one_third = _const(1895147668), _const(715827883)
    x = _wrap(a + (1 << 12))
    x2 = _mul(x, x)
    x3 = _mul(x2, x)
    x4 = _mul(x2, x2)
    x4_over_4 = _mul_pot(x4, -2)
    inner = _mul_pot(_wrap(_mul(_wrap(x4_over_4 + x3), one_third) + x2), -1)
    return _sat(constant_term + _mul(constant_term, _wrap(x + inner)))


_BARREL = {-2: 1672461947, -1: 1302514674, 0: 790015084, 1: 290630308, 2: 39332535,
           3: 720401, 4: 242}  # fmt: skip


def _exp_negative(a: np.ndarray, integer_bits: int) -> np.ndarray:
    """exp_on_negative_values for a FixedPoint<int16, integer_bits> input; F0 out."""
    fractional = 15 - integer_bits
    quarter = 1 << (fractional - 2)
    a_mod = _wrap((a & (quarter - 1)) - quarter)
    result = _exp_quarter(_mul_pot(a_mod, integer_bits))
    remainder = _wrap(a_mod - a)
    for exponent, multiplier in _BARREL.items():
        if integer_bits > exponent:
            bit = (remainder & (1 << (fractional + exponent))) != 0
            result = np.where(bit, _mul(result, _const(multiplier)), result)
    if integer_bits > 5:
        clamp = _const(-(1 << (36 - integer_bits)))
        result = np.where(a < clamp, 0, result)
    return np.where(a == 0, I16_MAX, result)


def _newton(a: np.ndarray) -> np.ndarray:
    """The shared Newton-Raphson reciprocal of (1 + a) / 2, as F2."""
    half_denominator = (a + I16_MAX + np.where(a + I16_MAX >= 0, 1, -1)) // 1
    half_denominator = np.trunc(half_denominator / 2).astype(np.int64)
    c48, c_neg32, one = _const(1515870810), _const(-1010580540), 1 << 13
    x = _wrap(c48 + _mul(half_denominator, c_neg32))
    for _ in range(3):
        step = _wrap(one - _mul(half_denominator, x))
        x = _wrap(x + _mul_pot(_mul(x, step), 2))
    return x


def logistic(raw: np.ndarray, integer_bits: int) -> np.ndarray:
    """gemmlowp::logistic: FixedPoint<int16, integer_bits> raw -> Q0.15 raw."""
    a = np.asarray(raw, np.int64)
    abs_input = np.where(a > 0, a, _wrap(-a))
    positive = _mul_pot(_newton(_exp_negative(_wrap(-abs_input), integer_bits)), 1)
    negative = _wrap(I16_MAX - positive)
    return np.where(a == 0, _const(1 << 30), np.where(a > 0, positive, negative))


def tanh(raw: np.ndarray, integer_bits: int) -> np.ndarray:
    """gemmlowp::tanh: FixedPoint<int16, integer_bits> raw -> Q0.15 raw."""
    a = np.asarray(raw, np.int64)
    n = np.where(a < 0, a, _wrap(-a))
    # ExactMulByPot<1>: the same raw read with one more integer bit
    t = _mul_pot(_wrap(_newton(_exp_negative(n, integer_bits + 1)) - (1 << 13)), 2)
    return np.where(a == 0, 0, np.where(a < 0, _wrap(-t), t))


@cache
def table(kind: str, integer_bits: int) -> np.ndarray:
    """float32 outputs (raw * 2^-15) of ``kind`` for the int16 inputs -32768..32767."""
    raw = np.arange(I16_MIN, I16_MAX + 1, dtype=np.int64)
    out = (logistic if kind == "logistic" else tanh)(raw, integer_bits)
    return (out.astype(np.float64) * 2.0**-15).astype(np.float32)
