"""One HGQ2 fixed-point quantizer: its per-element (k, i, f) and modes, and its exact forms.

HGQ2 (``hgq.quantizer.Quantizer`` around ``FixedPointQuantizerKBI`` / ``KIF``, arithmetic from
the ``quantizers`` package) gives every element its own sign bit k, integer bits i and
fractional bits f. At inference (``training`` false) it computes, per element, with
i' = max(i, -f):

* SAT / SAT_SYM: clip to [-k 2^i', 2^i' - 2^-f] (SAT_SYM: [-k (2^i' - 2^-f), ...]), then round;
* WRAP: round, then ((x + k 2^(i'+k-1)) mod 2^(i'+k)) - k 2^(i'+k-1) (floor mod);
* WRAP_SM: the reflecting wrap of ``quantizers``' ``wrap_sm_fn`` around the rounded value;
* round(x) = round_mode(x * 2^f) * 2^-f, round_mode one of TRN, RND (ties to +inf), RND_CONV,
  TRN_ZERO, RND_ZERO, RND_MIN_INF, RND_INF (S_ modes round alike outside training);
* an element with k + i + f <= 0 outputs 0.

qonnx's Quant holds none of per-element widths, wraps or ties to +inf, so a quantizer becomes
(``tf_apply``) that arithmetic as TensorFlow ops in the stripped model, which tf2onnx writes as
standard ONNX ops, followed by a covering Quant (``covering_spec``: scalar bit width, the widest
element's) that is the identity on the result's grid. A quantizer with uniform widths, SAT /
SAT_SYM overflow and a rounding Quant has (RND_CONV, TRN) is a plain Quant (``plain_spec``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from qkeras2qonnx.compat import hgq2 as compat_hgq2
from qkeras2qonnx.emit.spec import QUANT, QuantSpec
from qkeras2qonnx.hgq2_layers import hgq2_float
from qkeras2qonnx.hgq2_layers.hgq2_float import Minifloat, read_float
from qonnx_ingest.errors import ConversionError

ROUND_MODES = ("TRN", "RND", "RND_CONV", "TRN_ZERO", "RND_ZERO", "RND_MIN_INF", "RND_INF")
OVERFLOW_MODES = ("WRAP", "SAT", "SAT_SYM", "WRAP_SM")
# HGQ2 rounding -> the Quant rounding mode that computes it (others have no Quant form).
_QUANT_ROUNDING = {"RND_CONV": "ROUND", "TRN": "FLOOR"}


@dataclass(eq=False)
class Fixed:
    """An HGQ2 fixed-point quantizer at inference; k, i, f broadcast against its tensor
    (Keras layout, batch axis first). ``bounded`` is False where HGQ2 only rounds (a trainable
    WRAP weight quantizer): then neither overflow nor the zero-width rule applies."""

    name: str
    k: np.ndarray
    i: np.ndarray
    f: np.ndarray
    round_mode: str
    overflow_mode: str
    bounded: bool = True
    # HGQ2's post-quantization ``affine`` (scale, shift): y * scale + shift (GRU's hard-sigmoid
    # gate quantizer); only where the caller allows it (``read_quantizer(affine_ok=True)``).
    affine: tuple[float, float] | None = None

    @property
    def i_eff(self) -> np.ndarray:
        return np.maximum(self.i, -self.f)

    @property
    def active(self) -> np.ndarray:
        return (self.k + self.i + self.f) > 0

    def widths(self) -> dict[str, Any]:
        """What the metadata records (``qkeras2qonnx.hgq2_widths``), Keras layout."""
        return {
            "shape": list(self.k.shape),
            "k": self.k.astype(int).ravel().tolist(),
            "i": self.i.astype(int).ravel().tolist(),
            "f": self.f.astype(int).ravel().tolist(),
            "round_mode": self.round_mode,
            "overflow_mode": self.overflow_mode,
            **({"affine": list(self.affine)} if self.affine is not None else {}),
        }

    def form(self) -> str:
        return (
            f"HGQ2 fixed-point {self.round_mode}/{self.overflow_mode} with per-element "
            "(k, i, f) in standard ops"
        )


def read_quantizer(quantizer: Any, where: str, affine_ok: bool = False) -> Fixed | Minifloat | None:
    """The ``Fixed`` (or ``Minifloat``) of an ``hgq`` ``Quantizer`` layer; None for a dummy
    (identity) one. ``affine_ok``: the caller handles a fixed-point quantizer's ``affine``
    (tables, sums and plain Quants do not)."""
    from keras import ops

    where = f"{where} {getattr(quantizer, 'name', '')}".strip()
    affine = getattr(quantizer, "affine", None)
    for attribute in ("scaler", "affine"):
        if getattr(quantizer, attribute, None) is not None and not (
            attribute == "affine" and affine_ok
        ):
            raise ConversionError(f"HGQ2 quantizer with {attribute} is not supported", where)
    inner = getattr(quantizer, "quantizer", quantizer)
    kind = type(inner).__name__
    if getattr(inner, "__dummy__", False):
        return None
    if kind == "FloatPointQuantizer":  # a minifloat: qonnx's FloatQuant (hgq2_float)
        if affine is not None:
            raise ConversionError("HGQ2 minifloat quantizer with affine is not supported", where)
        return read_float(inner, quantizer.name, where)
    if kind not in ("FixedPointQuantizerKBI", "FixedPointQuantizerKIF"):
        raise ConversionError(f"unsupported HGQ2 quantizer {kind}", where)
    round_mode = inner.round_mode.removeprefix("S_")  # stochastic only while training
    overflow = inner.overflow_mode
    if round_mode not in ROUND_MODES or overflow not in OVERFLOW_MODES:
        raise ConversionError(f"unsupported HGQ2 modes {inner.round_mode}/{overflow}", where)
    k, i, f = (np.asarray(ops.convert_to_numpy(v), dtype=np.float64) for v in inner.kif)
    k, i, f = np.broadcast_arrays(k, i, f)
    bounded = True
    if overflow == "WRAP" and inner.trainable and compat_hgq2.is_weight_quantizer(inner):
        # quantizers' call: a trainable WRAP weight quantizer (KIF; KBI only with RND) rounds
        # and returns, without wrap or zero-width masking.
        bounded = kind == "FixedPointQuantizerKBI" and inner.stateless_quantizer.round_mode != "RND"
    fixed = Fixed(quantizer.name, k.copy(), i.copy(), f.copy(), round_mode, overflow, bounded)
    if affine is not None:
        fixed.affine = (float(affine[0]), float(affine[1]))
        _affine_step(fixed, where)
    return fixed


def _affine_step(q: Fixed, where: str) -> int:
    """The exponent e with every output of ``q`` (affine included) a multiple of 2^e: the
    affine scale must be a positive power of two, the shift a multiple of the scaled step."""
    scale, shift = q.affine
    exponent = np.log2(scale) if scale > 0 else np.nan
    active = np.broadcast_to(q.active, q.k.shape)
    top = int(q.f[active].max()) if np.any(active) else 0
    step = int(exponent) - top if np.isfinite(exponent) else 0
    if not np.isfinite(exponent) or exponent != int(exponent) or shift % 2.0**step:
        raise ConversionError(
            f"HGQ2 quantizer affine {q.affine}: not a power-of-two scale with a shift on the "
            "scaled grid, so its outputs have no exact Quant grid",
            where,
        )
    return step


def plain_spec(q: Fixed | Minifloat) -> QuantSpec | None:
    """The one Quant that computes ``q`` exactly, if its widths are uniform and it saturates
    with a rounding Quant has; else None."""
    if isinstance(q, Minifloat):
        return hgq2_float.plain_spec(q)
    if q.affine is not None:
        return None
    if not q.bounded or q.overflow_mode not in ("SAT", "SAT_SYM") or not np.all(q.active):
        return None
    rounding = _QUANT_ROUNDING.get(q.round_mode)
    k, i, f = q.k.ravel(), q.i_eff.ravel(), q.f.ravel()
    if rounding is None or np.ptp(k) or np.ptp(i) or np.ptp(f) or k[0] + i[0] + f[0] < 2:
        return None  # (QONNX's Quant has 2 bits at least: a 1-bit one is standard ops)
    signed = bool(k[0])
    return QuantSpec(
        QUANT,
        np.float32(2.0 ** -f[0]),
        bit_width=int(k[0] + i[0] + f[0]),
        signed=signed,
        narrow=signed and q.overflow_mode == "SAT_SYM",
        rounding_mode=rounding,
    )


# QONNX's Quant takes 2 bits at least; a covering Quant of a 1-bit grid is one bit wider (still
# the identity on it).
_MIN_BITS = 2


def covering_spec(q: Fixed | Minifloat, where: str, values: np.ndarray | None = None) -> QuantSpec:
    """A Quant that is the identity on every value ``q`` outputs: scale 2^-F with F the largest
    f, scalar bit width the widest element's. ``values`` (a weight's quantized values) are
    checked to pass through it unchanged."""
    if isinstance(q, Minifloat):
        return hgq2_float.covering_spec(q, where, values)
    if q.affine is not None:
        return _affine_spec(q, where)
    active = np.broadcast_to(q.active, np.broadcast_shapes(q.k.shape, q.active.shape))
    if not q.bounded:
        if values is None:
            raise ConversionError("a rounding-only HGQ2 quantizer on a data path", where)
        return _values_spec(q, values, where)
    if not np.any(active):  # every element outputs 0
        spec = QuantSpec(QUANT, np.float32(1.0), bit_width=_MIN_BITS, signed=False)
    else:
        top = int(q.f[active].max())
        signed = bool(np.any(q.k[active]))
        bits = max(int((q.i_eff[active] + top).max()) + int(signed), _MIN_BITS)
        spec = QuantSpec(QUANT, np.float32(2.0**-top), bit_width=bits, signed=signed)
    if values is not None:
        _check_identity(spec, values, where)
    return spec


def _affine_spec(q: Fixed, where: str) -> QuantSpec:
    """A Quant that is the identity on ``q``'s outputs after its affine: step 2^e
    (``_affine_step``), the integer range of the affine image of every element's range."""
    step = _affine_step(q, where)
    scale, shift = q.affine
    active = np.broadcast_to(q.active, q.k.shape)
    k, i, f = (np.broadcast_to(a, q.k.shape)[active] for a in (q.k, q.i_eff, q.f))
    ends = np.concatenate([-k * 2.0**i, 2.0**i - 2.0**-f, [0.0]]) * scale + shift
    low, high = float(ends.min()) * 2.0**-step, float(ends.max()) * 2.0**-step
    signed = low < 0
    span = max(abs(low), high + 1) if signed else high + 1
    bits = max(int(np.ceil(np.log2(span))) + int(signed), 1)
    return QuantSpec(QUANT, np.float32(2.0**step), bit_width=bits, signed=signed)


