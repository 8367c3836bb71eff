"""How the records' kernels and labels decide, for any operator: whether an integer input is
one the int8 kernels take (``is_integer_op``) and which operators --bit-exact leaves rounding
once (``rounded_once``). The records are the only list of names; the predicates they name
(``Kernel.when``) live beside their kernels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.dtypes import INT8_TYPES
from tflite2qonnx.model import Operator
from tflite2qonnx.ops import OPERATORS
from tflite2qonnx.ops.record import DEQUANTIZES, EMULATED, EXACT, EXACT_ON_ONE_GRID, Op

if TYPE_CHECKING:
    from tflite2qonnx.graph import GraphBuilder


def is_integer_op(b: GraphBuilder, op: Operator) -> bool:
    """Whether ``op`` runs an integer kernel: its first input is a quantized activation.

    Under bit_exact an int16 activation is refused unless ``op``'s record has int16 kernels,
    and wider ones always: their kernels use other accumulators and multipliers.
    """
    t = b.tensor(op.inputs[0])
    if not t.integer_quantized:
        return False
    record = OPERATORS.get(op.name)
    int16_ok = t.dtype == "int16" and record is not None and bool(record.int16_kernels)
    if t.dtype not in INT8_TYPES and not int16_ok:
        raise ConversionError(
            f"bit_exact: {t.dtype} {op.name} is not emulated (int8 and uint8 only)", op.where
        )
    return True


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
        treatment = "" if record is None else record.bit_exact
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
