"""How the records' --bit-exact and int16 declarations decide, per operator: whether it runs
as its kernel's integer arithmetic (``emulates``, ``is_integer_op``) and which operators
--bit-exact leaves rounding once (``rounded_once``). The records are the only list of names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.dtypes import INT8_TYPES
from tflite2qonnx.model import Operator
from tflite2qonnx.ops import OPERATORS
from tflite2qonnx.ops.record import (
    DEQUANTIZES,
    EMULATED,
    EXACT,
    EXACT_ON_ONE_GRID,
    INT16_DEFAULT,
    INT16_DEFAULT_INT64_BIAS,
    ROUNDED_ONCE,
    Op,
)

if TYPE_CHECKING:
    from tflite2qonnx.graph import GraphBuilder


def _int16(op: Operator) -> str:
    record = OPERATORS.get(op.name)
    return "" if record is None else record.int16


def is_integer_op(b: GraphBuilder, op: Operator) -> bool:
    """Whether ``op`` runs an integer kernel: its first input is a quantized activation.

    Under bit_exact an int16 activation is refused unless ``op``'s record declares an int16
    kernel, and wider ones always: their kernels use other accumulators and multipliers.
    """
    t = b.tensor(op.inputs[0])
    if not t.integer_quantized:
        return False
    int16_ok = t.dtype == "int16" and _int16(op) != ""
    if t.dtype not in INT8_TYPES and not int16_ok:
        raise ConversionError(
            f"bit_exact: {t.dtype} {op.name} is not emulated (int8 and uint8 only)", op.where
        )
    return True


def emulates(b: GraphBuilder, op: Operator) -> bool:
    """Whether ``op`` converts as its kernel's integer arithmetic: under bit_exact any integer
    op (``is_integer_op``), and always an int16 op whose record says its kernel runs by default
    (the convolutions: with an int64 bias the 64-bit kernel, with an int32 one the int32 kernel;
    without a bias they round once)."""
    t = b.tensor(op.inputs[0])
    treatment = _int16(op)
    if t.integer_quantized and t.dtype == "int16":
        if treatment == INT16_DEFAULT:
            return True
        if treatment == INT16_DEFAULT_INT64_BIAS:
            return b.bit_exact or _bias_dtype(b, op) in ("int64", "int32")
    return b.bit_exact and is_integer_op(b, op)


def transpose_conv_int16(b: GraphBuilder, op: Operator) -> bool:
    """TRANSPOSE_CONV's ``emulates`` for its 16x8 kernel: its activation is input 2, and the
    kernel (int64 bias) runs by default with an int64 or no bias."""
    if len(op.inputs) < 3 or op.inputs[2] < 0:
        return False
    x = b.tensor(op.inputs[2])
    if not (x.integer_quantized and x.dtype == "int16"):
        return False
    bias = op.inputs[3] if len(op.inputs) > 3 else -1
    return b.bit_exact or bias < 0 or b.tensor(bias).dtype in ("int64", "int32")


def transpose_conv_integer(b: GraphBuilder, op: Operator) -> bool:
    """TRANSPOSE_CONV's ``is_integer_op``: its activation (input 2) is integer-quantized."""
    return b.tensor(op.inputs[2]).integer_quantized


def _bias_dtype(b: GraphBuilder, op: Operator) -> str | None:
    idx = op.inputs[2] if len(op.inputs) > 2 else -1
    return b.tensor(idx).dtype if idx >= 0 else None


def rounded_once(b: GraphBuilder, operators: list[Operator]) -> list[str]:
    """Names of the integer operators --bit-exact leaves to the default single rounding."""
    names = []
    for op in operators:
        if op.name == "STABLEHLO_COMPOSITE":  # inlined: its decomposition's operators count
            names += _decomposed(b, op)
            continue
        t = b.tensor(op.inputs[0]) if op.inputs and op.inputs[0] >= 0 else None
        if t is None or not t.integer_quantized:
            continue
        record: Op | None = OPERATORS.get(op.name)
        if record is not None and record.runs_on_stored_integers(t.dtype):
            continue
        treatment = ROUNDED_ONCE if record is None else record.bit_exact
        if treatment in (EMULATED, EXACT, DEQUANTIZES):
            continue
        out = b.tensor(op.outputs[0]).quantization if op.outputs else None
        same_grid = out is not None and (list(out.scale), list(out.zero_point)) == (
            list(t.quantization.scale),
            list(t.quantization.zero_point),
        )
        if treatment == EXACT_ON_ONE_GRID and same_grid:
            continue
        names.append(op.name)
    return names


def _decomposed(b: GraphBuilder, op: Operator) -> list[str]:
    """``rounded_once`` over a composite's decomposition subgraph (an invalid index converts
    to a one-line refusal, which this leaves to the converter)."""
    index = int(op.options.get("decomposition_subgraph_index", -1))
    if not 0 < index < len(b.subgraphs):
        return []
    sg = b.subgraphs[index]
    return rounded_once(b.child(sg, inline=False), list(sg.operators))
