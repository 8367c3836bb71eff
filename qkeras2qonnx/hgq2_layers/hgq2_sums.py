"""Are an HGQ2 layer's float32 sums exact? A bound on every partial sum, from the widths.

HGQ2 layers (QDense, QConv, QEinsumDense, QEinsum, QDot, QSum, QAveragePow2, average pooling,
QAdd / QSubtract / QMultiply, QBatchNormalization, QSoftmax's denominator,
QMultiHeadAttention's einsums) sum products of
quantized values; the ONNX model (and HGQ2's own predict) does so in float32. Every term is a
multiple of the finest product step 2^-F, so every partial sum, in any order, is an exact
float32 as long as its magnitude is at most 2^24 steps. The bound is the layer's own
arithmetic on magnitudes: |weights| (their stored values) against each input element's
largest magnitude 2^i' (i' = max(i, -f); 0 where k + i + f <= 0), in units of 2^-F (F: the
finest weight value step plus the largest f of the inputs). Beyond 2^24 the float32 result can
depend on the summation order (HGQ2's predict, TensorFlow, onnxruntime), while hls4ml sums in
exact fixed point: the converter says so in an ``InexactSum`` warning naming the layer and the
bound, and records it in the metadata (``qkeras2qonnx.hgq2_inexact_sums``). An input without
quantizer (a float input) has no bound and is not checked: nothing about that sum is on a grid.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from qkeras2qonnx.hgq2_layers.hgq2_quantizer import Fixed
from qonnx_ingest.errors import ConversionWarning

SIGNIFICAND_BITS = 24  # float32: every integer of magnitude <= 2^24 is exact


class InexactSum(ConversionWarning):
    """A layer's partial sums can exceed float32's significand: they may round."""


Bound = tuple[float, int]  # (largest partial-sum magnitude, F: the unit is 2^-F)


def check_sums(layer: Any, plan: Any, where: str, inexact: dict[str, str]) -> None:
    """Warn (``InexactSum``) and record in ``inexact`` when ``layer``'s partial sums can
    exceed 2^24 steps."""
    rule = SUM_BOUNDS.get(type(layer).__name__)
    shapes = _input_shapes(layer) if rule is not None else None
    if shapes is None or len(shapes) != len(plan.inputs):
        return
    magnitudes = [_magnitude(q, s) for q, s in zip(plan.inputs, shapes, strict=True)]
    tops = [_top(q) for q in plan.inputs]
    magnitude, top = rule(layer, plan, magnitudes, tops)
    _warn_beyond(magnitude, top, where, inexact)


def _warn_beyond(magnitude: float, top: int, where: str, inexact: dict[str, str]) -> None:
    steps = magnitude * 2.0**top
    if not math.isfinite(steps) or steps <= 2.0**SIGNIFICAND_BITS:
        return  # exact, or a float (unquantized) input: not a sum on a grid
    bits = math.log2(steps)
    text = (
        f"partial sums can reach {steps:.4g} steps of 2^{-top} (2^{bits:.1f}), beyond "
        f"float32's {SIGNIFICAND_BITS}-bit significand: its float32 sums (ONNX and HGQ2's own "
        "predict) may round where hls4ml's fixed-point sums do not"
    )
    inexact[where] = text
    warnings.warn(f"{where}: {text}", InexactSum, stacklevel=3)


def check_einsum(
    equation: str, operands: list[tuple[Fixed, tuple[int, ...]]], where: str, inexact: dict
) -> None:
    """An einsum of quantized operands (QMultiHeadAttention's q . k and attention . v): warn
    (``InexactSum``) when its partial sums can exceed 2^24 steps."""
    magnitudes = [_magnitude(q, shape) for q, shape in operands]
    top = sum(_top(q) for q, _ in operands)
    _warn_beyond(float(np.einsum(equation, *magnitudes).max()), top, where, inexact)


def _input_shapes(layer: Any) -> list[tuple[int, ...]] | None:
    """Each input's shape without the batch axis; None if unknown (called twice, dynamic)."""
    try:
        tensors = layer.input if isinstance(layer.input, list | tuple) else [layer.input]
        shapes = [tuple(t.shape[1:]) for t in tensors]
    except (AttributeError, ValueError):  # never called itself (a sublayer): its build shape
        built = (layer.get_build_config() or {}).get("input_shape")
        if built is None or not isinstance(built, tuple | list):
            return None
        shapes = [tuple(built[1:])]
    return None if any(d is None for s in shapes for d in s) else shapes


def _magnitude(q: Fixed | None, shape: tuple[int, ...]) -> np.ndarray:
    """The largest |value| of each element ``q`` outputs, batch axis 1 first (inf: no
    quantizer, no bound)."""
    top = np.inf if q is None else np.where(q.active, 2.0**q.i_eff, 0.0)
    return np.broadcast_to(top, (1, *shape)).astype(np.float64)


def _top(q: Fixed | None) -> int:
    """The largest f of ``q``'s active elements: its values are multiples of 2^-top."""
    if q is None:
        return 0
    active = np.broadcast_to(q.active, q.k.shape)
    return int(q.f[active].max()) if np.any(active) else 0


def value_exponent(values: np.ndarray) -> int:
    """The smallest F with every value a multiple of 2^-F (float32 values are dyadic)."""
    v = np.abs(np.asarray(values, dtype=np.float64)).ravel()
    v = v[v > 0]
    if not v.size:
        return -1074  # all zero: no step at all (any product with them is 0)
    mantissa, exponent = np.frexp(v)  # v = mantissa * 2^exponent, mantissa in [0.5, 1)
    ints = np.round(mantissa * 2.0**53).astype(np.int64)
    lowest = np.frexp((ints & -ints).astype(np.float64))[1] - 1  # trailing zero bits
    return int(-(exponent - 53 + lowest).min())


def _linear(layer: Any, plan: Any, magnitudes: list[np.ndarray], tops: list[int]) -> Bound:
    """QDense / QConv / QEinsumDense (batch norm folded): the plain layer in float64 with
    |kernel| and |bias| on the input magnitudes (activation off: the sum before it)."""
    config = dict(plan.config, activation="linear", dtype="float64")
    plain = plan.layer_class.from_config(config)
    (x,) = magnitudes
    plain.build(x.shape)
    weights = [np.abs(w).astype(np.float64) for w in plan.weights]
    plain.set_weights(weights)
    from keras import ops

    total = float(np.max(ops.convert_to_numpy(plain(x))))
    top = value_exponent(plan.weights[0]) + tops[0]
    if len(plan.weights) > 1:
        top = max(top, value_exponent(plan.weights[1]))
    return total, top


def _op(layer: Any, plan: Any, magnitudes: list[np.ndarray], tops: list[int]) -> Bound:
    """QSum / QMeanPow2 (a reduce-sum), QAveragePow2 (inputs added), QEinsum; power-of-two
    scales are exact and left out."""
    kind, params = plan.config["kind"], plan.config["params"]
    if kind == "sum":
        return float(np.sum(magnitudes[0], axis=tuple(params["axes"])).max()), tops[0]
    if kind == "average_pow2":
        return float(np.sum(magnitudes, axis=0).max()), max(tops)
    return float(np.einsum(params["equation"], *magnitudes).max()), sum(tops)


def _scale_shift(layer: Any, plan: Any, magnitudes: list[np.ndarray], tops: list[int]) -> Bound:
    """QBatchNormalization: |x| |scale| + |offset|, elementwise."""
    scale, offset = (np.abs(w).astype(np.float64) for w in plan.weights)
    total = float(np.max(magnitudes[0] * scale + offset))
    return total, max(tops[0] + value_exponent(scale), value_exponent(offset))


def _dot(layer: Any, plan: Any, magnitudes: list[np.ndarray], tops: list[int]) -> Bound:
    import keras
    from keras import ops

    dot = keras.layers.Dot(axes=layer.axes, normalize=False, dtype="float64")
    return float(np.max(ops.convert_to_numpy(dot(magnitudes)))), sum(tops)


def _add(layer: Any, plan: Any, magnitudes: list[np.ndarray], tops: list[int]) -> Bound:
    """QAdd / QSubtract: |a| + |b|, elementwise."""
    return float(np.max(sum(magnitudes))), max(tops)


def _multiply(layer: Any, plan: Any, magnitudes: list[np.ndarray], tops: list[int]) -> Bound:
    return float(np.max(np.prod(np.broadcast_arrays(*magnitudes), axis=0))), sum(tops)


def _average(layer: Any, plan: Any, magnitudes: list[np.ndarray], tops: list[int]) -> Bound:
    """Average pooling: the window's (or the whole map's) sum before the power-of-two scale."""
    (x,) = magnitudes
    if type(layer).__name__.startswith("QGlobal"):
        count = x.size // x.shape[-1 if layer.data_format == "channels_last" else 1]
    else:
        count = int(np.prod(layer.pool_size))
    return count * float(x.max()), tops[0]


def _softmax(layer: Any, plan: Any, magnitudes: list[np.ndarray], tops: list[int]) -> Bound:
    """QSoftmax's denominator: the sum of its exp table's outputs along the softmax axes."""
    tables = plan.config["tables"]
    values = tables.exp.values
    count = int(np.prod([magnitudes[0].shape[a] for a in tables.axes]))
    return count * float(np.abs(values).max()), value_exponent(values)


SumRule = Callable[[Any, Any, list[np.ndarray], list[int]], Bound]

SUM_BOUNDS: dict[str, SumRule] = {
    **dict.fromkeys(
        ("QDense", "QBatchNormDense", "QConv1D", "QConv2D", "QConv3D", "QEinsumDense"), _linear
    ),
    "QEinsumDenseBatchnorm": _linear,
    **dict.fromkeys(("QSum", "QMeanPow2", "QAveragePow2", "QEinsum"), _op),
    "QBatchNormalization": _scale_shift,
    "QDot": _dot,
    "QAdd": _add,
    "QSubtract": _add,
    "QMultiply": _multiply,
    **dict.fromkeys(
        (
            "QAveragePooling1D",
            "QAveragePooling2D",
            "QAveragePooling3D",
            "QGlobalAveragePooling1D",
            "QGlobalAveragePooling2D",
            "QGlobalAveragePooling3D",
        ),
        _average,
    ),
    "QSoftmax": _softmax,
}