def _values_spec(q: Fixed, values: np.ndarray, where: str) -> QuantSpec:
    top = int(q.f.max())
    ints = np.asarray(values, dtype=np.float64) * 2.0**top
    signed = bool(np.any(ints < 0))
    span = float(np.abs(ints).max()) if ints.size else 0.0
    bits = max(int(np.ceil(np.log2(span + 1))) + int(signed), _MIN_BITS)
    spec = QuantSpec(QUANT, np.float32(2.0**-top), bit_width=bits, signed=signed)
    _check_identity(spec, values, where)
    return spec


def _check_identity(spec: QuantSpec, values: np.ndarray, where: str) -> None:
    values = np.asarray(values, dtype=np.float32)
    if not np.array_equal(spec.apply(values), values):
        raise ConversionError(f"the covering {spec.describe()} changes the weight", where)


def reference(q: Fixed | Minifloat, x: np.ndarray) -> np.ndarray:
    """HGQ2's inference arithmetic in numpy float32, op for op (the tests' hand-derived side)."""
    if isinstance(q, Minifloat):
        return hgq2_float.reference(q, x)
    return _apply(q, np.asarray(x, dtype=np.float32), _NumpyOps())


def tf_apply(q: Fixed | Minifloat, x: Any) -> Any:
    """HGQ2's inference arithmetic as TensorFlow ops on ``x`` (inside the stripped model)."""
    if isinstance(q, Minifloat):
        return hgq2_float.tf_apply(q, x)
    return _apply(q, x, _TensorFlowOps())


