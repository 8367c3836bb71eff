"""Quantizer rules for what only qkeras-v3 has: ``quantized_linear`` and ``quantized_bits``'s
``post_training_scale``. Registered in ``quantizers.QUANTIZERS`` like every other rule, and
proved against QKeras by ``quantizer_proof`` like them.

* quantized_linear (s = alpha * 2**(integer - bits + keep_negative), alpha None -> 1):
  ``s * round(clip(x / s, lo, hi))`` with lo = -2**(bits-keep_negative) + symmetric (0 if
  unsigned), hi = 2**(bits-keep_negative) - 1, tf.round half to even. Clipping to integer
  bounds before rounding equals rounding then clipping, so this is Quant(scale=s, ROUND),
  narrow when symmetric. A numeric alpha divides *before* rounding, so unlike quantized_bits it
  is exact on activations too. alpha 'auto'/'auto_po2' derive s from the data: weights only,
  s read back from QKeras. 1 bit signed uses a shifted sign whose tiny negative inputs round
  to +s/2: refused.
* quantized_bits(alpha='auto'|'auto_po2', post_training_scale=p): a frozen scale, so
  ``p*m_i/m * sign(x) * min(floor(|x| / (p*m_i/m) + 0.5), 2**(bits-1) - 1)``: a narrow signed
  Quant with HALF_UP rounding, on weights and activations.

No TensorFlow import here; this module must not import ``quantizers`` (which imports it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from qkeras2qonnx.emit.spec import QUANT, QuantSpec
from qkeras2qonnx.environment.backend import qkeras_call
from qonnx_ingest.errors import ConversionError


def quantized_linear(q: Any, weight: np.ndarray | None, where: str) -> QuantSpec:
    bits, integer = int(q.bits), float(q.integer)
    keep_negative = bool(q.keep_negative)
    symmetric = q.symmetric
    noise = float(q.qnoise_factor)
    if noise != 1.0:
        raise ConversionError(
            f"{_name(q)}: qnoise_factor={noise:g} mixes unquantized values into the output", where
        )
    if symmetric not in (0, 1):
        raise ConversionError(f"{_name(q)}: symmetric={symmetric!r} is not 0 or 1", where)
    if bits - keep_negative <= 0 or bits < 2:
        raise ConversionError(
            f"{_name(q)}: {bits}-bit quantized_linear rounds a shifted sign (tiny negative "
            "inputs give +scale/2), which no QONNX node computes exactly",
            where,
        )
    step = 2.0 ** (integer - bits + keep_negative)
    if isinstance(q.alpha, str):
        if weight is None:
            raise ConversionError(
                f"{_name(q)}: alpha={q.alpha!r} derives the scale from each input at run time; "
                "only weight quantizers (fixed data) can be converted",
                where,
            )
        _, scale = qkeras_call(q, weight)  # QKeras's ``scale`` is the scale over the step
        scale = np.asarray(scale, dtype=np.float64) * step
    elif q.alpha is None:
        scale = np.asarray(step)
    else:
        alpha = np.asarray(q.alpha, dtype=np.float64)
        if not np.all(np.isfinite(alpha)) or np.any(alpha <= 0):
            raise ConversionError(f"{_name(q)}: alpha must be finite and > 0", where)
        scale = alpha * step
    return QuantSpec(
        QUANT,
        scale,
        bit_width=bits,
        signed=keep_negative,
        narrow=bool(keep_negative and symmetric),
        rounding_mode="ROUND",
    )


def post_training_scale(q: Any, step: float, where: str) -> QuantSpec:
    """quantized_bits with a frozen ``post_training_scale`` (``step`` = m_i / m)."""
    scale = np.asarray(q.post_training_scale, dtype=np.float64) * step
    if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        raise ConversionError(f"{_name(q)}: post_training_scale must be finite and > 0", where)
    if int(q.bits) < 2:
        raise ConversionError(f"{_name(q)}: post_training_scale needs bits >= 2", where)
    return QuantSpec(QUANT, scale, bit_width=int(q.bits), narrow=True, rounding_mode="HALF_UP")


def _name(q: Any) -> str:
    try:
        return str(q)
    except Exception:  # qkeras-v3's quantized_linear.__str__ fails for a numeric alpha
        return type(q).__name__
