"""--bit-exact for the one-input int8 / uint8 kernels: LOGISTIC, TANH, HARD_SWISH, LEAKY_RELU,
the RELU family between differing grids, QUANTIZE between integer grids, EXP, LOG, ELU, GELU,
RSQRT and ABS; int16 RELU, RELU6, LEAKY_RELU and ABS. Each operator's record names its table
kernel here (``Kernel("exact.unary:logistic", table=True)``); ``ops.dispatch`` runs
``convert`` with it under --bit-exact before the operator's converter.

Each becomes a Gather on the 256-entry (int16: 65,536-entry) table of
``tflite2qonnx.ops.exact.int8_tables``. ``convert`` returns False (nothing emitted) where the
default conversion is already exact (a float input, a copy or clamp on one grid); an integer
side it cannot emulate (per-axis, other int16 kernels) is a ConversionError, never a silent
single rounding.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.dtypes import INT8_TYPES
from tflite2qonnx.fixed_point import Grid
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.exact import int8_math_tables as extra
from tflite2qonnx.ops.exact import int8_tables as tables
from tflite2qonnx.ops.exact.table_gather import unary_table

TableFn = Callable[[np.ndarray, Grid, Grid], np.ndarray]
# a record's ``table``: (op, input dtype, whether input and output share a grid) -> the table
# function, or None where the default graph is already exact (a copy or clamp on one grid)
TableKernel = Callable[[Operator, str, bool], "TableFn | None"]


def _fixed(fn: TableFn) -> TableKernel:
    return lambda op, dtype, one_grid: fn


def _clamp(lo: float, hi: float) -> TableKernel:
    return lambda op, dtype, one_grid: None if one_grid else tables.relu_table(lo, hi)


def _log(op: Operator, dtype: str, one_grid: bool) -> TableFn:
    if dtype != "int8":  # the runtime's uint8 LOG fails to prepare: no table to guess
        raise ConversionError(f"bit_exact: TFLite has no uint8 {op.name} kernel", op.where)
    return extra.log_table


logistic = _fixed(tables.logistic_table)
tanh = _fixed(tables.tanh_table)
hard_swish = _fixed(tables.hard_swish_table)
exp = _fixed(extra.exp_table)
log = _log
elu = _fixed(extra.elu_table)
abs_ = _fixed(extra.abs_table)
rsqrt = _fixed(extra.rsqrt_table)
relu = _clamp(0.0, np.inf)
relu6 = _clamp(0.0, 6.0)
relu_n1_to_1 = _clamp(-1.0, 1.0)
relu_0_to_1 = _clamp(0.0, 1.0)


def leaky_relu(op: Operator, dtype: str, one_grid: bool) -> TableFn:
    return tables.leaky_relu_table(float(op.options.get("alpha", 0.0)))


def gelu(op: Operator, dtype: str, one_grid: bool) -> TableFn:
    return extra.gelu_tanh_table if op.options.get("approximate") else extra.gelu_table


def requantize(op: Operator, dtype: str, one_grid: bool) -> TableFn | None:
    """QUANTIZE between integer grids; a copy on one grid."""
    return None if one_grid else tables.requantize_table


def _per_tensor_int8(b: GraphBuilder, idx: int, int16: bool = False) -> bool:
    t = b.tensor(idx)
    types = (*INT8_TYPES, "int16") if int16 else INT8_TYPES
    return t.dtype in types and t.quant is not None and t.quant.axis is None


def convert(b: GraphBuilder, op: Operator, table: TableKernel, int16: bool) -> bool:
    """Emit ``op`` as the table kernel ``table`` (a record's ``Kernel(table=True)``, which
    ``ops.dispatch`` runs under --bit-exact); False if not emitted. ``int16``: the record's
    int16 kernel is this table (QuantizedReluX, QuantizeLeakyRelu, AbsEvalQuantized on
    int16_t: the int8 arithmetic over 65,536 integers)."""
    t = b.tensor(op.inputs[0])
    if not t.integer_quantized:
        return False
    if t.dtype not in INT8_TYPES and not (int16 and t.dtype == "int16"):
        raise ConversionError(
            f"bit_exact: {t.dtype} {op.name} is not emulated (int8 and uint8 only)", op.where
        )
    if not (_per_tensor_int8(b, op.inputs[0], int16) and _per_tensor_int8(b, op.outputs[0], int16)):
        raise ConversionError(
            f"bit_exact: {op.name} with a per-axis or non-8-bit side is not emulated", op.where
        )
    src, dst = b.tensor(op.inputs[0]).quant, b.tensor(op.outputs[0]).quant
    one_grid = (float(src.scale), float(src.zero_point)) == (
        float(dst.scale),
        float(dst.zero_point),
    )
    fn = table(op, t.dtype, one_grid)
    if fn is None:
        return False  # a copy or clamp of the integers: the default graph is exact
    unary_table(b, op, fn)
    return True
