"""The tables of --bit-exact's one-input int8 / uint8 kernels: TFLite's arithmetic in numpy.

Each ``*_table(q_in, g_in, g_out)`` maps every stored input integer to the stored output integer
exactly as the builtin kernel does (``tflite2qonnx.ops.exact.table_gather`` turns it into a Gather):

* LOGISTIC, TANH: the kernels' own float tables (LUTPopulate): ``round(f(s_in * (q - zp)) /
  s_out) + zp_out`` in float32, f with the C library's expf / tanhf.
* HARD_SWISH: reference_ops::HardSwish, int16 fixed point.
* LEAKY_RELU: reference_ops::QuantizeLeakyRelu, one 32-bit multiplier per sign.
* RELU, RELU6, RELU_N1_TO_1, RELU_0_TO_1: QuantizedReluX (requantize, then clamp).
* QUANTIZE between integer grids: reference_ops::Requantize.
* uint8 CONCATENATION's rescaled inputs: ConcatenationWithScaling's float32 affine map.

The multipliers are derived with the precision each Prepare uses (float32 where it divides
floats, double where it casts first); the tests pin each against the interpreter.
"""

from __future__ import annotations

import numpy as np

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.fixed_point import Grid, quantize_multiplier
from tflite2qonnx.ops.exact.table_gather import c_float_fn

_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
_F32 = np.float32


# ---------------------------------------------------------------------- gemmlowp in numpy
def srdhm(a: np.ndarray, b: int, bits: int = 32) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul for int32 (or int16) values, elementwise."""
    a = np.asarray(a, np.int64)
    ab = a * int(b)
    nudge = np.where(ab >= 0, 1 << (bits - 2), 1 - (1 << (bits - 2)))
    num = ab + nudge
    q = np.abs(num) >> (bits - 1)  # C's division truncates toward zero
    res = np.where(num < 0, -q, q)
    lo = -(1 << (bits - 1))
    return np.where((a == lo) & (b == lo), (1 << (bits - 1)) - 1, res)


def rounding_divide_by_pot(x: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp's RoundingDivideByPOT: round half away from zero at 2^exponent."""
    x = np.asarray(x, np.int64)
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def multiply_by_quantized_multiplier(x: np.ndarray, m0: int, shift: int) -> np.ndarray:
    """TFLite's 32-bit MultiplyByQuantizedMultiplier (double rounding)."""
    left, right = max(shift, 0), max(-shift, 0)
    shifted = np.clip(np.asarray(x, np.int64) * (1 << left), _I32_MIN, _I32_MAX)
    return rounding_divide_by_pot(srdhm(shifted, m0), right)


def clamp_to_grid(q: np.ndarray, g: Grid) -> np.ndarray:
    """Saturate stored integers to ``g``'s integer type."""
    lo = -(1 << (g.bits - 1)) if g.signed else 0
    return np.clip(q, lo, lo + (1 << g.bits) - 1)


