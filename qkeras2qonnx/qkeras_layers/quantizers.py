"""Quantizer registry: QKeras quantizer class name -> the QuantSpec of one QONNX node.

Each rule reproduces the formula of QKeras 0.9's ``quantizers.py`` at inference and raises a
ConversionError naming layer and quantizer whenever one QONNX node cannot compute exactly the
same values. Adding a quantizer = one function here, one entry in ``QUANTIZERS``, one test.

Formulas (m = 2**(bits - keep_negative), m_i = 2**integer, x the input):

* quantized_bits, alpha None/1: ``m_i/m * clip(round(x * m/m_i), -m*keep_negative
  (+1 if symmetric), m-1)`` with tf.round = half-to-even, i.e. Quant(scale=m_i/m, ROUND).
  A numeric alpha multiplies *after* rounding, so the node is exact on weights (fixed data)
  only. alpha 'auto'/'auto_po2' derive a per-channel scale from the weights themselves and
  round half away from zero (``sign(x)*floor(|x|/s + 0.5)``), i.e. HALF_UP, to the narrow
  signed range; the scale is read back from QKeras after running it on the trained weights.
* quantized_relu: ``2**(integer-bits) * clip(round(x / 2**(integer-bits)), 0, 2**bits - 1)``.
* binary: ``alpha * (+1 if x >= 0 else -1)`` (alpha None applies tanh first, which keeps the
  sign), i.e. BipolarQuant.
* ternary: ``s * (|x| >= t) * sign(x)`` with q in {-1, 0, 1}: a 2-bit narrow signed Quant of
  scale s. On weights s is read back from QKeras (per channel for alpha 'auto'/'auto_po2') and
  the node is fed QKeras's ternary weights. On activations ``|x| >= t`` would need t == s/2 and
  round-half-up, but qonnx's HALF_UP (``floor(|x| + 0.5)`` in float32) rounds the float just
  below 0.5 up: a composite instead.
* binary(use_01=True): {0, alpha}; on weights a 2-bit unsigned Quant fed QKeras's values, on
  activations a composite.
* stochastic_binary / stochastic_ternary: their inference form is binary / ternary.
* quantized_tanh, quantized_sigmoid, quantized_hswish, ternary and quantized_relu with
  negative_slope on activations, and the binary_tanh / binary_sigmoid functions: a composite
  (exact standard ONNX ops, then an identity Quant), see ``exact_activations``.
* quantized_po2, quantized_relu_po2, quantized_ulaw: non-uniform grids with no single Quant
  form. On weights the rule returns a LOST spec (the weight becomes QKeras's quantized constant
  and a ``QuantizerAnnotationLost`` warning names layer and quantizer); on activations a
  composite that looks QKeras's float32 levels up, then an identity Quant (``exact_po2``).

QKeras layers silently switch a kernel quantizer with ``alpha=None`` to ``alpha='auto_po2'``
(``_set_trainable_parameter``), so the rules read the live quantizer object, never the config.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from qkeras2qonnx.emit.spec import BIPOLAR, LOST, QUANT, QuantSpec
from qkeras2qonnx.environment.backend import qkeras_call
from qkeras2qonnx.qkeras_layers import exact_activations, exact_po2, quantizers3
from qkeras2qonnx.qkeras_layers.activations import LINEAR, RELU, PlainActivation
from qonnx_ingest.errors import ConversionError, ConversionWarning


class QuantizerAnnotationLost(ConversionWarning):
    """A weight quantizer without a QONNX form was applied at conversion time: the weight is
    exact, but the model no longer says how it was quantized."""


Resolver = Callable[[Any, "np.ndarray | None", str], QuantSpec]


@dataclass(frozen=True)
class QuantizerRule:
    """How one quantizer class converts.

    ``resolve(quantizer, weight, where)`` gets the trained weight for weight quantizers and None
    for activation quantizers. ``activation`` is the plain Keras activation the stripped layer
    applies before the Quant node when the quantizer is used as an activation.
    """

    resolve: Resolver
    activation: PlainActivation
    # True for the quantizer objects this rule turns into a composite that reads the layer's
    # raw output (e.g. quantized_relu with negative_slope): their plain activation is linear.
    raw_input: Callable[[Any], bool] = lambda q: False

    def activation_for(self, quantizer: Any) -> PlainActivation:
        return LINEAR if self.raw_input(quantizer) else self.activation


def describe(quantizer: Any) -> str:
    """The quantizer as QKeras prints it, e.g. ``quantized_bits(6,0,0,alpha=1)``."""
    if inspect.isfunction(quantizer):
        return quantizer.__name__
    cls = type(quantizer)
    if cls.__str__ is not object.__str__:
        try:
            return str(quantizer)
        except Exception:  # a broken __str__ must not hide the real error
            pass
    return cls.__name__


def rule_for(quantizer: Any, where: str) -> QuantizerRule:
    if inspect.isfunction(quantizer) and quantizer.__name__ in exact_activations.FUNCTIONS:
        return QuantizerRule(exact_activations.FUNCTIONS[quantizer.__name__], LINEAR)
    rule = QUANTIZERS.get(type(quantizer).__name__)
    if type(quantizer).__name__ in RANDOM:
        raise ConversionError(f"{describe(quantizer)}: {RANDOM[type(quantizer).__name__]}", where)
    if rule is None or inspect.isfunction(quantizer):
        supported = ", ".join(sorted(QUANTIZERS))
        raise ConversionError(
            f"unsupported quantizer {describe(quantizer)} (supported: {supported})", where
        )
    return rule


# Quantizers whose inference output is random: no deterministic graph computes them.
RANDOM = {
    "bernoulli": "samples a random 0/1 at inference (tf.random.uniform against a sigmoid), "
    "so no deterministic ONNX graph computes it",
}


def makes_node(quantizer: Any) -> bool:
    """False for the non-uniform quantizers that never become a QONNX node (see LOST)."""
    rule = QUANTIZERS.get(type(quantizer).__name__)
    return rule is None or rule.resolve is not _non_uniform


def resolve(quantizer: Any, where: str, weight: np.ndarray | None = None) -> QuantSpec:
    """The QuantSpec of ``quantizer``; ``weight`` is the trained tensor for weight quantizers."""
    return rule_for(quantizer, where).resolve(quantizer, weight, where)


def _quantized_bits(q: Any, weight: np.ndarray | None, where: str) -> QuantSpec:
    config = q.get_config()
    _require_plain_noise(q, config, where)
    bits, integer = int(config["bits"]), float(config["integer"])
    keep_negative = bool(config["keep_negative"])
    symmetric = q.symmetric
    if symmetric not in (0, 1):  # QKeras adds it to the lower bound: only 0/1 make sense
        raise ConversionError(f"{describe(q)}: symmetric={symmetric!r} is not 0 or 1", where)
    m = 2.0 ** (bits - keep_negative)
    m_i = 2.0**integer
    if isinstance(q.alpha, str):
        if q.alpha not in ("auto", "auto_po2"):
            raise ConversionError(f"{describe(q)}: unknown alpha {q.alpha!r}", where)
        if getattr(q, "post_training_scale", None) is not None:  # qkeras-v3: a frozen scale
            return quantizers3.post_training_scale(q, m_i / m, where)
        _require_weight(q, weight, where, f"alpha={q.alpha!r}")
        if bits < 2:
            raise ConversionError(f"{describe(q)}: alpha={q.alpha!r} needs bits >= 2", where)
        _, qkeras_scale = qkeras_call(q, weight)
        # QKeras returns qkeras_scale * m_i * z / m with z in the narrow signed range.
        scale = qkeras_scale.astype(np.float64) * m_i / m
        # An all-zero channel gets scale 0 and output 0; any positive scale reproduces that.
        scale = np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)
        return QuantSpec(QUANT, scale, bit_width=bits, narrow=True, rounding_mode="HALF_UP")
    alpha = _alpha(q, where)
    if bits - keep_negative <= 0:  # 1-bit signed: sign(x) with 0 -> +1, times alpha
        return QuantSpec(BIPOLAR, alpha)
    if bits < 2:
        raise ConversionError(
            f"{describe(q)}: the 1-bit unsigned grid {{0, s}} has no QONNX Quant form "
            "(bit_width must be >= 2)",
            where,
        )
    if weight is None and not np.all(alpha == 1.0):
        raise ConversionError(
            f"{describe(q)}: QKeras multiplies by alpha after rounding, which one Quant node "
            "can express for weights but not for activations",
            where,
        )
    return QuantSpec(
        QUANT,
        alpha * (m_i / m),
        bit_width=bits,
        signed=keep_negative,
        narrow=bool(keep_negative and symmetric),
        rounding_mode="ROUND",
    )


def _quantized_relu(q: Any, weight: np.ndarray | None, where: str) -> QuantSpec:
    config = q.get_config()
    _require_plain_noise(q, config, where)
    if config.get("use_sigmoid"):
        if weight is not None:
            raise ConversionError(f"{describe(q)}: use_sigmoid on weights", where)
        return exact_activations.sigmoid_quantized_relu(q, where)
    if config.get("negative_slope"):
        if weight is not None:
            raise ConversionError(f"{describe(q)}: negative_slope on weights", where)
        return exact_activations.leaky_quantized_relu(q, where)
    bits, integer = int(config["bits"]), float(config["integer"])
    if bits == 1 and weight is None:  # a Quant needs 2 bits: the composite form
        return exact_activations.one_bit_quantized_relu(q, where)
    if bits < 2:
        raise ConversionError(f"{describe(q)}: 1-bit quantized_relu has no Quant form", where)
    scale = 2.0 ** (integer - bits)
    bit_width, narrow = bits, False
    bound = config.get("relu_upper_bound")
    # QKeras ignores relu_upper_bound while is_quantized_clip is set (the default).
    if bound and not getattr(q, "is_quantized_clip", True):
        bit_width, narrow = _relu_bound_range(q, float(bound), scale, bits, where)
    return QuantSpec(QUANT, scale, bit_width=bit_width, signed=False, narrow=narrow)


def _relu_bound_range(q: Any, bound: float, scale: float, bits: int, where: str):
    """An upper bound below the grid's top is a smaller unsigned range, if it is one."""
    top = bound / scale
    if top >= 2**bits - 1:
        return bits, False
    if top == round(top) and top >= 2:
        for extra, narrow in ((1, False), (2, True)):
            width = math.log2(top + extra)
            if width == round(width) and width >= 2:
                return int(width), narrow
    raise ConversionError(
        f"{describe(q)}: relu_upper_bound={bound:g} is not the top of an unsigned integer "
        f"range on the grid of step {scale:g}",
        where,
    )