def _apply(q: Fixed, x: Any, o: Any) -> Any:
    f32 = np.float32
    f, i, k = q.f, q.i_eff, q.k
    scale, inverse = f32(2.0**f), f32(2.0**-f)
    if q.overflow_mode == "WRAP_SM":
        y = _wrap_sm(q, x, o)
    else:
        if q.bounded and q.overflow_mode != "WRAP":
            high = f32(2.0**i - 2.0**-f)
            low = f32(-k * high) if q.overflow_mode == "SAT_SYM" else f32(-k * 2.0**i)
            x = o.where(o.greater(x, high), high, o.where(o.less(x, low), low, x))
        y = o.mul(_round(q.round_mode, o.mul(x, scale), o), inverse)
        if q.bounded and q.overflow_mode == "WRAP":
            bias = f32(k * 2.0 ** (i + k - 1))
            y = o.sub(_floor_mod(o.add(y, bias), i + k, o), bias)
    if q.bounded and not np.all(q.active):
        y = o.where(np.broadcast_to(q.active, q.k.shape), y, f32(0.0))
    if q.affine is not None:  # HGQ2's Quantizer.call: outputs * scale + shift
        y = o.add(o.mul(y, f32(q.affine[0])), f32(q.affine[1]))
    return y


def _wrap_sm(q: Fixed, x: Any, o: Any) -> Any:
    """``quantizers``' wrap_sm_fn (reflecting wrap) around the rounding, op for op."""
    f32 = np.float32
    f, i, k = q.f, q.i_eff, q.k
    eps = f32(2.0**-f)
    high = f32(2.0**i - 2.0**-f)
    low = f32(-(2.0**i) * k)
    two = np.ones_like(i)  # the exponent of 2
    c1 = o.ge(_floor_mod(o.mul(x, f32(2.0 ** -(i + k))), two, o), f32(1.0))
    c1 = o.and_(c1, o.greater(o.abs(x), f32(eps / 2)))
    half = o.mul(o.add(x, f32(eps / 2)), f32(2.0 ** -(i + k - 1)))
    c2 = o.ge(_floor_mod(half, two, o), f32(1))
    qx = o.mul(_round(q.round_mode, o.mul(x, f32(2.0**f)), o), f32(2.0**-f))
    mapped = o.add(_floor_mod(o.sub(o.sub(qx, high), eps), i + k, o), low)
    mapped = o.where(c2, o.sub(o.neg(mapped), eps), mapped)
    return o.where(c1, o.sub(o.neg(mapped), eps), mapped)


