"""quantized_po2, quantized_relu_po2 and quantized_ulaw on activations: composites (see
``composite``) that look QKeras's own float32 levels up instead of computing a log at run time.

Formulas (QKeras 0.9 and qkeras-v3 ``quantizers.py``, at inference):

* quantized_po2: ``sign(x) * 2**(f * clip(r(log(a) / log 2), min_exp, max_exp))`` with sign 0
  -> +1, ``a = |x|`` set to eps (1e-7) below eps and to max_value above it, then ``2**(f *
  min_exp)`` wherever ``|x| < eps``; r is tf.round (log2_rounding 'rnd') or tf.floor
  ('floor'); with quadratic_approximation f = 2 and the log is taken of sqrt(a).
* quantized_relu_po2: the same magnitude of relu(x) where x >= 0 (or negative_slope is 0, so
  negative inputs give ``2**min_exp``), and ``-magnitude(|x| * negative_slope)`` below 0.
* quantized_ulaw: ``j = round(sigmoid(x / m_i) * m)`` (QKeras's internal hard/smooth sigmoid,
  m = 2**(bits-1)), then ``m_i * clip(sign(r) log(1 + u|r|) / log(1 + u), lo, hi)`` with
  ``r = 2 j / m - 1``: one float32 value per j.

The magnitude is a step function of a: the float32 a where its level changes, and the levels,
are read from QKeras itself when converting (bisection, then every float32 within ``_WINDOW``
ulps of each threshold, as TF's float32 log is not even monotone there), and the graph compares
|x| with those thresholds and gathers the level (Abs, GreaterOrEqual, ReduceSum, Gather,
Where): no log at run time. QKeras is read as its predict computes it, inside a tf.function
(Grappler rewrites the log2 arithmetic: eager calls differ next to thresholds) and on TF's
vectorised path: the scalar path of TF's log gives other last bits, so within a few float32 of
a threshold QKeras's own output depends on the element's position in the tensor and is not a
function of x; a warning (``InexactAtTies``) says so. quantized_ulaw's index is the exact
sigmoid rounding (as in ``exact_activations``); its levels are QKeras's floats.

The final Quant is the identity on every level: step = the smallest power of two dividing
them all, enough bits for the largest (a po2 grid 2**lo..2**hi needs hi - lo + 1 bits, + 1
signed). QKeras returns ``x + (q - x)``, which cancels q when |x| is 2**24 times larger (e.g.
1e30, or inputs just below eps when 2**min_exp is tiny): there QKeras's output is that float
residue, not its quantized value; the conversion gives the quantized value, like every other
quantizer here.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from qkeras2qonnx.compat import qkeras as compat_qkeras
from qkeras2qonnx.emit.composite import Builder, Composite
from qkeras2qonnx.emit.spec import QUANT, QuantSpec
from qkeras2qonnx.qkeras_layers import exact_activations
from qkeras2qonnx.qkeras_layers.exact_activations import (
    InexactAtTies,
    float32_from_key,
    float32_key,
)
from qonnx_ingest.errors import ConversionError

_F32 = np.float32
_EPS = _F32(1e-7)  # tf.keras.backend.epsilon(), as QKeras compares against it
_WINDOW = 256  # float32 ulps read either side of each threshold
_TILE = 16  # probes repeated so each sits in a vectorised (packet) position


def po2_activation(q: Any, where: str) -> QuantSpec:
    """quantized_po2 / quantized_relu_po2 on activations."""
    relu = type(q).__name__ == "quantized_relu_po2"
    _require_deterministic(q, where)
    slope = float(getattr(q, "negative_slope", 0.0) or 0.0) if relu else 0.0
    if slope and (slope < 0 or math.log2(slope) != round(math.log2(slope))):
        raise ConversionError(f"{_name(q)}: negative_slope must be a power of two", where)
    call = _predict_path(q)
    thresholds, levels = _staircase(q, call, 1.0, where)
    if slope:  # read on negative inputs: QKeras's graph computes relu(-x) * slope its own way
        neg_thresholds, neg_levels = _staircase(q, lambda a: -call(-a), slope, where)

    def emit(b: Builder, x: str) -> str:
        if not relu:
            magnitude = _lookup(b, b.op("Abs", x), thresholds, levels)
            return b.op("Where", b.op("Less", x, 0.0), b.op("Neg", magnitude), magnitude)
        positive = _lookup(b, b.op("Relu", x), thresholds, levels)
        if not slope:
            return positive
        negative = _lookup(b, b.op("Relu", b.op("Neg", x)), neg_thresholds, neg_levels, slope)
        return b.op("Where", b.op("GreaterOrEqual", x, 0.0), positive, b.op("Neg", negative))

    if relu and slope:
        values = np.concatenate([levels, -neg_levels])
        critical = np.concatenate([thresholds, -neg_thresholds])
    elif relu:
        values, critical = levels, thresholds
    else:
        values = np.concatenate([levels, -levels])
        critical = np.concatenate([thresholds, -thresholds])
    spec = _identity_quant(values, q, where)
    mode = "floor" if q.log2_rounding == "floor" else "round"
    lo, hi = _exponent(levels[levels > 0].min()), _exponent(levels.max())
    form = (
        f"{'relu ' if relu else ''}po2 ({mode} log2, levels 2^{lo}..2^{hi}"
        f"{f', {slope:g} * x below 0' if slope else ''}) by |x| against QKeras's "
        f"{critical.size} float32 thresholds (TF's vectorised log)"
    )
    warnings.warn(
        f"{where} {_name(q)}: TF's float32 log gives last bits that depend on the element's "
        "position in the tensor (vectorised or scalar path) and on graph or eager execution, "
        "so within a few float32 of each log2 threshold QKeras's own output is not a function "
        "of x; the conversion follows model.predict's vectorised path",
        InexactAtTies,
        stacklevel=3,
    )
    return _with(spec, Composite(form, emit, critical, tie_window=True))


def ulaw_activation(q: Any, where: str) -> QuantSpec:
    """quantized_ulaw on activations: the exact sigmoid rounding, then QKeras's u-law level."""
    bits, integer = int(q.bits), float(q.integer)
    if bits < 2:
        raise ConversionError(f"{_name(q)}: 1-bit quantized_ulaw divides by m = 1 - 1", where)
    m, m_i = 2.0 ** (bits - 1), 2.0**integer
    sigmoid, name = exact_activations._internal_sigmoid(q, where)

    def index(b: Builder, x: str) -> str:
        p = b.op("Mul", sigmoid(b, b.op("Div", x, m_i)), m)
        return b.op("Round", p)

    # One input per j: where sigmoid(x / m_i) * m = j (hard: x = m_i (2 j / m - 1)).
    j = np.arange(int(m) + 1)
    slope = 0.5 if name == "hard" else 0.1875
    probe = (m_i * (j / m - 0.5) / slope).astype(_F32)
    from qkeras2qonnx.emit import composite

    found = composite.run(Composite("index", index, probe), probe)
    if not np.array_equal(found, j):
        raise ConversionError(f"{_name(q)}: could not reach every u-law level", where)
    table = _predict_path(q)(probe)
    if not np.all(np.isfinite(table)):
        raise ConversionError(f"{_name(q)}: u-law levels are not finite", where)

    def emit(b: Builder, x: str) -> str:
        return b.op("Gather", table, b.op("Cast", index(b, x), to=7))  # 7: INT64

    spec = _identity_quant(table, q, where)
    ties = (m_i * ((j[:-1] + 0.5) / m - 0.5) / slope).astype(_F32)
    form = (
        f"u-law (u={float(q.u):g}): round({name} sigmoid(x / {m_i:g}) * {m:g}) picks one of "
        f"QKeras's {table.size} float32 levels (TF's vectorised log)"
    )
    return _with(spec, Composite(form, emit, ties))


