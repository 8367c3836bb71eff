"""Builders for the QONNX quantization nodes, exactly as the QONNX paper's Table II defines them.

Every builder validates its parameters before it emits anything: a Quant node with a zero or
negative scale, an out-of-range zero point or a scale that does not broadcast would execute,
but compute something other than the source model did, and that is the one thing a converter
must never do silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.errors import ConversionError

QONNX_DOMAIN = "qonnx.custom_op.general"
# qonnx resolves custom ops by "since version"; version 1 selects the paper's Trunc (v1).
QONNX_DOMAIN_VERSION = 1
# The QONNX quantizer op types (Quant, its IntQuant spelling, BipolarQuant, Trunc, and
# qonnx 1.0's minifloat FloatQuant, ``float_quant``).
QUANT_OP_TYPES = frozenset({"Quant", "IntQuant", "BipolarQuant", "Trunc", "FloatQuant"})

# The modes qonnx's executor implements. ROUND is round-half-to-even (the paper's "ROUND").
QUANT_ROUNDING_MODES = ("ROUND", "HALF_EVEN", "HALF_UP", "HALF_DOWN", "UP", "DOWN", "CEIL", "FLOOR")
TRUNC_ROUNDING_MODES = ("ROUND", "CEIL", "FLOOR")
# The paper names round-toward-zero ROUND_TO_ZERO; qonnx executes it under the name DOWN.
_ROUNDING_ALIASES = {"ROUND_TO_ZERO": "DOWN"}

Shape = Sequence["int | str | None"]


@dataclass
class QuantNode:
    """A quantization node plus the initializers that feed its parameter inputs."""

    node: onnx.NodeProto
    initializers: list[onnx.TensorProto] = field(default_factory=list)

    def add_to(self, graph: onnx.GraphProto) -> None:
        graph.node.append(self.node)
        graph.initializer.extend(self.initializers)


def int_range(bit_width: float, signed: bool, narrow: bool) -> tuple[float, float]:
    """The clamp bounds of Eq. 2-3, narrowed by one at the bottom (signed) or top (unsigned)."""
    if signed:
        lo, hi = -(2.0 ** (bit_width - 1)), 2.0 ** (bit_width - 1) - 1
        return (lo + 1 if narrow else lo), hi
    hi = 2.0**bit_width - 1
    return 0.0, (hi - 1 if narrow else hi)


def make_quant(
    x: str,
    y: str,
    scale: np.typing.ArrayLike,
    zero_point: np.typing.ArrayLike = 0.0,
    bit_width: np.typing.ArrayLike = 8,
    *,
    signed: bool = True,
    narrow: bool = False,
    rounding_mode: str = "ROUND",
    x_shape: Shape | None = None,
    axis: int | None = None,
    name: str | None = None,
    op_type: str = "Quant",
) -> QuantNode:
    """Quant(x, scale, zero_point, bit_width) -> y, i.e. dequantize(quantize(x)) of Eq. 1-4.

    With ``axis`` the scale (and a non-scalar zero point) is one value per slice along that
    axis of ``x`` and is reshaped to broadcast there; ``x_shape`` is then required, so the
    MLIR quant-dialect integrity rules (axis within rank, one scale per slice) can be checked.
    ``op_type="IntQuant"`` emits qonnx's newer name for the same operator.
    """
    where = name or y
    if op_type not in ("Quant", "IntQuant"):
        raise ConversionError(f"unknown quantizer op type {op_type!r}", where)
    rounding_mode = _check_rounding_mode(rounding_mode, QUANT_ROUNDING_MODES, where)
    bw = _as_float_array(bit_width, "bit_width", where)
    if not np.all(np.isfinite(bw)) or np.any(bw < 2):
        raise ConversionError(f"Quant bit_width must be finite and >= 2, got {_show(bw)}", where)
    scale_a = _check_scale(scale, where)
    zp = _as_float_array(zero_point, "zero_point", where)
    _check_zero_point(zp, bw, signed, narrow, where)
    scale_a, zp = _place_on_axis(where, x_shape, axis, scale=scale_a, zero_point=zp)
    for label, value in (("scale", scale_a), ("zero_point", zp), ("bit_width", bw)):
        _check_broadcast(value, x_shape, label, where)
    inits = _initializers(y, scale=scale_a, zeropt=zp, bitwidth=bw)
    node = helper.make_node(
        op_type,
        [x, *(t.name for t in inits)],
        [y],
        name=name or _default_name(y, op_type),
        domain=QONNX_DOMAIN,
        signed=int(bool(signed)),
        narrow=int(bool(narrow)),
        rounding_mode=rounding_mode,
    )
    return QuantNode(node, inits)


def make_bipolar_quant(
    x: str,
    y: str,
    scale: np.typing.ArrayLike = 1.0,
    *,
    x_shape: Shape | None = None,
    axis: int | None = None,
    name: str | None = None,
) -> QuantNode:
    """BipolarQuant(x, scale) -> y: +scale where x >= 0, -scale elsewhere."""
    where = name or y
    scale_a = _check_scale(scale, where)
    (scale_a,) = _place_on_axis(where, x_shape, axis, scale=scale_a)
    _check_broadcast(scale_a, x_shape, "scale", where)
    inits = _initializers(y, scale=scale_a)
    node = helper.make_node(
        "BipolarQuant",
        [x, inits[0].name],
        [y],
        name=name or _default_name(y, "BipolarQuant"),
        domain=QONNX_DOMAIN,
    )
    return QuantNode(node, inits)


def make_trunc(
    x: str,
    y: str,
    scale: np.typing.ArrayLike,
    zero_point: np.typing.ArrayLike,
    in_bit_width: np.typing.ArrayLike,
    out_bit_width: np.typing.ArrayLike,
    *,
    rounding_mode: str = "FLOOR",
    x_shape: Shape | None = None,
    axis: int | None = None,
    name: str | None = None,
) -> QuantNode:
    """Trunc(x, scale, zero_point, in_bit_width, out_bit_width) -> y: drops the LSBs
    in_bit_width - out_bit_width of a value already on the (scale, zero_point) grid."""
    where = name or y
    rounding_mode = _check_rounding_mode(rounding_mode, TRUNC_ROUNDING_MODES, where)
    in_bw = _as_float_array(in_bit_width, "in_bit_width", where)
    out_bw = _as_float_array(out_bit_width, "out_bit_width", where)
    for label, bw in (("in_bit_width", in_bw), ("out_bit_width", out_bw)):
        if not np.all(np.isfinite(bw)) or np.any(bw < 2):
            raise ConversionError(f"Trunc {label} must be finite and >= 2, got {_show(bw)}", where)
    if np.any(in_bw < out_bw):
        raise ConversionError(
            f"Trunc out_bit_width {_show(out_bw)} exceeds in_bit_width {_show(in_bw)}", where
        )
    scale_a = _check_scale(scale, where)
    zp = _as_float_array(zero_point, "zero_point", where)
    if not np.all(np.isfinite(zp)) or np.any(zp != np.round(zp)):
        raise ConversionError(f"zero_point must be integer-valued, got {_show(zp)}", where)
    scale_a, zp = _place_on_axis(where, x_shape, axis, scale=scale_a, zero_point=zp)
    values = {"scale": scale_a, "zeropt": zp, "in_bitwidth": in_bw, "out_bitwidth": out_bw}
    for label, value in values.items():
        _check_broadcast(value, x_shape, label, where)
    inits = _initializers(y, **values)
    node = helper.make_node(
        "Trunc",
        [x, *(t.name for t in inits)],
        [y],
        name=name or _default_name(y, "Trunc"),
        domain=QONNX_DOMAIN,
        rounding_mode=rounding_mode,
    )
    return QuantNode(node, inits)


def _default_name(y: str, op_type: str) -> str:
    return f"{y}_{op_type}"


def _initializers(y: str, **values: np.ndarray) -> list[onnx.TensorProto]:
    return [
        numpy_helper.from_array(np.asarray(v, dtype=np.float32), f"{y}_{label}")
        for label, v in values.items()
    ]


def _as_float_array(value: np.typing.ArrayLike, label: str, where: str) -> np.ndarray:
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ConversionError(f"{label} is not numeric: {exc}", where) from None


def _check_scale(scale: np.typing.ArrayLike, where: str) -> np.ndarray:
    s = _as_float_array(scale, "scale", where)
    if s.size == 0:
        raise ConversionError("scale is empty", where)
    if not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise ConversionError(f"scale must be finite and > 0, got {_show(s)}", where)
    if np.any(np.float32(s) <= 0) or not np.all(np.isfinite(np.float32(s))):
        raise ConversionError(f"scale {_show(s)} is not representable in float32", where)
    return s


def _check_zero_point(zp: np.ndarray, bw: np.ndarray, signed: bool, narrow: bool, where: str):
    if not np.all(np.isfinite(zp)) or np.any(zp != np.round(zp)):
        raise ConversionError(f"zero_point must be integer-valued, got {_show(zp)}", where)
    lo, hi = int_range(np.min(bw), signed, narrow)
    if np.any(zp < lo) or np.any(zp > hi):
        kind = "signed" if signed else "unsigned"
        raise ConversionError(
            f"zero_point {_show(zp)} outside the {kind} {_show(np.min(bw))}-bit range "
            f"[{lo:g}, {hi:g}]",
            where,
        )


def _place_on_axis(
    where: str, x_shape: Shape | None, axis: int | None, **params: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Reshape per-axis parameters to [1, .., C, .., 1] after checking MLIR's integrity rules."""
    if axis is None:
        return tuple(params.values())
    if x_shape is None:
        raise ConversionError("per-axis quantization needs the quantized tensor's shape", where)
    rank = len(x_shape)
    if not -rank <= axis < rank:
        raise ConversionError(f"quantization axis {axis} is not in a rank-{rank} tensor", where)
    axis %= rank
    channels = x_shape[axis]
    out = []
    for label, value in params.items():
        if value.size == 1:
            out.append(value.reshape(()))
            continue
        if value.ndim != 1:
            raise ConversionError(f"per-axis {label} must be 1-D, got shape {value.shape}", where)
        if isinstance(channels, int) and value.size != channels:
            raise ConversionError(
                f"per-axis {label} has {value.size} values but axis {axis} of shape "
                f"{tuple(x_shape)} has {channels}",
                where,
            )
        bshape = [1] * rank
        bshape[axis] = value.size
        out.append(value.reshape(bshape))
    return tuple(out)


