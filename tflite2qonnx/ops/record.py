"""One record per TFLite operator: its converter, its operand rules, how --bit-exact treats it.

The table of records (``tflite2qonnx.ops.OPERATORS``) is the one place an operator is
registered: the converter loop, the reader's operand checks and the bit-exact pass all read it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from tflite2qonnx.model import Operator, Tensor
from tflite2qonnx.ops.operands import OperandView

if TYPE_CHECKING:
    from tflite2qonnx.graph import GraphBuilder

Converter = Callable[["GraphBuilder", Operator], None]
OperandRule = Callable[[OperandView], "str | None"]

# How --bit-exact treats an integer operator (see tflite2qonnx.fixed_point):
ROUNDED_ONCE = "rounded once"  # converted as by default; the conversion warns about it
EMULATED = "emulated"  # its own fixed-point kernel under ops.exact.int8
EXACT = "exact"  # its int8 kernel only copies, compares or clamps the integers
EXACT_ON_ONE_GRID = "exact on one grid"  # a clamp: exact when input and output share a grid
DEQUANTIZES = "dequantizes"  # its kernel dequantizes the integers and computes in float

# ``Op.stored_integers``: every integer-quantized input type
ANY_INTEGER = ("any integer",)

# How an int16 (16x8) input is treated (``Op.int16``); without one of these --bit-exact
# refuses an int16 input and the default rounds once
INT16_DEFAULT = "kernel by default"  # no single rounding agrees with the kernel: always emulated
# with an int64 or int32 bias (each its own kernel instantiation); without one: --bit-exact only
INT16_DEFAULT_INT64_BIAS = "kernel by default for int64 biases"
INT16_BIT_EXACT = "kernel under --bit-exact"  # a single rounding is within a step of it


@dataclass(frozen=True)
class Op:
    """Everything about one TFLite operator kind.

    ``convert``: the converter ``f(builder, operator)``, None for a kind that is only checked
    (its operands are validated on reading, converting it is unsupported). ``ranks``: the
    operand ranks its kernel requires, as (inputs, outputs), None for any rank; an absent or
    omitted (-1) operand is not checked. ``operands``: a rule of ``tflite2qonnx.ops.operands``.
    ``bit_exact``: one of the constants above. ``int16``: one of the INT16_* constants, or
    "" (no 16x8 kernel emulated). ``int16_kernel``: the kernel that replaces ``convert`` on an
    int16 input where that treatment emulates it (``treatment.emulates``), or where
    ``int16_when(builder, operator)`` says so; without one, a treatment that runs by default
    runs ``kernel`` there (one kernel function for both). ``table``: under --bit-exact, the
    one-input kernel's 256-entry table (``ops.exact.unary``), tried before ``convert`` on an
    integer input. ``kernel``: under --bit-exact, the integer kernel ``f(builder, operator)``
    run instead of ``convert`` on an integer input (``treatment.is_integer_op``), or where
    ``kernel_when(builder, operator)`` says so. A choice that depends on more than the first
    input's type (TRANSPOSE_CONV's activation is its third, QUANTIZE from float onto a zero
    point, a uint8 CONCATENATION across grids) is such a predicate, never a converter's
    branch: ``ops.dispatch`` is the one place that picks a kernel.
    ``complex``: how it meets complex64 operands in their [real, imag] form
    (``ops.signal.complex_ops``): True if ``convert`` takes them, a reference to the converter
    that does (the others going to ``convert``), False to refuse them by name.
    ``stored_integers``:
    the input types on which TFLite's kernel computes on the stored integers whatever the
    scales say (converted so, hence exact; --bit-exact does not warn about them).

    ``convert``, ``int16_kernel``, ``table``, ``kernel`` and the predicates are references
    ``"subpackage.module:function"`` under ``tflite2qonnx.ops``, imported on first use
    (``resolve``, ``tflite2qonnx.ops.dispatch``), so that reading the table loads no converter.
    """

    convert: str | None
    ranks: tuple[tuple[int | None, ...], tuple[int | None, ...]] | None = None
    operands: OperandRule | None = None
    bit_exact: str = ROUNDED_ONCE
    int16: str = ""
    int16_kernel: str | None = None
    table: str | None = None
    kernel: str | None = None
    int16_when: str | None = None
    kernel_when: str | None = None
    stored_integers: tuple[str, ...] = ()
    complex: bool | str = False

    def runs_on_stored_integers(self, dtype: str) -> bool:
        """Whether TFLite's kernel ignores the quantization of a ``dtype`` input."""
        return self.stored_integers == ANY_INTEGER or dtype in self.stored_integers

    def operand_problem(self, op: Operator, tensors: list[Tensor]) -> str | None:
        """What in ``op``'s operands its kernel would refuse, or None."""
        kind = op.opcode.builtin
        if self.ranks is not None:
            for what, indices, wanted in (
                ("input", op.inputs, self.ranks[0]),
                ("output", op.outputs, self.ranks[1]),
            ):
                for pos, (t, rank) in enumerate(zip(indices, wanted, strict=False)):
                    if rank is not None and t >= 0 and len(tensors[t].shape) != rank:
                        shape = list(tensors[t].shape)
                        return (
                            f"{what} {pos} (tensor {t}) has shape {shape}; {kind} needs rank {rank}"
                        )
        problem = None if self.operands is None else self.operands(OperandView(op, tensors))
        return None if problem is None else f"{kind}: {problem}"


@cache
def resolve(reference: str) -> Callable:
    """The function ``"subpackage.module:function"`` names under ``tflite2qonnx.ops``."""
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(f"tflite2qonnx.ops.{module}"), name)