def _staircase(q: Any, call, slope: float, where: str) -> tuple[np.ndarray, np.ndarray]:
    """QKeras's magnitude ``call(a)`` for a >= 0 as ``levels[0]`` where ``a * slope`` < eps and
    ``levels[1 + k]`` where ``k`` thresholds (ascending, float32) are <= a: read from QKeras by
    bisection."""
    factor = 2 if q.quadratic_approximation else 1
    min_exp, max_exp = compat_qkeras.exponent_range(q)
    lo_exp, hi_exp = factor * int(min_exp), factor * int(max_exp)
    # Above 4 * 2**hi_exp (or max_value) nothing changes; below it QKeras's x + (q - x) is exact.
    top = 2.0 ** min(hi_exp + 2, 127)
    if q.max_value is not None:
        top = min(top, max(2 * float(q.max_value), float(_EPS)))
    top, eps = _F32(top / slope), _F32(_EPS / _F32(slope))  # slope: a power of two
    base, first, last = call(np.array([np.finfo(_F32).tiny, eps, top], _F32))
    candidates = np.ldexp(1.0, np.arange(lo_exp, hi_exp + 1).clip(-200, 200)).astype(_F32)
    targets = np.unique(candidates[(candidates > first) & (candidates <= last)])
    # TF's float32 log is not even monotone within a few ulps of a threshold: every float32
    # of a window around each bisected threshold is read, and each change becomes a step.
    keys = float32_key(np.unique(_bisect(call, targets, eps, top)))
    window = np.arange(-_WINDOW, _WINDOW + 1, dtype=np.int64)
    scan = np.unique((keys.astype(np.int64)[:, None] + window[None, :]).ravel())
    points = float32_from_key(
        scan[(scan >= float32_key(eps)) & (scan <= float32_key(top))].astype(np.uint64)
    )
    points = np.unique(np.concatenate([[eps, top], points]))
    values = call(points)
    change = np.flatnonzero(values[1:] != values[:-1]) + 1
    thresholds, levels = points[change], np.concatenate([[base], values[[0, *change]]])
    # Between windows the output must be constant: each window starts on the level reached.
    edges = float32_from_key(np.unique(np.concatenate([scan - _WINDOW - 1, scan + _WINDOW + 1])))
    edges = edges[(edges > eps) & (edges < top)]
    expected = levels[1 + np.searchsorted(thresholds, edges, side="right")]
    if not (np.array_equal(call(edges), expected) and np.all(np.isin(levels, candidates))):
        raise ConversionError(
            f"{_name(q)}: QKeras's levels are not a power-of-two staircase", where
        )
    if not np.all(np.isfinite(levels)) or np.any(levels < 0):
        raise ConversionError(
            f"{_name(q)}: QKeras's levels reach {levels.max():g}: no Quant carries a "
            "non-finite float32",
            where,
        )
    return thresholds, levels