def _check_broadcast(value: np.ndarray, x_shape: Shape | None, label: str, where: str) -> None:
    """Parameters must broadcast *to* x (never enlarge it); a dynamic dim only takes size 1."""
    if x_shape is None or value.ndim == 0:
        return
    if value.ndim > len(x_shape):
        raise ConversionError(
            f"{label} of shape {value.shape} has a higher rank than x {tuple(x_shape)}", where
        )
    for p_dim, x_dim in zip(reversed(value.shape), reversed(tuple(x_shape)), strict=False):
        if p_dim == 1 or (isinstance(x_dim, int) and x_dim == p_dim):
            continue
        raise ConversionError(
            f"{label} of shape {value.shape} does not broadcast to x of shape {tuple(x_shape)}",
            where,
        )


def _check_rounding_mode(mode: str, allowed: tuple[str, ...], where: str) -> str:
    normalized = _ROUNDING_ALIASES.get(str(mode).upper(), str(mode).upper())
    if normalized not in allowed:
        raise ConversionError(f"rounding_mode {mode!r} is not one of {', '.join(allowed)}", where)
    return normalized


def _show(a: np.ndarray) -> str:
    flat = np.asarray(a).ravel()
    text = ", ".join(f"{v:g}" for v in flat[:4])
    return text if flat.size <= 4 else f"[{text}, ... ({flat.size} values)]"
