"""HGQ2's minifloat quantizer (``FloatPointQuantizer``) and its exact QONNX forms.

Per element, with m mantissa bits, e exponent bits and offset e0 (hgq2 0.2.0, ``quantizers``'
``float_quantize``): the exponent range is [lo, hi] = [e0 + 1 - E, e0 + E - 1] with
E = max(2^(e-1), 1); x is rounded half to even at step 2^(clip(floor(log2 |x|), lo, hi) - m)
and clipped to +-(2 - 2^-m) 2^hi. That is a minifloat with subnormals and no inf/NaN: qonnx
1.0's FloatQuant with exponent_bitwidth max(e, 1), mantissa_bitwidth m and exponent_bias
2^(max(e, 1) - 1) - e0.

One difference: HGQ2 takes the exponent as ``floor(log2(|x| + 1e-7))`` in float32, and
TensorFlow's log2 (``log(x) / log(2)``) misrounds within ~3e-6 (relative) of a power of two.
Near 2^j the value then rounds at the next exponent's step; when that step's half exceeds the
displacement (1e-7 plus 4e-6 relative) the result is 2^j either way and the forms agree. The
converter checks that for the smallest exponent step where it matters (``check_exact``) and
refuses the quantizer otherwise, naming it: there HGQ2's rounding depends on the last bit of
TensorFlow's logarithm, which no ONNX runtime reproduces.

Uniform parameters: one FloatQuant (``plain_spec``). Per-element ones: the minifloat in
standard ops (exponent counted by comparisons, powers of two gathered from a table, no float
logarithm) before a covering FloatQuant as wide as the widest element (``covering_spec``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from qkeras2qonnx.emit.spec import FLOAT, QuantSpec
from qonnx_ingest.errors import ConversionError

# HGQ2's float32 exponent: log2(|x| + 1e-7), TensorFlow's log2 off within this relative span.
_EPS, _LOG2_SPAN = 1.0e-7, 4.0e-6


@dataclass(eq=False)
class Minifloat:
    """An HGQ2 minifloat quantizer at inference; m, e, e0 broadcast against its tensor (Keras
    layout, batch axis first). Duck-types ``Fixed`` where the sums and table checks read
    widths: every value is a multiple of 2^-f and below 2^i_eff in magnitude."""

    name: str
    m: np.ndarray
    e: np.ndarray
    e0: np.ndarray
    round_mode: str = "RND_CONV"
    overflow_mode: str = "SAT_SYM"
    bounded: bool = True

    @property
    def low(self) -> np.ndarray:
        return self.e0 + 1 - np.maximum(2.0 ** (self.e - 1), 1.0)

    @property
    def high(self) -> np.ndarray:
        return self.e0 + np.maximum(2.0 ** (self.e - 1), 1.0) - 1

    @property
    def k(self) -> np.ndarray:
        return np.ones_like(self.m)

    @property
    def f(self) -> np.ndarray:
        return self.m - self.low

    @property
    def i_eff(self) -> np.ndarray:
        return self.high + 1

    @property
    def active(self) -> np.ndarray:
        return np.ones(self.m.shape, dtype=bool)

    @property
    def uniform(self) -> bool:
        return not (np.ptp(self.m) or np.ptp(self.e) or np.ptp(self.e0))

    def widths(self) -> dict[str, Any]:
        """What the metadata records (``qkeras2qonnx.hgq2_widths``), Keras layout."""
        return {
            "shape": list(self.m.shape),
            "type": "float",
            "m": self.m.astype(int).ravel().tolist(),
            "e": self.e.astype(int).ravel().tolist(),
            "e0": self.e0.astype(int).ravel().tolist(),
        }

    def form(self) -> str:
        return "HGQ2 minifloat with per-element (m, e, e0) in standard ops"


def read_float(inner: Any, name: str, where: str) -> Minifloat:
    """The ``Minifloat`` of a ``FloatPointQuantizer``, checked to have an exact form."""
    from keras import ops

    m, e, e0 = (
        np.asarray(ops.convert_to_numpy(v), dtype=np.float64) for v in (inner.m, inner.e, inner.e0)
    )
    m, e, e0 = (a.copy() for a in np.broadcast_arrays(m, e, e0))
    q = Minifloat(name, m, e, e0)
    check_exact(q, where)
    return q


def check_exact(q: Minifloat, where: str) -> None:
    """Refuse what has no exact form (see the module docstring), naming the reason."""
    if np.any(q.m < 0):
        raise ConversionError(
            "HGQ2 minifloat with m = -1 mantissa bits (powers of two only): qonnx's FloatQuant "
            "has no such format; refused",
            where,
        )
    if np.any(q.low - q.m < -100) or np.any(q.high > 100):
        raise ConversionError(
            "HGQ2 minifloat exponents beyond +-100: float32 steps of that size are not exact; "
            "refused",
            where,
        )
    spread = q.high > q.low
    worst = _EPS * 2.0 ** -(q.low + 1) + _LOG2_SPAN  # displacement, relative to 2^(lo + 1)
    bad = spread & (worst >= 2.0 ** (-2 - q.m))  # half the step below 2^(lo + 1), relative
    if np.any(bad):
        index = np.argwhere(bad)[0]
        lo, m = int(q.low[tuple(index)]), int(q.m[tuple(index)])
        raise ConversionError(
            f"HGQ2 minifloat with smallest exponent {lo} and {m} mantissa bits: HGQ2 takes the "
            "exponent as floor(log2(|x| + 1e-7)) in float32 (TensorFlow's log2 misrounds near "
            f"powers of two), which changes its rounding near 2^{lo + 1}; no exact form, refused",
            where,
        )


def _params(q: Minifloat) -> tuple[int, int, int, float]:
    """(E, M, bias, max) of the one FloatQuant format covering every element."""
    exponent_bits = max(1, int(np.max(q.e)))
    low, high, m = int(np.min(q.low)), int(np.max(q.high)), int(np.max(q.m))
    while 2**exponent_bits - 1 < high - low + 1:  # E bits hold 2^E - 1 exponents, low to high
        exponent_bits += 1
    bias = 1 - low  # the subnormals' exponent is 1 - bias
    top = float(np.max((2.0 - 2.0**-q.m) * 2.0**q.high))
    return exponent_bits, m, bias, top


def plain_spec(q: Minifloat) -> QuantSpec | None:
    """The one FloatQuant that computes ``q``, if its parameters are uniform; else None."""
    if not q.uniform:
        return None
    return _spec(q)


def covering_spec(q: Minifloat, where: str, values: np.ndarray | None = None) -> QuantSpec:
    """A FloatQuant that is the identity on every value ``q`` outputs (the widest format);
    ``values`` (a weight's quantized values) are checked to pass through it unchanged."""
    spec = _spec(q)
    if values is not None:
        values = np.asarray(values, dtype=np.float32)
        if not np.array_equal(spec.apply(values), values):
            raise ConversionError(f"the covering {spec.describe()} changes the weight", where)
    return spec


def _spec(q: Minifloat) -> QuantSpec:
    exponent_bits, m, bias, top = _params(q)
    return QuantSpec(FLOAT, np.float32(1.0), minifloat=(exponent_bits, m, bias, top))


def reference(q: Minifloat, x: np.ndarray) -> np.ndarray:
    """The exact minifloat of ``q`` in numpy float32 (a hand-derived side for tests)."""
    return _apply(q, np.asarray(x, dtype=np.float32), _NumpyOps())


def tf_apply(q: Minifloat, x: Any) -> Any:
    """The minifloat as TensorFlow ops (standard ONNX ops after tf2onnx, no logarithm)."""
    import tensorflow as tf

    return _apply(q, x, tf)


def _apply(q: Minifloat, x: Any, o: Any) -> Any:
    """floor(log2 |x|) counted against every exponent of the union range, clipped per
    element; the steps 2^(exponent - m) and their inverses gathered from tables."""
    f32 = np.float32
    base, top = int(np.min(q.low)), int(np.max(q.high))
    thresholds = (2.0 ** np.arange(base + 1, top + 1)).astype(f32)
    magnitude = o.abs(x)
    if thresholds.size:
        above = o.cast(o.greater_equal(o.expand_dims(magnitude, -1), thresholds), f32)
        exponent = o.add(o.reduce_sum(above, -1), f32(base))
    else:
        exponent = o.add(o.multiply(magnitude, f32(0)), f32(base))
    low, high, m = (a.astype(f32) for a in (q.low, q.high, q.m))
    exponent = o.minimum(o.maximum(exponent, low), high)
    shift = int(np.min(q.low - q.m))
    powers = np.arange(shift, int(np.max(q.high - q.m)) + 1)
    index = o.cast(o.subtract(o.subtract(exponent, m), f32(shift)), np.int32)
    step = o.gather((2.0**powers).astype(f32), index)
    inverse = o.gather((2.0**-powers).astype(f32), index)
    significand = o.round(o.multiply(x, inverse))
    at_top = o.equal(exponent, high)
    limit = o.where(at_top, (2.0 ** (q.m + 1) - 1).astype(f32), (2.0 ** (q.m + 1)).astype(f32))
    clipped = o.minimum(o.maximum(significand, o.negative(limit)), limit)
    return o.multiply(clipped, step)


class _NumpyOps:
    """The TensorFlow functions ``_apply`` uses, in numpy float32."""

    abs, greater_equal, equal = (
        staticmethod(np.abs),
        staticmethod(np.greater_equal),
        staticmethod(np.equal),
    )
    minimum, maximum, where = (
        staticmethod(np.minimum),
        staticmethod(np.maximum),
        staticmethod(np.where),
    )
    round, negative = staticmethod(np.round), staticmethod(np.negative)
    add, subtract, multiply = (
        staticmethod(np.add),
        staticmethod(np.subtract),
        staticmethod(np.multiply),
    )
    expand_dims = staticmethod(np.expand_dims)

    @staticmethod
    def cast(a: Any, dtype: Any) -> np.ndarray:
        return np.asarray(a).astype(dtype)

    @staticmethod
    def reduce_sum(a: Any, axis: int) -> np.ndarray:
        return np.sum(a, axis=axis, dtype=np.float32)

    @staticmethod
    def gather(table: np.ndarray, index: Any) -> np.ndarray:
        return table[np.asarray(index)]