def _floor_mod(y: Any, exponent: np.ndarray, o: Any) -> Any:
    """y mod 2^exponent with the sign of the divisor, as a floor mod: every step is exact.
    Division is written as a product with the exact reciprocal (tf2onnx rewrites a division
    by a constant into a product with a reciprocal it rounds)."""
    m, inverse = np.float32(2.0**exponent), np.float32(2.0**-exponent)
    return o.sub(y, o.mul(o.floor(o.mul(y, inverse)), m))


def _round(mode: str, x: Any, o: Any) -> Any:
    half = np.float32(0.5)
    if mode == "TRN":
        return o.floor(x)
    if mode == "RND":
        return o.floor(o.add(x, half))
    if mode == "RND_CONV":
        return o.round_even(x)
    if mode == "TRN_ZERO":
        return o.mul(o.floor(o.abs(x)), o.sign(x))
    if mode == "RND_ZERO":
        return o.mul(o.neg(o.floor(o.add(o.neg(o.abs(x)), half))), o.sign(x))
    if mode == "RND_MIN_INF":
        return o.neg(o.floor(o.add(o.neg(x), half)))
    return o.mul(o.floor(o.add(o.abs(x), half)), o.sign(x))  # RND_INF


class _NumpyOps:
    where, greater, less = staticmethod(np.where), staticmethod(np.greater), staticmethod(np.less)
    ge, floor, abs = staticmethod(np.greater_equal), staticmethod(np.floor), staticmethod(np.abs)
    sign, neg, round_even = staticmethod(np.sign), staticmethod(np.negative), staticmethod(np.round)
    and_ = staticmethod(np.logical_and)

    @staticmethod
    def _f(a: Any) -> np.ndarray:
        return np.asarray(a, dtype=np.float32)

    def add(self, a, b):
        return np.add(self._f(a), self._f(b))

    def sub(self, a, b):
        return np.subtract(self._f(a), self._f(b))

    def mul(self, a, b):
        return np.multiply(self._f(a), self._f(b))


class _TensorFlowOps:
    def __getattr__(self, name: str) -> Any:
        import tensorflow as tf

        table = {
            "where": tf.where,
            "greater": tf.greater,
            "less": tf.less,
            "ge": tf.greater_equal,
            "floor": tf.floor,
            "abs": tf.abs,
            "sign": tf.sign,
            "neg": tf.negative,
            "round_even": tf.round,
            "and_": tf.logical_and,
            "add": tf.add,
            "sub": tf.subtract,
            "mul": tf.multiply,
        }
        op = table[name]
        if name in ("add", "sub", "mul", "greater", "less", "ge"):
            return lambda a, b: op(*_tensors(a, b))
        if name == "where":
            return lambda c, a, b: op(*_tensors(c, a, b))
        return op


def _tensors(*values: Any) -> list[Any]:
    import tensorflow as tf

    return [tf.constant(v) if isinstance(v, np.ndarray | np.generic) else v for v in values]