def _binary(q: Any, weight: np.ndarray | None, where: str) -> QuantSpec:
    config = q.get_config()
    if config.get("use_01"):
        if weight is None:  # {0, alpha} with 0 -> alpha: a comparison, not a rounding
            return exact_activations.binary_01_activation(q, where)
        # On weights the node is fed QKeras's {0, s} values: a 2-bit unsigned grid holds them.
        _, scale = qkeras_call(q, weight)
        scale = np.asarray(1.0 if scale is None else scale, dtype=np.float64)
        scale = np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)
        return QuantSpec(QUANT, scale, bit_width=2, signed=False)
    if isinstance(q.alpha, str):
        if q.alpha not in ("auto", "auto_po2"):
            raise ConversionError(f"{describe(q)}: unknown alpha {q.alpha!r}", where)
        _require_weight(q, weight, where, f"alpha={q.alpha!r}")
        _, scale = qkeras_call(q, weight)
        return QuantSpec(BIPOLAR, scale)
    return QuantSpec(BIPOLAR, _alpha(q, where))


def _ternary(q: Any, weight: np.ndarray | None, where: str) -> QuantSpec:
    # (use_stochastic_rounding only acts in the training phase: inference is deterministic.)
    if weight is not None:
        _, scale = qkeras_call(q, weight)
        scale = np.asarray(1.0 if scale is None else scale, dtype=np.float64)
        # An all-zero channel gets scale 0 and output 0; any positive scale reproduces that.
        scale = np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)
        return QuantSpec(QUANT, scale, bit_width=2, narrow=True, rounding_mode="HALF_UP")
    # On activations ``|x| >= t`` is no Quant's rounding (qonnx's HALF_UP adds 0.5 in float32
    # and moves x just below alpha/2 up): the comparison itself is emitted.
    return exact_activations.ternary_activation(q, where)


