"""More one-input int8 / uint8 kernels as 256-entry tables (see ``exact_tables``): EXP and ELU
(a float function through PopulateLookupTable / LUTPopulate, with the C library's expf), ABS
(``|q - zp_in|`` requantized by the 32-bit MultiplyByQuantizedMultiplier)."""

from __future__ import annotations

import numpy as np

from tflite2qonnx.fixed_point import Grid, quantize_multiplier
from tflite2qonnx.ops.exact_lut import c_float_fn
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
