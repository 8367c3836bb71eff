"""More one-input int8 / uint8 kernels as 256-entry tables (see ``exact_tables``): EXP, LOG, ELU
and GELU (a float function through PopulateLookupTable / LUTPopulate, with the C library's expf,
logf, tanhf, erf), RSQRT (gemmlowp's fixed-point inverse square root) and ABS
(``|q - zp_in|`` requantized by the 32-bit MultiplyByQuantizedMultiplier)."""

from __future__ import annotations

import ctypes

import numpy as np

from tflite2qonnx.fixed_point import Grid, quantize_multiplier
from tflite2qonnx.ops.exact.int8_tables import (
    clamp_to_grid,
    float_table,
    multiply_by_quantized_multiplier,
    rounding_divide_by_pot,
)
from tflite2qonnx.ops.exact.table_gather import c_float_fn, libm

_F32 = np.float32
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1

exp_table = float_table(lambda x: c_float_fn("expf", x))


_log_positive = float_table(lambda x: c_float_fn("logf", np.where(x > 0, x, _F32(1.0))))


def log_table(q: np.ndarray, g_in: Grid, g_out: Grid) -> np.ndarray:
    """LOG: logf of each stored input's real value, requantized as every float table is. At
    x <= 0 (logf gives -inf or NaN) the kernel's float-to-int conversion yields INT_MIN,
    which clamps to the lowest output integer."""
    lowest = -(1 << (g_out.bits - 1)) if g_out.signed else 0
    positive = (np.asarray(q, np.int64) - g_in.zero_point) > 0
    return np.where(positive, _log_positive(q, g_in, g_out), lowest)


def _elu(x: np.ndarray) -> np.ndarray:
    """``value < 0 ? std::exp(value) - 1.0f : value``, in float32."""
    return np.where(x < 0, (c_float_fn("expf", x) - _F32(1.0)).astype(_F32), x).astype(_F32)


elu_table = float_table(_elu)


def abs_table(q: np.ndarray, g_in: Grid, g_out: Grid) -> np.ndarray:
    """AbsEvalQuantized: ``|q - zp_in|``, rescaled where the scales differ by the multiplier of
    the float32 quotient ``s_in / s_out``, plus zp_out, clamped."""
    value = np.abs(q - g_in.zero_point)
    if _F32(g_in.scale) == _F32(g_out.scale):
        return clamp_to_grid(value + g_out.zero_point, g_out)
    m0, shift = quantize_multiplier(float(_F32(g_in.scale) / _F32(g_out.scale)))
    return clamp_to_grid(
        multiply_by_quantized_multiplier(value, int(m0), int(shift)) + g_out.zero_point, g_out
    )


def _c_erf(x: np.ndarray) -> np.ndarray:
    """The C library's double erf on each value (GELU's table calls std::erf on a double)."""
    fn = libm().erf
    fn.restype, fn.argtypes = ctypes.c_double, [ctypes.c_double]
    return np.array([fn(float(v)) for v in np.ravel(x)], np.float64).reshape(np.shape(x))


def gelu_erf(x: np.ndarray) -> np.ndarray:
    """``0.5f * x * (1.f + std::erf(x * M_SQRT1_2))``: M_SQRT1_2 is a double, so everything
    after ``0.5f * x`` (float32) is double, rounded to float32 on return."""
    half_x = (_F32(0.5) * x).astype(np.float64)
    erf = _c_erf(x.astype(np.float64) * np.sqrt(0.5))
    return (half_x * (1.0 + erf)).astype(_F32)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """``0.5f * x * (1.f + tanhf(k * (x + 0.044715f * x * x * x)))`` in float32, with k the
    float32 of sqrt(2 / pi) (computed in double)."""
    k = _F32(2.0 / np.sqrt(np.pi) * np.sqrt(0.5))
    cube = (((_F32(0.044715) * x).astype(_F32) * x).astype(_F32) * x).astype(_F32)
    inner = (k * (x + cube).astype(_F32)).astype(_F32)
    t = c_float_fn("tanhf", inner)
    return ((_F32(0.5) * x).astype(_F32) * (_F32(1.0) + t).astype(_F32)).astype(_F32)


gelu_table = float_table(gelu_erf)
gelu_tanh_table = float_table(gelu_tanh)


def srdhm_arrays(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul of two int32 arrays (C division truncates)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    num = a * b + np.where(a * b >= 0, 1 << 30, 1 - (1 << 30))
    q = np.abs(num) >> 31
    return np.where((a == _I32_MIN) & (b == _I32_MIN), _I32_MAX, np.where(num < 0, -q, q))


def saturating_left_shift(x: np.ndarray, exponent: int) -> np.ndarray:
    """SaturatingRoundingMultiplyByPOT<exponent > 0>: a left shift saturating to int32."""
    threshold = (1 << (31 - exponent)) - 1
    return np.where(x > threshold, _I32_MAX, np.where(x < -threshold, _I32_MIN, x << exponent))


def _inv_sqrt(value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GetInvSqrtQuantizedMultiplierExp(value, kReverseShift = -1) for 2 <= value < 2^29:
    five Newton-Raphson steps in gemmlowp's Q3.28, times sqrt(2) / 2."""
    value = np.asarray(value, np.int64)
    clz = 32 - np.floor(np.log2(value)).astype(np.int64) - 1  # exact below 2^29
    pairs = (clz - 1) // 2 - 1
    shift = 11 - pairs
    x_in = value << (2 * pairs)
    half_input = rounding_divide_by_pot(x_in >> 1, 1)
    half_three = np.int64((1 << 28) + (1 << 27))
    x = np.full_like(value, 1 << 28)
    for _ in range(5):
        x3 = saturating_left_shift(srdhm_arrays(srdhm_arrays(x, x), x), 6)
        x = saturating_left_shift(srdhm_arrays(half_three, x) - srdhm_arrays(half_input, x3), 3)
    x = srdhm_arrays(x, np.int64(1518500250))
    x = np.where(shift < 0, x << np.maximum(-shift, 0), x)
    return x, -np.maximum(shift, 0)


def rsqrt_table(q: np.ndarray, g_in: Grid, g_out: Grid) -> np.ndarray:
    """RsqrtEvalQuantized (int8): 1 / sqrt(q - zp_in) as a fixed-point multiplier applied to
    1 << 20, requantized by ``1 / (sqrtf(s_in) * s_out)`` (float32 product, double quotient);
    0 gives the largest output. Inputs below zp_in make the kernel fail (it refuses negative
    values), so their entries are never read by a model the interpreter runs."""
    value = np.asarray(q, np.int64) - g_in.zero_point
    m0, shift = quantize_multiplier(1.0 / float(np.sqrt(_F32(g_in.scale)) * _F32(g_out.scale)))
    out = np.full(value.shape, (1 << (g_out.bits - 1)) - 1 if g_out.signed else 255, np.int64)
    for i in np.flatnonzero(value >= 1):
        if value[i] == 1:  # handled apart in the kernel: the largest multiplier, shift 0
            inv, inv_shift = _I32_MAX, 0
        else:
            inv_a, shift_a = _inv_sqrt(value[i : i + 1])
            inv, inv_shift = int(inv_a[0]), int(shift_a[0])
        data = multiply_by_quantized_multiplier(np.array([1]), inv, inv_shift + 20)
        y = multiply_by_quantized_multiplier(data, int(m0), int(shift) - 20)
        out[i] = int(y[0]) + g_out.zero_point
    return clamp_to_grid(out, g_out)
