"""LiteRT's FLOAT8 tensors (OCP FP8: FLOAT8_E4M3FN, FLOAT8_E5M2) as qonnx's FloatQuant.

No LiteRT 2.3 CPU kernel reads them (DEQUANTIZE and CAST refuse the type), so only constants
convert: the decoded values (ml_dtypes' float8 types, exact in float32) behind a FloatQuant
that names the format, which is the identity on them, then the tensor's scale if it has one.
The schema gives FLOAT8 no quantization of its own; its QuantizationParameters read as
everywhere, ``real = scale * (q - zero_point)`` with q the FP8 value: per-tensor or per-axis
scales with zero points 0 (an offset has no FloatQuant form). Refused: non-constant FLOAT8
tensors, blockwise scales, and constants holding NaN or infinities (FloatQuant's
standard-op form saturates them; no weight needs them).

The formats (OCP 8-bit floating point specification, 2023): E4M3FN has exponent bias 7,
subnormals, no infinities, NaN at S.1111.111 and largest value 448 (1.75 * 2^8); E5M2 is
IEEE-like: bias 15, subnormals, infinities at S.11111.00, NaN above, largest value 57344
(1.75 * 2^15).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import onnx

from qonnx_ingest.errors import ConversionError

if TYPE_CHECKING:
    from tflite2qonnx.model import Tensor


@dataclass(frozen=True)
class Format:
    """One FP8 format as FloatQuant's parameters."""

    exponent_bits: int
    mantissa_bits: int
    exponent_bias: int
    max_val: float
    has_inf: bool


# Tensor.dtype -> its format
FORMATS = {
    "float8_e4m3fn": Format(4, 3, 7, 448.0, has_inf=False),
    "float8_e5m2": Format(5, 2, 15, 57344.0, has_inf=True),
}


def check(tensor: Tensor, where: str) -> None:
    """Refuse what has no FloatQuant form (module docstring)."""
    kind = tensor.dtype.upper()
    if tensor.data is None:
        raise ConversionError(
            f"{kind} activations are not supported: no LiteRT kernel computes them, only "
            f"constant {kind} tensors (weights) convert",
            where,
        )
    q = tensor.quantization
    if q is not None and (q.block_size or np.any(q.zero_point != 0)):
        raise ConversionError(
            f"{kind} constant with a {'blockwise scale' if q.block_size else 'zero point'}: "
            "only per-tensor or per-axis scales have a FloatQuant form",
            where,
        )
    values = np.asarray(tensor.data, np.float32)
    if not np.all(np.isfinite(values)):
        raise ConversionError(f"{kind} constant holds NaN or infinity", where)


def decoded(tensor: Tensor) -> np.ndarray:
    """The FP8 values as float32 (exact), before any scale."""
    return np.asarray(tensor.data, np.float32)


def scaled(tensor: Tensor) -> np.ndarray:
    """The constant's real values: the FP8 values times the scale (per axis if given)."""
    value = decoded(tensor)
    q = tensor.quantization
    if q is None:
        return value
    return (value * _scale(q, value.ndim)).astype(np.float32)


def _scale(q, rank: int) -> np.ndarray:
    scale = np.asarray(q.scale, np.float32)
    if not q.per_axis:
        return scale.reshape(())
    shape = [1] * rank
    shape[q.quantized_dimension] = -1
    return scale.reshape(shape)


def float_quant_constant(
    const: Callable[[np.ndarray, str], str],
    fresh: Callable[[str], str],
    tensor: Tensor,
    perm: tuple[int, ...] | None,
    hint: str,
    out: str,
) -> list[onnx.NodeProto]:
    """The nodes computing ``out``: FloatQuant(decoded FP8 values) [* scale], permuted by
    ``perm``; ``const(value, hint)`` adds an initializer, ``fresh(hint)`` names a value (the
    graph builder's)."""
    from onnx import helper

    from qonnx_ingest.float_quant import make_float_quant

    fmt = FORMATS[tensor.dtype]
    value = decoded(tensor)
    scale = None if tensor.quantization is None else _scale(tensor.quantization, value.ndim)
    if perm is not None:
        value = np.ascontiguousarray(value.transpose(perm))
        if scale is not None and scale.ndim:
            scale = np.ascontiguousarray(scale.transpose(perm))
    raw = const(value, f"{hint}_fp8")
    y = out if scale is None else fresh(f"{hint}_fp8_values")
    node = make_float_quant(
        raw,
        y,
        exponent_bits=fmt.exponent_bits,
        mantissa_bits=fmt.mantissa_bits,
        exponent_bias=fmt.exponent_bias,
        max_val=fmt.max_val,
        name=fresh(f"{hint}_float_quant"),
        has_inf=fmt.has_inf,
        has_nan=True,
    )
    from onnx import numpy_helper

    node.node.input[1:] = [
        const(numpy_helper.to_array(init), init.name) for init in node.initializers
    ]
    if scale is None:
        return [node.node]
    factor = const(scale, f"{hint}_scale")
    return [node.node, helper.make_node("Mul", [y, factor], [out], name=fresh(f"{hint}_scaled"))]