def _lookup(
    b: Builder, a: str, thresholds: np.ndarray, levels: np.ndarray, slope: float = 1.0
) -> str:
    """``levels[0]`` where a * slope < eps, else ``levels[1 + #(thresholds <= a)]``."""
    if thresholds.size:
        over = b.op("GreaterOrEqual", b.op("Unsqueeze", a, np.array([-1], np.int64)), thresholds)
        count = b.op("ReduceSum", b.op("Cast", over, to=7), np.array([-1], np.int64), keepdims=0)
        step = b.op("Add", count, np.array(1, np.int64))
    else:
        step = b.op("Cast", b.op("Mul", a, 0.0), to=7)
        step = b.op("Add", step, np.array(1, np.int64))
    index = b.op("Where", b.op("Less", a, _F32(_EPS / _F32(slope))), np.array(0, np.int64), step)
    return b.op("Gather", levels, index)


def _bisect(call, targets: np.ndarray, low: np.float32, high: np.float32) -> np.ndarray:
    """For each target level, the smallest float32 a in [low, high] whose QKeras output
    reaches it."""
    lo = np.full(targets.shape, float32_key(low), dtype=np.uint64)
    hi = np.full(targets.shape, float32_key(high), dtype=np.uint64)
    while np.any(hi - lo > 1):
        mid = lo + (hi - lo) // np.uint64(2)
        above = call(float32_from_key(mid)) >= targets
        hi = np.where(above, mid, hi)
        lo = np.where(above, lo, mid)
    return float32_from_key(hi).astype(_F32)


def _predict_path(q: Any):
    """QKeras on a float32 vector as its predict computes it: inside a tf.function (Grappler
    rewrites the log2 arithmetic, so eager calls differ next to thresholds) and with each
    value repeated ``_TILE`` times so that TensorFlow takes its vectorised path."""
    import tensorflow as tf

    from qkeras2qonnx.environment.backend import keras

    keras()
    spec = [tf.TensorSpec([None], tf.float32)]
    graph = tf.function(q, input_signature=spec, autograph=False)  # plain Python control flow

    def call(x: np.ndarray) -> np.ndarray:
        tiled = np.repeat(np.asarray(x, dtype=_F32), _TILE)
        return np.asarray(graph(tf.constant(tiled)), dtype=_F32)[::_TILE]

    return call


def _identity_quant(values: np.ndarray, q: Any, where: str) -> QuantSpec:
    """The Quant whose grid holds every value: step = the smallest power of two dividing all
    of them, width enough for the largest."""
    values = np.asarray(values, dtype=_F32)
    nonzero = np.abs(values[values != 0]).astype(np.float64)
    if nonzero.size == 0:
        return QuantSpec(QUANT, 1.0, bit_width=2, signed=False)
    mantissa, exponent = np.frexp(nonzero)  # value = mantissa * 2**exponent, 24-bit mantissa
    ints = (mantissa * 2.0**24).astype(np.int64)
    trailing = np.array([(int(v) & -int(v)).bit_length() - 1 for v in ints])
    step_exp = int(np.min(exponent - 24 + trailing))
    top = float(np.max(nonzero)) / 2.0**step_exp  # an exact integer
    signed = bool(np.any(values < 0))
    width = max(2, math.ceil(math.log2(top + 1)) + int(signed))
    if top >= 2.0**126 or step_exp < -126:
        raise ConversionError(
            f"{_name(q)}: its levels span 2^{step_exp}..{float(np.max(nonzero)):g}: a uniform "
            f"grid holding them needs {width} bits, beyond what a float32 Quant computes",
            where,
        )
    spec = QuantSpec(QUANT, 2.0**step_exp, bit_width=width, signed=signed)
    if not np.array_equal(spec.apply(values), values):
        raise ConversionError(f"{spec.describe()} is not the identity on {_name(q)}", where)
    return spec


def _require_deterministic(q: Any, where: str) -> None:
    if q.log2_rounding not in ("rnd", "floor"):
        raise ConversionError(f"{_name(q)}: unknown log2_rounding {q.log2_rounding!r}", where)
    noise = float(np.asarray(getattr(q, "qnoise_factor", 1.0)))
    if noise != 1.0:
        raise ConversionError(
            f"{_name(q)}: qnoise_factor={noise:g} mixes unquantized values into the output", where
        )


def _exponent(v: float) -> int:
    return int(np.frexp(np.float64(v))[1]) - 1


def _with(spec: QuantSpec, composite: Composite) -> QuantSpec:
    spec.composite = composite
    return spec


def _name(q: Any) -> str:
    try:
        return str(q)
    except Exception:
        return type(q).__name__
