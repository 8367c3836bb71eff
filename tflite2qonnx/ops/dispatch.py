"""The one dispatch: which function converts an operator, read from its record.

The records (``tflite2qonnx.ops.OPERATORS``) are data; this module turns their references into
functions (on first use) and composes them in one order: the record's int16 kernel on an int16
input it emulates (``ops.treatment``), else under --bit-exact its table kernel
(``ops.exact.unary``) where that applies or its integer kernel on an integer input, else its
converter; a record's predicates (``int16_when``, ``kernel_when``) decide where the input's type
alone does not. The converters hold the float graphs only: none picks a kernel or keeps its own
list of operator names.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.model import Operator
from tflite2qonnx.ops import CUSTOM_OPERATORS, OPERATORS
from tflite2qonnx.ops.common import is_complex
from tflite2qonnx.ops.exact import unary as exact_unary
from tflite2qonnx.ops.record import (
    INT16_DEFAULT,
    INT16_DEFAULT_INT64_BIAS,
    Converter,
    Op,
    resolve,
)
from tflite2qonnx.ops.treatment import emulates, is_integer_op

if TYPE_CHECKING:
    from tflite2qonnx.graph import GraphBuilder


@cache
def converter(name: str) -> Converter | None:
    """The converter for operator ``name`` (custom code for custom ops), None if it has none."""
    record = OPERATORS.get(name)
    if record is None or record.convert is None:
        return None
    return dispatch(record)


def dispatch(record: Op, load: Callable[[str], Callable] = resolve) -> Converter:
    """``record``'s converter composed with its kernels, each reference loaded by ``load``:
    the int16 kernel (``int16_kernel``, else ``kernel`` where int16 runs it by default) where
    it applies (``int16_when``, else an int16 first input ``emulates`` takes); else under
    --bit-exact the table kernel where it applies and the integer kernel where it applies
    (``kernel_when``, else ``is_integer_op``); else ``convert``."""
    convert = _with_complex(record.complex, load(record.convert), load)
    int16_ref = record.int16_kernel
    if int16_ref is None and record.int16 in (INT16_DEFAULT, INT16_DEFAULT_INT64_BIAS):
        int16_ref = record.kernel  # one kernel for int8 / uint8 and int16, by default too
    int16 = None if int16_ref is None else load(int16_ref)
    int16_when = _int16_emulated if record.int16_when is None else load(record.int16_when)
    table = record.table is not None
    kernel = None if record.kernel is None else load(record.kernel)
    kernel_when = is_integer_op if record.kernel_when is None else load(record.kernel_when)
    if int16 is None and not table and kernel is None:
        return convert

    def dispatched(b: GraphBuilder, op: Operator) -> None:
        if int16 is not None:
            if int16_when(b, op):
                return int16(b, op)
            if b.bit_exact and _int16_input(b, op):  # nothing else emulates it
                raise ConversionError(f"bit_exact: this int16 {op.name} is not emulated", op.where)
        if table and b.bit_exact and exact_unary.convert(b, op):
            return None
        if kernel is not None and b.bit_exact and kernel_when(b, op):
            return kernel(b, op)
        return convert(b, op)

    dispatched.__doc__ = convert.__doc__
    return dispatched


def _int16_input(b: GraphBuilder, op: Operator) -> bool:
    t = b.tensor(op.inputs[0]) if op.inputs and op.inputs[0] >= 0 else None
    return t is not None and t.integer_quantized and t.dtype == "int16"


def _int16_emulated(b: GraphBuilder, op: Operator) -> bool:
    """An int16 first input the record's ``int16`` treatment emulates (``emulates``)."""
    t = b.tensor(op.inputs[0]) if op.inputs and op.inputs[0] >= 0 else None
    return t is not None and t.dtype == "int16" and emulates(b, op)


def _with_complex(
    handles: bool | str, convert: Converter, load: Callable[[str], Callable]
) -> Converter:
    """``convert`` as the record's ``complex`` field says: as is where it takes complex64
    operands, beside the converter that does where it names one, else behind a refusal (a
    converter that does not know the [real, imag] form would read it as a real tensor)."""
    if handles is True:
        return convert
    complex_convert = None if handles is False else load(handles)

    @functools.wraps(convert)
    def guarded(b: GraphBuilder, op: Operator) -> None:
        if not any(is_complex(b, idx) for idx in (*op.inputs, *op.outputs)):
            return convert(b, op)
        if complex_convert is not None:
            return complex_convert(b, op)
        idx = next(i for i in (*op.inputs, *op.outputs) if is_complex(b, i))
        raise ConversionError(
            f"complex64 tensor {idx} '{b.tensor(idx).name}': {op.name} on complex tensors is not "
            "supported (complex tensors convert through RFFT2D, COMPLEX_ABS, REAL, IMAG, MUL, "
            "CAST, RESHAPE, SQUEEZE and EXPAND_DIMS)",
            op.where,
        )

    return guarded


def unsupported_message(op: Operator) -> str:
    """The error for an operator without a converter; a custom op's lists the custom ops."""
    text = f"unsupported operator {op.name} (operator {op.index})"
    if op.opcode.builtin == "CUSTOM":
        text += f"; supported custom ops: {', '.join(sorted(CUSTOM_OPERATORS))}"
    return text
