"""More one-input int8 / uint8 kernels as 256-entry tables (see ``exact_tables``): EXP, ELU and
GELU (a float function through PopulateLookupTable / LUTPopulate, with the C library's expf,
tanhf, erf), ABS
(``|q - zp_in|`` requantized by the 32-bit MultiplyByQuantizedMultiplier)."""

from __future__ import annotations

import ctypes

import numpy as np

from tflite2qonnx.fixed_point import Grid, quantize_multiplier
from tflite2qonnx.ops.exact_lut import _libm, c_float_fn
from tflite2qonnx.ops.exact_tables import _clamp, _float_table, multiply_by_quantized_multiplier

_F32 = np.float32

exp_table = _float_table(lambda x: c_float_fn("expf", x))


def _elu(x: np.ndarray) -> np.ndarray:
    """``value < 0 ? std::exp(value) - 1.0f : value``, in float32."""
    return np.where(x < 0, (c_float_fn("expf", x) - _F32(1.0)).astype(_F32), x).astype(_F32)


elu_table = _float_table(_elu)


def abs_table(q: np.ndarray, g_in: Grid, g_out: Grid) -> np.ndarray:
    """AbsEvalQuantized: ``|q - zp_in|``, rescaled where the scales differ by the multiplier of
    the float32 quotient ``s_in / s_out``, plus zp_out, clamped."""
    value = np.abs(q - g_in.zero_point)
    if _F32(g_in.scale) == _F32(g_out.scale):
        return _clamp(value + g_out.zero_point, g_out)
    m0, shift = quantize_multiplier(float(_F32(g_in.scale) / _F32(g_out.scale)))
    return _clamp(
        multiply_by_quantized_multiplier(value, int(m0), int(shift)) + g_out.zero_point, g_out
    )


def _c_erf(x: np.ndarray) -> np.ndarray:
    """The C library's double erf on each value (GELU's table calls std::erf on a double)."""
    fn = _libm().erf
    fn.restype, fn.argtypes = ctypes.c_double, [ctypes.c_double]
    return np.array([fn(float(v)) for v in np.ravel(x)], np.float64).reshape(np.shape(x))


def _gelu(x: np.ndarray) -> np.ndarray:
    """``0.5f * x * (1.f + std::erf(x * M_SQRT1_2))``: M_SQRT1_2 is a double, so everything
    after ``0.5f * x`` (float32) is double, rounded to float32 on return."""
    half_x = (_F32(0.5) * x).astype(np.float64)
    erf = _c_erf(x.astype(np.float64) * np.sqrt(0.5))
    return (half_x * (1.0 + erf)).astype(_F32)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    """``0.5f * x * (1.f + tanhf(k * (x + 0.044715f * x * x * x)))`` in float32, with k the
    float32 of sqrt(2 / pi) (computed in double)."""
    k = _F32(2.0 / np.sqrt(np.pi) * np.sqrt(0.5))
    cube = (((_F32(0.044715) * x).astype(_F32) * x).astype(_F32) * x).astype(_F32)
    inner = (k * (x + cube).astype(_F32)).astype(_F32)
    t = c_float_fn("tanhf", inner)
    return ((_F32(0.5) * x).astype(_F32) * (_F32(1.0) + t).astype(_F32)).astype(_F32)


gelu_table = _float_table(_gelu)
gelu_tanh_table = _float_table(_gelu_tanh)
