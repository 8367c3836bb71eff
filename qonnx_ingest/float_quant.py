"""qonnx 1.0's FloatQuant (a minifloat quantizer): its builder, and its standard-op form.

FloatQuant(x, scale, exponent_bitwidth, mantissa_bitwidth, exponent_bias, max_val) rounds
x / scale to the nearest value of a float with E exponent bits, M mantissa bits, the given
bias and subnormals (qonnx's executor always computes subnormals), saturates at
min(max_val, the format's largest value) and multiplies by the scale back
(``qonnx.custom_op.general.floatquant.float_quant``).

onnxruntime has no FloatQuant, so ``standard_ops`` writes it with standard ops for running and
verifying (``quant_lowering`` calls it) without a logarithm: a float ``Log`` can differ in the
last bit between runtimes, and numpy's float32 log2 (qonnx's executor) misrounds the exponent
of values within ~4e-6 (relative) of a power of two. Here the exponent is counted exactly,
``|x| >= 2^j`` against every exponent of the format, and the power of two it selects is
gathered from a table. The two agree wherever such a misrounded exponent changes no result:
for M <= 15 a value that close to 2^j rounds to 2^j at either exponent.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.quant import QONNX_DOMAIN, QuantNode

ROUNDING_MODES = ("ROUND", "FLOOR", "CEIL")


def format_max(exponent_bits: int, mantissa_bits: int, bias: float) -> float:
    """The largest value of the format (qonnx's ``compute_max_val``, every exponent code a
    number: no infinities or NaNs)."""
    return float((2.0 - 2.0**-mantissa_bits) * 2.0 ** (2**exponent_bits - 1 - bias))


def make_float_quant(
    x: str,
    y: str,
    *,
    exponent_bits: int,
    mantissa_bits: int,
    exponent_bias: float,
    max_val: float,
    name: str,
    scale: float = 1.0,
    has_inf: bool = False,
    has_nan: bool = False,
) -> QuantNode:
    """A FloatQuant node (ROUND: ties to even; subnormals; saturating) and its parameters.
    ``has_inf`` / ``has_nan`` describe the format to backends (OCP FP8: E5M2 has both, E4M3FN
    NaN only); qonnx's executor reads them only when not saturating."""
    if exponent_bits < 1 or mantissa_bits < 0 or max_val <= 0 or scale <= 0:
        raise ConversionError(
            f"FloatQuant needs E >= 1, M >= 0 and a positive scale and max_val, got "
            f"E={exponent_bits}, M={mantissa_bits}, max_val={max_val:g}, scale={scale:g}",
            name,
        )
    values = {
        "scale": scale,
        "exponent_bitwidth": exponent_bits,
        "mantissa_bitwidth": mantissa_bits,
        "exponent_bias": exponent_bias,
        "max_val": max_val,
    }
    inits = [
        numpy_helper.from_array(np.asarray(v, dtype=np.float32), f"{y}_{label}")
        for label, v in values.items()
    ]
    node = helper.make_node(
        "FloatQuant",
        [x, *(t.name for t in inits)],
        [y],
        name=name,
        domain=QONNX_DOMAIN,
        rounding_mode="ROUND",
        has_inf=int(has_inf),
        has_nan=int(has_nan),
        has_subnormal=1,
        saturation=1,
    )
    return QuantNode(node, inits)


def apply(
    x: np.typing.ArrayLike,
    exponent_bits: int,
    mantissa_bits: int,
    exponent_bias: float,
    max_val: float,
    scale: float = 1.0,
) -> np.ndarray:
    """What qonnx's executor computes for the node on ``x`` (float32)."""
    from qonnx.custom_op.general.floatquant import float_quant

    f32 = np.float32
    out = float_quant(
        np.asarray(x, dtype=f32),
        f32(scale),
        f32(exponent_bits),
        f32(mantissa_bits),
        f32(exponent_bias),
        max_val=f32(max_val),
    )
    return np.asarray(out, dtype=f32)


Op = Callable[..., str]
Const = Callable[[object, str], str]


def standard_ops(
    x: str, params: list[np.ndarray], rounding: Callable[[str], str], op: Op, const: Const
) -> str:
    """FloatQuant of ``x`` with standard ops (``op(op_type, *inputs, **attrs)`` adds a node,
    ``const(value, hint)`` a constant, ``rounding(y)`` the node's rounding of y; each returns
    a name); its result's name. ``params`` are the constant scale, E, M, bias, max_val.
    Raises ValueError for parameters it has no exact form for (per element, non-integer,
    beyond float32's normal exponents)."""
    if any(np.asarray(p).size != 1 for p in params):
        raise ValueError("per-element FloatQuant parameters")
    scale, e_bits, m_bits, bias, max_val = (float(np.asarray(p).ravel()[0]) for p in params)
    if e_bits != int(e_bits) or m_bits != int(m_bits) or bias != int(bias) or e_bits < 1:
        raise ValueError("FloatQuant widths and bias must be integers, E >= 1")
    low = 1 - int(bias)  # the exponent of the subnormals and the smallest normals
    top = 2 ** int(e_bits) - 1 - int(bias)  # the largest exponent
    m = int(m_bits)
    if low - m < -126 or top + 1 > 127 or m - low > 126:
        raise ValueError("FloatQuant exponents beyond float32's normal range")
    limit = min(format_max(int(e_bits), m, bias), max_val)
    xs = op("Div", x, const(np.float32(scale), "scale"))
    exponents = np.arange(low + 1, top + 2)  # one past the top: overflow rounds then clips
    thresholds = const((2.0**exponents).astype(np.float32), "thresholds")
    axis = const(np.array([-1], dtype=np.int64), "axis")
    above = op("GreaterOrEqual", op("Unsqueeze", op("Abs", xs), axis), thresholds)
    count = op("ReduceSum", op("Cast", above, to=TensorProto.FLOAT), axis, keepdims=0)
    index = op("Cast", count, to=TensorProto.INT64)
    powers = np.arange(low, top + 2) - m
    step = op("Gather", const((2.0**powers).astype(np.float32), "steps"), index)
    inverse = op("Gather", const((2.0**-powers).astype(np.float32), "inverse_steps"), index)
    rounded = op("Mul", rounding(op("Mul", xs, inverse)), step)
    clipped = op("Clip", rounded, const(np.float32(-limit), "min"), const(np.float32(limit), "max"))
    return op("Mul", clipped, const(np.float32(scale), "scale"))


def node_mode(node: onnx.NodeProto) -> str:
    """The node's rounding mode, upper case."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    mode = attrs.get("rounding_mode", b"ROUND")
    return (mode.decode() if isinstance(mode, bytes) else mode).upper()
