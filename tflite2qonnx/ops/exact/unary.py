"""--bit-exact for the one-input int8 / uint8 kernels: LOGISTIC, TANH, HARD_SWISH, LEAKY_RELU,
the RELU family between differing grids, QUANTIZE between integer grids, EXP, LOG, ELU, GELU,
RSQRT and ABS; int16 RELU, RELU6, LEAKY_RELU and ABS (``INT16_TABLES``).

Each becomes a Gather on the 256-entry (int16: 65,536-entry) table of
``tflite2qonnx.ops.exact.int8_tables``. Converters call ``convert`` first under bit_exact; it
returns False (nothing emitted) where the default conversion is already exact (a float input,
a copy or clamp on one grid); an integer side it cannot emulate (per-axis, other int16
kernels) is a ConversionError, never a silent single rounding.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.dtypes import INT8_TYPES
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.dispatch import is_integer_op
from tflite2qonnx.ops.exact import int8_math_tables as extra
from tflite2qonnx.ops.exact import int8_tables as tables
from tflite2qonnx.ops.exact.table_gather import unary_table

_CLAMPS = {
    "RELU": (0.0, np.inf),
    "RELU6": (0.0, 6.0),
    "RELU_N1_TO_1": (-1.0, 1.0),
    "RELU_0_TO_1": (0.0, 1.0),
}

_KERNELS: dict[str, Callable[[Operator], Callable]] = {
    "LOGISTIC": lambda op: tables.logistic_table,
    "TANH": lambda op: tables.tanh_table,
    "HARD_SWISH": lambda op: tables.hard_swish_table,
    "LEAKY_RELU": lambda op: tables.leaky_relu_table(float(op.options.get("alpha", 0.0))),
    "QUANTIZE": lambda op: tables.requantize_table,
    "EXP": lambda op: extra.exp_table,
    "LOG": lambda op: extra.log_table,
    "ELU": lambda op: extra.elu_table,
    "ABS": lambda op: extra.abs_table,
    "RSQRT": lambda op: extra.rsqrt_table,
    "GELU": lambda op: extra.gelu_tanh_table if op.options.get("approximate") else extra.gelu_table,
    **{name: (lambda op, r=r: tables.relu_table(*r)) for name, r in _CLAMPS.items()},
}


# kernels the runtime has for int8 only (its uint8 LOG fails to prepare): no table to guess
_INT8_ONLY = frozenset({"LOG"})
# int16 kernels with the int8 arithmetic (QuantizedReluX, QuantizeLeakyRelu,
# AbsEvalQuantized on int16_t): the same table over 65,536 integers
INT16_TABLES = frozenset({"RELU", "RELU6", "LEAKY_RELU", "ABS"})


def _per_tensor_int8(b: GraphBuilder, idx: int, int16: bool = False) -> bool:
    t = b.tensor(idx)
    types = (*INT8_TYPES, "int16") if int16 else INT8_TYPES
    return t.dtype in types and t.quant is not None and t.quant.axis is None


def convert(b: GraphBuilder, op: Operator) -> bool:
    """Emit ``op`` as its kernel's table when bit_exact asks for it; False if not emitted."""
    if op.name not in _KERNELS or not b.bit_exact:
        return False
    if not is_integer_op(b, op):  # int16 and wider inputs are refused there
        return False
    int16 = op.name in INT16_TABLES
    if not (_per_tensor_int8(b, op.inputs[0], int16) and _per_tensor_int8(b, op.outputs[0], int16)):
        raise ConversionError(
            f"bit_exact: {op.name} with a per-axis or non-8-bit side is not emulated", op.where
        )
    if op.name in _INT8_ONLY and b.tensor(op.inputs[0]).dtype != "int8":
        raise ConversionError(f"bit_exact: TFLite has no uint8 {op.name} kernel", op.where)
    src, dst = b.tensor(op.inputs[0]).quant, b.tensor(op.outputs[0]).quant
    one_grid = (float(src.scale), float(src.zero_point)) == (
        float(dst.scale),
        float(dst.zero_point),
    )
    if one_grid and (op.name in _CLAMPS or op.name == "QUANTIZE"):
        return False  # a copy or clamp of the integers: the default graph is exact
    unary_table(b, op, _KERNELS[op.name](op))
    return True
