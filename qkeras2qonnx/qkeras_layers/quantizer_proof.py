"""Conversion-time proof that each QuantSpec computes what QKeras computes.

Weights are fixed data, so the check is total: the node must reproduce every quantized weight.
Activations are checked on probe inputs covering every grid point, every rounding tie and their
float32 neighbours (sampled for very wide grids). A mismatch is a ConversionError, never a
silently different model.

"Reproduce" allows 2 float32 ulps and nothing more: QKeras returns ``x + (q - x)`` (its
straight-through-estimator trick) rather than ``q``, and in float32 that sum can land one ulp
off the grid value ``q`` (e.g. binary(alpha='auto'), whose scale is not a power of two). The
QONNX node outputs ``q`` itself; the rounding decision (which grid value) must be identical.
"""

from __future__ import annotations

import numpy as np

from qkeras2qonnx.emit import composite
from qkeras2qonnx.emit.spec import BIPOLAR, QuantSpec
from qkeras2qonnx.environment.backend import qkeras_call
from qkeras2qonnx.qkeras_layers.activations import PlainActivation
from qonnx_ingest.errors import ConversionError
from qonnx_ingest.quant import int_range

_MAX_HALF_STEPS = 2**17
_TINY = np.finfo(np.float32).tiny


def weight_values(quantizer, spec: QuantSpec, weight: np.ndarray, where: str) -> np.ndarray:
    """The tensor to feed the weight's Quant node so that it outputs QKeras's weights exactly.

    The trained float weights when the node reproduces QKeras on them; otherwise (a numeric
    alpha scales after rounding, or auto_po2 ended on a scale it did not round with) QKeras's
    quantized weights, on which the node is the identity.
    """
    expected, _ = qkeras_call(quantizer, weight)
    if _same(spec.apply(weight), expected):
        return np.asarray(weight, dtype=np.float32)
    if _same(spec.apply(expected), expected):
        return expected
    got = spec.apply(weight)
    raise ConversionError(
        f"{spec.describe()} does not reproduce QKeras's quantized weights "
        f"(max difference {np.max(np.abs(got - expected)):g})",
        where,
    )


def check_activation(quantizer, spec: QuantSpec, activation: PlainActivation, where: str) -> None:
    """Compare QKeras with ``Quant(plain activation(x))`` (or, for a composite, with the Quant
    of its ONNX ops run by onnxruntime) on probe inputs; raise on a mismatch."""
    if spec.composite is None:
        x = probes(spec)
        got = spec.apply(activation.apply(x))
    else:
        x = composite_probes(spec.composite.critical)
        if spec.composite.tie_window:  # TF's float tanh/sigmoid is no function of x there
            x = x[~_near(x, spec.composite.critical)]
        got = spec.apply(composite.run(spec.composite, activation.apply(x)))
    expected, _ = qkeras_call(quantizer, x)
    bad = np.flatnonzero(~_equal(got, expected))
    if bad.size:
        i = bad[0]
        raise ConversionError(
            f"{spec.describe()} differs from QKeras on {bad.size} of {x.size} probe inputs, "
            f"e.g. x={x[i]!r}: QKeras {expected[i]!r}, QONNX {got[i]!r}",
            where,
        )


def probes(spec: QuantSpec, seed: int = 0) -> np.ndarray:
    """Grid points, ties and their neighbours over the range plus a margin, and random values.

    Subnormals are left out: TensorFlow flushes them to zero on CPU, numpy does not.
    """
    rng = np.random.default_rng(seed)
    scale = float(np.max(spec.scale))
    if spec.kind == BIPOLAR:
        lo, hi = -1, 1
    else:
        lo, hi = (int(v) for v in int_range(spec.bit_width, spec.signed, spec.narrow))
    first, last = 2 * (lo - 4), 2 * (hi + 4)
    if last - first <= _MAX_HALF_STEPS:
        steps = np.arange(first, last + 1)
    else:
        ends = np.r_[first : first + 4096, last - 4096 : last + 1]
        steps = np.r_[ends, rng.integers(first, last, _MAX_HALF_STEPS // 2)]
    grid = (steps * (scale / 2)).astype(np.float32)
    noise = rng.uniform((lo - 4) * scale, (hi + 4) * scale, 4096).astype(np.float32)
    x = np.concatenate(
        [
            grid,
            np.nextafter(grid, np.float32(np.inf)),
            np.nextafter(grid, np.float32(-np.inf)),
            noise,
            np.float32([0.0, -0.0]),
        ]
    )
    return x[(x == 0) | (np.abs(x) >= _TINY)]


def composite_probes(critical: np.ndarray, seed: int = 0, ulps: int = 8) -> np.ndarray:
    """Each critical input and its ``ulps`` float32 neighbours either side, random inputs
    around them, zeros and large values (subnormals left out, as in ``probes``)."""
    rng = np.random.default_rng(seed)
    critical = np.asarray(critical, dtype=np.float32)
    critical = critical[np.isfinite(critical)]
    near = [critical]
    up = down = critical
    for _ in range(ulps):
        up, down = np.nextafter(up, np.float32(np.inf)), np.nextafter(down, np.float32(-np.inf))
        near += [up, down]
    span = float(np.max(np.abs(critical))) if critical.size else 1.0
    span = max(span, 1.0) * 2
    noise = rng.uniform(-span, span, 4096).astype(np.float32)
    # Not beyond ~1e5: QKeras's ``x + (q - x)`` cancels q away for |x| near 2**24 steps.
    huge = np.float32([0.0, -0.0, 1e5, -1e5, 1e3, -1e3, 1e-30, -1e-30])
    x = np.concatenate([*near, noise, huge])
    return x[(x == 0) | (np.abs(x) >= _TINY)]


def _near(x: np.ndarray, ties: np.ndarray, relative: float = 1e-3) -> np.ndarray:
    """Inputs within ``relative`` (times max(1, |tie|)) of a tie."""
    ties = np.sort(np.asarray(ties, dtype=np.float64))
    if ties.size == 0:
        return np.zeros(x.shape, dtype=bool)
    k = np.clip(np.searchsorted(ties, x), 1, ties.size) - 1
    near = np.zeros(x.shape, dtype=bool)
    for j in (k, np.minimum(k + 1, ties.size - 1)):
        near |= np.abs(x - ties[j]) <= relative * np.maximum(1.0, np.abs(ties[j]))
    return near


def _equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Equal up to the float32 rounding of QKeras's ``x + (q - x)`` (2 ulps)."""
    ulp = np.spacing(np.maximum(np.abs(a), np.abs(b)).astype(np.float32))
    return (np.abs(a - b) <= 2 * ulp) | (np.isnan(a) & np.isnan(b))


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.all(_equal(a, b)))
