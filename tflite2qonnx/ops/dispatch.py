"""The one dispatch: which function converts an operator, read from its record.

The records (``tflite2qonnx.ops.OPERATORS``) are data; this module turns their references into
functions (on first use) and composes them in one order. The activation's type picks the
record's kernels: ``int16`` on a 16x8 int16 activation the record has kernels for, ``int8`` on
any other integer-quantized one (whose own check refuses a type it does not take under
--bit-exact), ``hybrid`` then ``float_input`` on a float one. The first kernel that applies
runs (``Kernel.runs`` and ``Kernel.when``); else the converter. The converters hold the float
graphs only: none picks a kernel or keeps its own list of operator names.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.dtypes import INT8_TYPES
from tflite2qonnx.model import Operator, Tensor
from tflite2qonnx.ops import CUSTOM_OPERATORS, OPERATORS
from tflite2qonnx.ops.common import is_complex
from tflite2qonnx.ops.exact import unary as exact_unary
from tflite2qonnx.ops.record import (
    BY_DEFAULT,
    DEFAULT_WHERE,
    UNDER_BIT_EXACT,
    Converter,
    Kernel,
    Op,
    resolve,
)

if TYPE_CHECKING:
    from tflite2qonnx.graph import GraphBuilder

# the outcome of trying one kernel: it ran, it does not apply, or (a table) it declined
# because the converter is already exact there
_RAN, _SKIPPED, _DECLINED = "ran", "skipped", "declined"


@cache
def converter(name: str) -> Converter | None:
    """The converter for operator ``name`` (custom code for custom ops), None if it has none."""
    record = OPERATORS.get(name)
    if record is None or record.convert is None:
        return None
    return dispatch(record)


def dispatch(record: Op, load: Callable[[str], Callable] = resolve) -> Converter:
    """``record``'s converter composed with its kernels, each reference loaded by ``load``."""
    convert = _with_complex(record.complex, load(record.convert), load)
    slots = {
        name: [_Loaded(k, load) for k in kernels]
        for name, kernels in (
            ("int8", record.int8_kernels),
            ("int16", record.int16_kernels),
            ("hybrid", record.hybrid_kernels),
            ("float", record.float_kernels),
        )
    }
    if not any(slots.values()):
        return convert
    wide_table = record.int16_table

    def dispatched(b: GraphBuilder, op: Operator) -> None:
        x = op.inputs[record.activation] if len(op.inputs) > record.activation else -1
        t = b.tensor(x) if x >= 0 else None
        if t is None or not t.integer_quantized:
            kernels = slots["hybrid"] + slots["float"]
        elif t.dtype == "int16" and slots["int16"]:
            kernels = slots["int16"]
        else:
            kernels = slots["int8"]
        declined = False
        for k in kernels:
            outcome = k.try_run(b, op, t, wide_table, kernels is slots["int8"])
            if outcome == _RAN:
                return None
            declined = declined or outcome == _DECLINED
        if kernels is slots["int16"] and kernels and b.bit_exact and not declined:
            raise ConversionError(f"bit_exact: this int16 {op.name} is not emulated", op.where)
        return convert(b, op)

    dispatched.__doc__ = convert.__doc__
    return dispatched


class _Loaded:
    """One record ``Kernel`` with its references loaded."""

    def __init__(self, kernel: Kernel, load: Callable[[str], Callable]):
        self.kernel = kernel
        self.run = load(kernel.run)
        self.when = None if kernel.when is None else load(kernel.when)

    def _applies(self, b: GraphBuilder, op: Operator) -> bool:
        runs = self.kernel.runs
        if runs == DEFAULT_WHERE:
            return b.bit_exact or self.when(b, op)
        assert runs in (BY_DEFAULT, UNDER_BIT_EXACT), runs
        if runs == UNDER_BIT_EXACT and not b.bit_exact:
            return False
        return self.when is None or self.when(b, op)

    def try_run(
        self, b: GraphBuilder, op: Operator, t: Tensor | None, wide_table: bool, int8: bool
    ) -> str:
        """Run the kernel where it applies; ``int8``: it is one of the int8 kernels, which an
        integer input of another type (int16 where the record has no int16 kernels, int32)
        reaches only to be refused under --bit-exact (by the table's or ``when``'s own check)."""
        if not self._applies(b, op):
            return _SKIPPED
        plain = self.when is None and not self.kernel.table
        if int8 and plain and self.kernel.runs == UNDER_BIT_EXACT and t.dtype not in INT8_TYPES:
            raise ConversionError(
                f"bit_exact: {t.dtype} {op.name} is not emulated (int8 and uint8 only)", op.where
            )
        if self.kernel.table:
            return _RAN if exact_unary.convert(b, op, self.run, wide_table) else _DECLINED
        self.run(b, op)
        return _RAN


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