def std_round(x: np.ndarray) -> np.ndarray:
    """std::round / TfLiteRound of float32 values (exact in float64)."""
    x = np.asarray(x, np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


# ---------------------------------------------------------------------- the kernels
def float_table(fn):
    """A table kernel that evaluates ``fn`` in float32 on each dequantized input and rounds."""

    def table(q: np.ndarray, g_in: Grid, g_out: Grid) -> np.ndarray:
        x = (_F32(g_in.scale) * (q - g_in.zero_point).astype(_F32)).astype(_F32)
        y = fn(x).astype(_F32)
        inverse = _F32(1.0) / _F32(g_out.scale)
        rescaled = std_round((y * inverse).astype(_F32))
        return clamp_to_grid(rescaled.astype(np.int64) + g_out.zero_point, g_out)

    return table


logistic_table = float_table(
    lambda x: (_F32(1.0) / (_F32(1.0) + c_float_fn("expf", -x))).astype(_F32)
)
tanh_table = float_table(lambda x: c_float_fn("tanhf", x))


def _multiplier(real: float) -> tuple[int, int]:
    m0, shift = quantize_multiplier(real)
    return int(m0), int(shift)


def requantize_table(q: np.ndarray, g_in: Grid, g_out: Grid) -> np.ndarray:
    """Requantize: ``MultiplyByQuantizedMultiplier(q - zp_in, s_in / s_out) + zp_out``; the
    ratio in double (QuantizeMultiplier of a double quotient)."""
    m0, shift = _multiplier(float(_F32(g_in.scale)) / float(_F32(g_out.scale)))
    y = multiply_by_quantized_multiplier(q - g_in.zero_point, m0, shift) + g_out.zero_point
    return clamp_to_grid(y, g_out)


def relu_table(act_min: float, act_max: float):
    """QuantizedReluX: requantize with the float32 ratio s_in / s_out, then clamp to the
    activation range rounded onto the output grid (roundf of a float32 quotient)."""

    def table(q: np.ndarray, g_in: Grid, g_out: Grid) -> np.ndarray:
        m0, shift = _multiplier(float(_F32(g_in.scale) / _F32(g_out.scale)))
        y = multiply_by_quantized_multiplier(q - g_in.zero_point, m0, shift) + g_out.zero_point
        y = clamp_to_grid(y, g_out)
        y = np.maximum(y, g_out.zero_point + int(std_round(_F32(act_min) / _F32(g_out.scale))))
        if np.isfinite(act_max):
            hi = g_out.zero_point + int(std_round(_F32(act_max) / _F32(g_out.scale)))
            y = np.minimum(y, hi)
        return clamp_to_grid(y, g_out)

    return table


def leaky_relu_table(alpha: float):
    """QuantizeLeakyRelu: identity and alpha multipliers from float32 products / quotients."""

    def table(q: np.ndarray, g_in: Grid, g_out: Grid) -> np.ndarray:
        s_in, s_out = _F32(g_in.scale), _F32(g_out.scale)
        m_id, sh_id = _multiplier(float(s_in / s_out))
        m_a, sh_a = _multiplier(float(s_in * _F32(alpha) / s_out))
        x = q - g_in.zero_point
        pos = multiply_by_quantized_multiplier(x, m_id, sh_id)
        neg = multiply_by_quantized_multiplier(x, m_a, sh_a)
        return clamp_to_grid(np.where(x >= 0, pos, neg) + g_out.zero_point, g_out)

    return table


def concat_rescale_table(q: np.ndarray, g_in: Grid, g_out: Grid) -> np.ndarray:
    """ConcatenationWithScaling (uint8): ``round(q * scale + bias) + zp_out`` in float32."""
    scale = _F32(_F32(g_in.scale) * (_F32(1.0) / _F32(g_out.scale)))
    bias = _F32(_F32(-g_in.zero_point) * scale)
    value = ((q.astype(_F32) * scale).astype(_F32) + bias).astype(_F32)
    return clamp_to_grid(std_round(value).astype(np.int64) + g_out.zero_point, g_out)


def _int16_multiplier(real: float) -> tuple[int, int]:
    """QuantizeMultiplier, then DownScaleInt32ToInt16Multiplier."""
    m0, exponent = _multiplier(real)
    if m0 >= _I32_MAX - (1 << 15):
        return (1 << 15) - 1, exponent
    return (m0 + (1 << 15)) >> 16, exponent


def _saturate16(x: np.ndarray) -> np.ndarray:
    return np.clip(x, -(1 << 15), (1 << 15) - 1)


def hard_swish_table(q: np.ndarray, g_in: Grid, g_out: Grid) -> np.ndarray:
    """reference_ops::HardSwish: x on a 2^-7 finer input grid, a "reluish" gate in [0, 1] as
    int16 fixed point, their truncating doubling high product, shifted to the output grid."""
    hires_scale = _F32(1.0 / 128.0) * _F32(g_in.scale)
    out_m, out_e = _int16_multiplier(float(hires_scale / _F32(g_out.scale)))
    relu_m, relu_e = _int16_multiplier(float(hires_scale / _F32(3.0 / 32768.0)))
    if out_e > 0:  # HardSwishPrepare requires it
        raise ConversionError("bit_exact: HARD_SWISH's output multiplier is >= 1")
    x = (q - g_in.zero_point) * 128
    preshift = srdhm(x, out_m, bits=16)
    reluish = x
    if relu_e > 0:
        reluish = _saturate16(reluish * (1 << (relu_e - 1)))
    reluish = srdhm(reluish, relu_m, bits=16)
    if relu_e > 0:
        reluish = _saturate16(reluish * 2)
    if relu_e < 0:
        reluish = rounding_divide_by_pot(reluish, -relu_e)
    reluish = (reluish + (1 << 15)) >> 1
    product = reluish * preshift  # SaturatingDoublingHighMul: truncating division by 2^15
    high = np.where(product < 0, -(np.abs(product) >> 15), product >> 15)
    high = np.where((reluish == -(1 << 15)) & (preshift == -(1 << 15)), (1 << 15) - 1, high)
    y = rounding_divide_by_pot(high, -out_e) + g_out.zero_point
    return clamp_to_grid(y, g_out)