def _non_uniform(q: Any, weight: np.ndarray | None, where: str) -> QuantSpec:
    if weight is None:  # activations: QKeras's levels looked up, then an identity Quant
        if type(q).__name__ == "quantized_ulaw":
            return exact_po2.ulaw_activation(q, where)
        return exact_po2.po2_activation(q, where)
    # use_stochastic_rounding acts only in the training phase (QKeras's smart_cond on the
    # learning phase): the constant is computed eagerly, in the inference phase, as predict does.
    return QuantSpec(LOST, 1.0)


def _alpha(q: Any, where: str) -> np.ndarray:
    alpha = q.alpha
    if alpha is None:
        return np.asarray(1.0)
    try:
        value = np.asarray(alpha, dtype=np.float64)
    except (TypeError, ValueError):
        raise ConversionError(f"{describe(q)}: alpha {alpha!r} is not numeric", where) from None
    if not np.all(np.isfinite(value)) or np.any(value <= 0):
        raise ConversionError(f"{describe(q)}: alpha must be finite and > 0", where)
    return value


def _require_weight(q: Any, weight: np.ndarray | None, where: str, what: str) -> None:
    if weight is None:
        raise ConversionError(
            f"{describe(q)}: {what} derives the scale from each input at run time; only "
            "weight quantizers (fixed data) can be converted",
            where,
        )


