"""Activation quantizers that take the composite form (see ``composite``): QKeras 0.9's exact
arithmetic in standard ONNX ops, then a Quant that is the identity on the result's grid.

Formulas (QKeras 0.9 ``quantizers.py``; ``round`` is tf.round, half to even, which is ONNX
Round; ``_round_through(v)`` is ``v + (round(v) - v)``, which equals round(v) in float32):

* quantized_sigmoid(bits, symmetric): ``clip(round(s(x) * m) / m, symmetric/m, 1 - 1/m)``,
  m = 2**bits, s = QKeras's module-level ``_sigmoid`` (hard by default:
  ``clip(0.5 x + 0.5, 0, 1)``; smooth: ``clip(0.1875 x + 0.5, 0, 1)``) or, with
  ``use_real_sigmoid``, tf.sigmoid.
* quantized_tanh(bits, symmetric): the same with m = 2**(bits-1), ``t(x) = 2 s(x) - 1`` (or
  tf.tanh with ``use_real_tanh``) and bounds ``-1 + symmetric/m``, ``1 - 1/m``.
* quantized_hswish: ``x * where(x + 3 <= 6, relu(x + 3), 6) / 6`` (shift and bound from the
  quantizer), then its quantized_bits: here the final Quant does the rounding.
* ternary on activations: ``alpha * (|x| >= threshold) * sign(x)`` (threshold 0.33 unless set).
* quantized_relu with negative_slope ns: with m = 2**(bits-1), m_i = 2**integer,
  p = x * m / m_i: ``m_i clip(round(p)/m, 0, 1-1/m) + m_i ns clip(round(p ns) / (ns m), -1, 0)``.
* quantized_relu with use_sigmoid: ``m_i clip(2 round(s(x / m_i) m) / m - 1, 0, 1 - 1/m)``,
  m = 2**bits, s the internal sigmoid.
* binary(use_01=True) on activations: ``alpha * (x >= 0)`` (0 gives alpha).
* binary_tanh (a function): ``2 round(clip(0.5 x + 0.5, 0, 1)) - 1``: x = 0 gives -1 (the tie
  0.5 rounds to even), unlike binary(), whose 0 gives +1; binary_sigmoid: the same in {0, 1}.

All forms but the real sigmoid/tanh are the same IEEE float32 ops in the same order, which
TensorFlow and ONNX Runtime compute to the same bits: exact, ties included. ``quantizer_proof``
checks each against QKeras on its ties (found by bisection on QKeras itself), their float32
neighbours and random inputs. tf.sigmoid and tf.tanh are float approximations whose last bits
TensorFlow itself computes differently by the element's position in the tensor (Eigen's vector
and scalar paths), and not monotonically: within a few ulps of a rounding tie QKeras's output
is not a function of x, so no conversion can match it there. They become ONNX Sigmoid / Tanh
followed by the same rounding, with an ``InexactAtTies`` warning saying so; the proof skips
only those windows.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from qkeras2qonnx.emit.composite import Builder, Composite
from qkeras2qonnx.emit.spec import BIPOLAR, QUANT, QuantSpec
from qkeras2qonnx.environment.backend import qkeras_call
from qonnx_ingest.errors import ConversionError, ConversionWarning

_F32 = np.float32


class InexactAtTies(ConversionWarning):
    """A float tanh/sigmoid quantizer: exact except within float32 ulps of a rounding tie,
    where TensorFlow's own result depends on the element's position in the tensor."""


def quantized_sigmoid(q: Any, weight: np.ndarray | None, where: str) -> QuantSpec:
    bits = int(q.bits)
    m = 2.0**bits
    lo, hi = _symmetric(q, m, where) / m, 1.0 - 1.0 / m
    spec = QuantSpec(QUANT, 1.0 / m, bit_width=max(bits, 2), signed=False)
    if weight is not None:  # weights are fixed data: fed QKeras's values, the Quant is exact
        return spec
    if q.use_real_sigmoid:
        return _with(spec, _real("Sigmoid", q, m, lo, hi, where))
    sigmoid, name = _internal_sigmoid(q, where)
    form = f"{name} sigmoid, round half-even to 1/{m:g}, clip [{lo:g}, {hi:g}]"
    emit = _rounded(sigmoid, m, lo, hi)
    return _with(spec, Composite(form, emit, _ties(q, lo, hi, 1.0 / m)))


def quantized_tanh(q: Any, weight: np.ndarray | None, where: str) -> QuantSpec:
    bits = int(q.bits)
    m = 2.0 ** (bits - 1)
    lo, hi = -1.0 + _symmetric(q, 2 * m, where) / m, 1.0 - 1.0 / m
    spec = QuantSpec(QUANT, 1.0 / m, bit_width=max(bits, 2), signed=True, narrow=bool(q.symmetric))
    if weight is not None:
        return spec
    if q.use_real_tanh:
        return _with(spec, _real("Tanh", q, m, lo, hi, where))
    sigmoid, name = _internal_sigmoid(q, where)

    def tanh(b: Builder, x: str) -> str:
        return b.op("Sub", b.op("Mul", sigmoid(b, x), 2.0), 1.0)

    form = f"2 * {name} sigmoid - 1, round half-even to 1/{m:g}, clip [{lo:g}, {hi:g}]"
    return _with(spec, Composite(form, _rounded(tanh, m, lo, hi), _ties(q, lo, hi, 1.0 / m)))


def quantized_hswish(q: Any, weight: np.ndarray | None, where: str) -> QuantSpec:
    config = q.get_config()
    _plain_noise(q, config, where)
    if weight is not None:
        raise ConversionError(f"{_name(q)}: quantized_hswish on weights is not supported", where)
    alpha = config.get("alpha")
    if alpha is not None and not (not isinstance(alpha, str) and np.all(np.asarray(alpha) == 1)):
        raise ConversionError(
            f"{_name(q)}: alpha={alpha!r} scales after rounding, which the final Quant cannot",
            where,
        )
    bits, integer = int(config["bits"]), float(config["integer"])
    if bits < 2:
        raise ConversionError(f"{_name(q)}: 1-bit quantized_hswish has no Quant form", where)
    shift, bound = float(q.relu_shift), float(q.relu_upper_bound)
    if shift <= 0 or bound <= 0:
        raise ConversionError(f"{_name(q)}: relu_shift and relu_upper_bound must be > 0", where)

    def emit(b: Builder, x: str) -> str:
        shifted = b.op("Add", x, shift)
        relu = b.op("Where", b.op("LessOrEqual", shifted, bound), b.op("Relu", shifted), bound)
        return b.op("Div", b.op("Mul", x, relu), bound)

    m = 2.0 ** (bits - 1)
    spec = QuantSpec(
        QUANT, 2.0**integer / m, bit_width=bits, signed=True, narrow=bool(config["symmetric"])
    )
    # hswish is not monotone: probe its whole bend densely, and the grid's ties beyond it.
    step = 2.0**integer / m
    dense = np.linspace(-2 * shift, 2 * bound, 2**14, dtype=_F32)
    ties = ((np.arange(-m - 2, m + 2) + 0.5) * step).astype(_F32)
    form = f"x * min(relu(x + {shift:g}), {bound:g}) / {bound:g}, then quantized_bits"
    return _with(spec, Composite(form, emit, np.concatenate([dense, ties])))


def _activation_alpha(q: Any, where: str) -> float:
    """The one finite, positive scale ``alpha`` of a ternary / binary activation (1 unset)."""
    alpha = q.alpha
    if isinstance(alpha, str):
        raise ConversionError(
            f"{_name(q)}: alpha={alpha!r} derives the scale from each input at run time", where
        )
    scale = 1.0 if alpha is None else np.asarray(alpha, dtype=np.float64)
    if np.size(scale) != 1 or not np.isfinite(scale) or float(scale) <= 0:
        raise ConversionError(f"{_name(q)}: activation alpha must be one finite value > 0", where)
    return float(scale)


def ternary_activation(q: Any, where: str) -> QuantSpec:
    """ternary() on activations (the weight form lives in ``quantizers``)."""
    s = _activation_alpha(q, where)
    threshold = q.default_threshold if q.threshold is None else q.threshold
    if np.size(threshold) != 1 or isinstance(threshold, str):
        raise ConversionError(f"{_name(q)}: threshold {threshold!r} is not one number", where)
    t = _F32(np.asarray(threshold).reshape(()))

    def emit(b: Builder, x: str) -> str:
        kept = b.op("Cast", b.op("GreaterOrEqual", b.op("Abs", x), t), to=1)  # 1: FLOAT
        return b.op("Mul", b.op("Mul", kept, b.op("Sign", x)), s)

    spec = QuantSpec(QUANT, s, bit_width=2, signed=True, narrow=True)
    form = f"{s:g} * sign(x) where |x| >= {float(t):g}, else 0"
    return _with(spec, Composite(form, emit, np.array([-t, _F32(0), t], dtype=_F32)))


def binary_01_activation(q: Any, where: str) -> QuantSpec:
    """binary(use_01=True) on activations: ``alpha * (x >= 0)``, as QKeras computes it:
    ``k = sign(x); k += 1 - |k|; (k + 1) / 2`` (so 0 -> 1)."""
    s = _activation_alpha(q, where)

    def emit(b: Builder, x: str) -> str:
        sign = b.op("Sign", x)
        k = b.op("Add", sign, b.op("Sub", 1.0, b.op("Abs", sign)))
        return b.op("Mul", b.op("Div", b.op("Add", k, 1.0), 2.0), s)

    spec = QuantSpec(QUANT, s, bit_width=2, signed=False)
    form = f"{s:g} * (x >= 0), else 0"
    return _with(spec, Composite(form, emit, np.array([-(2.0**-23), 0, 2.0**-23], dtype=_F32)))


def leaky_quantized_relu(q: Any, where: str) -> QuantSpec:
    """quantized_relu(..., negative_slope=ns) on activations: two grids, one output."""
    config = q.get_config()
    bits, integer, ns = int(config["bits"]), float(config["integer"]), float(q.negative_slope)
    if bits < 2 or ns <= 0 or math.log2(ns) != round(math.log2(ns)):
        raise ConversionError(
            f"{_name(q)}: negative_slope needs bits >= 2 and a power of two", where
        )
    m, m_i = 2.0 ** (bits - 1), 2.0**integer
    bound = config.get("relu_upper_bound")
    clip_top = bound is not None and bound and not getattr(q, "is_quantized_clip", True)

    def emit(b: Builder, x: str) -> str:
        p = b.op("Div", b.op("Mul", x, m), m_i)
        pos = b.op("Mul", b.op("Clip", b.op("Div", b.op("Round", p), m), 0.0, 1.0 - 1.0 / m), m_i)
        scaled = b.op("Mul", b.op("Round", b.op("Mul", p, ns)), 1.0 / (ns * m))
        neg = b.op("Mul", b.op("Clip", scaled, -1.0, 0.0), m_i * ns)
        out = b.op("Add", pos, neg)
        if clip_top:
            out = b.op("Where", b.op("LessOrEqual", out, float(bound)), out, float(bound))
        return out

    step = m_i * min(1.0 / m, ns)  # both powers of two: the finer grid holds both sides
    low, high = -ns * m_i / step, (m - 1) * m_i / m / step
    width = max(2, math.ceil(math.log2(max(-low, high + 1))) + 1)
    spec = QuantSpec(QUANT, step, bit_width=width, signed=True)
    ties = np.concatenate(
        [(np.arange(0, m + 2) + 0.5) * m_i / m, -(np.arange(0, ns * m + 2) + 0.5) * m_i / m / ns]
    )
    form = f"relu on steps of {m_i / m:g}, {ns:g} * x on steps of {m_i / m:g} below 0"
    return _with(spec, Composite(form, emit, ties.astype(_F32)))


def one_bit_quantized_relu(q: Any, where: str) -> QuantSpec:
    """quantized_relu(1, integer) on activations: the grid {0, 2**(integer - 1)}, with
    m_i = 2**integer: ``m_i clip(round(2 x / m_i) / 2, 0, 0.5)``; QONNX's Quant needs 2 bits,
    so the 2-bit unsigned Quant after it is the identity on both values."""
    config = q.get_config()
    bound = config.get("relu_upper_bound")
    if bound and not getattr(q, "is_quantized_clip", True):
        raise ConversionError(f"{_name(q)}: 1 bit with relu_upper_bound", where)
    m_i = 2.0 ** float(config["integer"])

    def emit(b: Builder, x: str) -> str:
        p = b.op("Div", b.op("Mul", x, 2.0), m_i)
        return b.op("Mul", b.op("Clip", b.op("Div", b.op("Round", p), 2.0), 0.0, 0.5), m_i)

    spec = QuantSpec(QUANT, m_i / 2, bit_width=2, signed=False)
    ties = (np.arange(-1, 3) + 0.5) * m_i / 2
    return _with(spec, Composite(f"{m_i / 2:g} * (x > {m_i / 4:g})", emit, ties.astype(_F32)))


def sigmoid_quantized_relu(q: Any, where: str) -> QuantSpec:
    """quantized_relu(..., use_sigmoid=1) on activations: with m = 2**bits, m_i = 2**integer,
    ``m_i clip(2 round(s(x / m_i) m) / m - 1, 0, 1 - 1/m)`` (s: QKeras's internal sigmoid)."""
    config = q.get_config()
    bits, integer = int(config["bits"]), float(config["integer"])
    bound = config.get("relu_upper_bound")
    if q.negative_slope or bits < 2 or (bound and not getattr(q, "is_quantized_clip", True)):
        raise ConversionError(
            f"{_name(q)}: use_sigmoid with negative_slope, relu_upper_bound or 1 bit", where
        )
    m, m_i = 2.0**bits, 2.0**integer
    sigmoid, name = _internal_sigmoid(q, where)

    def emit(b: Builder, x: str) -> str:
        p = b.op("Mul", sigmoid(b, b.op("Div", x, m_i)), m)
        v = b.op("Sub", b.op("Mul", b.op("Div", b.op("Round", p), m), 2.0), 1.0)
        return b.op("Mul", b.op("Clip", v, 0.0, 1.0 - 1.0 / m), m_i)

    spec = QuantSpec(QUANT, m_i / m, bit_width=bits, signed=False)
    form = f"{m_i:g} * clip(2 * round({name} sigmoid(x / {m_i:g}) * {m:g}) / {m:g} - 1, 0, top)"
    return _with(spec, Composite(form, emit, _ties(q, 0.0, m_i * (1 - 1 / m), m_i / m)))


def _binary_tanh_emit(b: Builder, x: str) -> str:
    return b.op("Sub", b.op("Mul", b.op("Round", _hard(b, x)), 2.0), 1.0)


def _binary_sigmoid_emit(b: Builder, x: str) -> str:
    return b.op("Round", _hard(b, x))


def binary_tanh(q: Any, weight: np.ndarray | None, where: str) -> QuantSpec:
    spec = QuantSpec(BIPOLAR, 1.0)
    critical = np.array([-(2.0**-23), 0.0, 2.0**-23], dtype=_F32)
    form = "2 * round(hard sigmoid) - 1 (x = 0 gives -1)"
    return spec if weight is not None else _with(spec, Composite(form, _binary_tanh_emit, critical))


def binary_sigmoid(q: Any, weight: np.ndarray | None, where: str) -> QuantSpec:
    spec = QuantSpec(QUANT, 1.0, bit_width=2, signed=False)
    critical = np.array([-(2.0**-23), 0.0, 2.0**-23], dtype=_F32)
    form = "round(hard sigmoid) in {0, 1} (x = 0 gives 0)"
    if weight is not None:
        return spec
    return _with(spec, Composite(form, _binary_sigmoid_emit, critical))


def _symmetric(q: Any, levels: float, where: str) -> float:
    """``symmetric`` as QKeras's sigmoid/tanh use it: a count of lowest grid steps clipped away
    (``1.0 * symmetric / m``, so ``symmetric=6`` raises the floor by 6 steps, not 1). An
    integer up to ``levels - 1`` keeps the floor on the grid and not above the top."""
    value = float(q.symmetric)
    if value != int(value) or not 0 <= value <= levels - 1:
        raise ConversionError(
            f"{_name(q)}: symmetric={q.symmetric!r} puts the lower clip bound off the grid "
            "or above the upper one",
            where,
        )
    return value


def _with(spec: QuantSpec, composite: Composite) -> QuantSpec:
    spec.composite = composite
    return spec


def _hard(b: Builder, x: str) -> str:
    return b.op("Clip", b.op("Add", b.op("Mul", x, 0.5), 0.5), 0.0, 1.0)


def _smooth(b: Builder, x: str) -> str:
    return b.op("Clip", b.op("Add", b.op("Mul", x, 0.1875), 0.5), 0.0, 1.0)


def _internal_sigmoid(q: Any, where: str) -> tuple[Callable[[Builder, str], str], str]:
    """QKeras's module-level ``_sigmoid`` (``set_internal_sigmoid``), read when converting."""
    from qkeras import quantizers

    from qkeras2qonnx.compat.qkeras import internal_sigmoid

    current = internal_sigmoid()
    if current is quantizers.hard_sigmoid:
        return _hard, "hard"
    if current is quantizers.smooth_sigmoid:
        return _smooth, "smooth"
    raise ConversionError(
        f"{_name(q)}: QKeras's internal sigmoid is {getattr(current, '__name__', current)!r} "
        "(set_internal_sigmoid('real')): a float sigmoid has no exact form here",
        where,
    )


def _rounded(
    function: Callable[[Builder, str], str], m: float, lo: float, hi: float
) -> Callable[[Builder, str], str]:
    """``clip(round(function(x) * m) / m, lo, hi)``, in QKeras's order."""

    def emit(b: Builder, x: str) -> str:
        rounded = b.op("Round", b.op("Mul", function(b, x), m))
        return b.op("Clip", b.op("Div", rounded, m), lo, hi)

    return emit


def _ties(q: Any, lo: float, hi: float, step: float) -> np.ndarray:
    """The float32 inputs where QKeras's (monotone) output moves up a level, by bisection."""
    return thresholds(q, (np.arange(round(lo / step), round(hi / step) + 1) * step).astype(_F32))


def _real(op: str, q: Any, m: float, lo: float, hi: float, where: str) -> Composite:
    """tf.sigmoid / tf.tanh, then QKeras's rounding: ONNX Sigmoid / Tanh.

    TensorFlow computes these floats with last bits that depend on the element's position in
    the tensor (Eigen's vector and scalar paths differ) and are not even monotone in x, so
    QKeras's own output is not a function of x within a few float32 ulps of a rounding tie.
    There, and only there, the ONNX runtime's value may land one step away: said in a warning
    and in the composite's form (hence in the model's metadata and report).
    """
    warnings.warn(
        f"{where} {_name(q)}: tf.{op.lower()} is a float approximation whose last bits TensorFlow "
        "itself computes differently by tensor position; inputs within a few float32 ulps "
        "of a rounding tie may land one step away from QKeras's output",
        InexactAtTies,
        stacklevel=3,
    )
    levels = np.arange(round(lo * m), round(hi * m)) + 0.5  # ties of p * m, in (lo, hi)
    if op == "Sigmoid":
        p = levels / m
        ties = np.log(p / (1 - p))
    else:
        ties = np.arctanh(levels / m)

    def function(b: Builder, x: str) -> str:
        return b.op(op, x)

    form = (
        f"{op}, round half-even to 1/{m:g}, clip [{lo:g}, {hi:g}] (inexact within float32 "
        "ulps of a tie, as tf." + op.lower() + " is)"
    )
    return Composite(form, _rounded(function, m, lo, hi), ties.astype(_F32), tie_window=True)


_KEY_SIGN = np.uint64(0x80000000)


def float32_key(x: np.ndarray) -> np.ndarray:
    """float32 -> integer keys in the same order."""
    bits = np.asarray(x, dtype=_F32).view(np.uint32).astype(np.uint64)
    return np.where(bits & _KEY_SIGN, 0xFFFFFFFF - bits, bits | _KEY_SIGN)


def float32_from_key(key: np.ndarray) -> np.ndarray:
    key = np.asarray(key, dtype=np.uint64)
    bits = np.where(key & _KEY_SIGN, key & np.uint64(0x7FFFFFFF), 0xFFFFFFFF - key)
    return bits.astype(np.uint32).view(_F32)


def thresholds(q: Any, levels: np.ndarray) -> np.ndarray:
    """For each level above the lowest, the smallest float32 x whose QKeras output reaches it
    (NaN if none does), by bisection over the float32 values in order."""
    targets = levels[1:]
    lo = np.full(targets.shape, float32_key(_F32(-np.inf)), dtype=np.uint64)  # output below target
    hi = np.full(targets.shape, float32_key(_F32(np.inf)), dtype=np.uint64)
    reached = qkeras_call(q, np.full(targets.shape, np.inf, dtype=_F32))[0] >= targets
    while np.any(hi - lo > 1):
        mid = lo + (hi - lo) // np.uint64(2)
        above = qkeras_call(q, float32_from_key(mid))[0] >= targets
        hi = np.where(above, mid, hi)
        lo = np.where(above, lo, mid)
    return np.where(reached, float32_from_key(hi), _F32(np.nan)).astype(_F32)


def _name(q: Any) -> str:
    """The quantizer as QKeras prints it (quantized_hswish's __str__ asserts: its class name)."""
    try:
        return getattr(q, "__name__", None) or str(q)
    except Exception:
        return type(q).__name__


def _plain_noise(q: Any, config: dict, where: str) -> None:
    if float(config.get("qnoise_factor", 1.0)) != 1.0:
        raise ConversionError(f"{_name(q)}: qnoise_factor mixes unquantized values in", where)


# QKeras activation functions (not quantizer objects) with an exact composite form.
FUNCTIONS: dict[str, Callable[[Any, np.ndarray | None, str], QuantSpec]] = {
    "binary_tanh": binary_tanh,
    "binary_sigmoid": binary_sigmoid,
}