def _require_plain_noise(q: Any, config: dict, where: str) -> None:
    noise = float(config.get("qnoise_factor", 1.0))
    if noise != 1.0:
        raise ConversionError(
            f"{describe(q)}: qnoise_factor={noise:g} mixes unquantized values into the output",
            where,
        )


QUANTIZERS: dict[str, QuantizerRule] = {
    "quantized_bits": QuantizerRule(_quantized_bits, activation=LINEAR),
    "quantized_relu": QuantizerRule(
        _quantized_relu,
        activation=RELU,
        raw_input=lambda q: bool(q.negative_slope) or bool(q.use_sigmoid),
    ),
    "quantized_linear": QuantizerRule(quantizers3.quantized_linear, activation=LINEAR),  # v3
    "binary": QuantizerRule(_binary, activation=LINEAR),
    "ternary": QuantizerRule(_ternary, activation=LINEAR),
    "quantized_po2": QuantizerRule(_non_uniform, activation=LINEAR),
    # On activations a composite that reads the raw input (negative_slope, 2**min_exp below 0).
    "quantized_relu_po2": QuantizerRule(_non_uniform, activation=RELU, raw_input=lambda q: True),
    "quantized_ulaw": QuantizerRule(_non_uniform, activation=LINEAR),
    # At inference (learning phase 0) QKeras runs the plain binary/ternary computation.
    "stochastic_binary": QuantizerRule(_binary, activation=LINEAR),
    "stochastic_ternary": QuantizerRule(_ternary, activation=LINEAR),
    # A function of x precedes the rounding: composites (see ``exact_activations``).
    "quantized_tanh": QuantizerRule(exact_activations.quantized_tanh, LINEAR),
    "quantized_sigmoid": QuantizerRule(exact_activations.quantized_sigmoid, LINEAR),
    "quantized_hswish": QuantizerRule(exact_activations.quantized_hswish, LINEAR),
}
