"""One record per TFLite operator: its converter, its operand rules and the kernels that
replace the converter per input type (``Kernel``), from which its labels are derived.

The table of records (``tflite2qonnx.ops.OPERATORS``) is the one place an operator is
registered: the converter loop, the reader's operand checks, the dispatch (``ops.dispatch``:
the one place a kernel is chosen), the bit-exact warning and the docs all read it.
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

# When a kernel runs (``Kernel.runs``)
# no single rounding agrees with it: always run (where ``when`` holds: int8 convolutions'
# accumulator, MUL's, PRELU's, LEAKY_RELU's, MEAN's and QUANTIZE's requantization rounded twice)
BY_DEFAULT = "kernel by default"
UNDER_BIT_EXACT = "kernel under --bit-exact"  # by default the converter rounds once
# by default where ``Kernel.when`` holds (the 16x8 convolutions: an int64 or int32 bias, each its
# own kernel instantiation), under --bit-exact everywhere
DEFAULT_WHERE = "kernel by default for int64 biases"

# How the converter meets int8 / uint8 integers where no kernel replaces it (``Op.int8`` as a
# label; see tflite2qonnx.fixed_point). A record with int8 kernels is EMULATED.
ROUNDED_ONCE = "rounded once"  # the default single rounding; --bit-exact warns about it
EMULATED = "emulated"  # its own fixed-point kernels (``Op.int8``'s Kernels)
EXACT = "exact"  # its int8 kernel only copies, compares or clamps the integers
EXACT_ON_ONE_GRID = "exact on one grid"  # a clamp: exact when input and output share a grid
DEQUANTIZES = "dequantizes"  # its kernel dequantizes the integers and computes in float

# ``Op.stored_integers``: every integer-quantized input type
ANY_INTEGER = ("any integer",)


@dataclass(frozen=True)
class Kernel:
    """One TFLite kernel emulated in place of the record's converter.

    ``run``: the kernel ``f(builder, operator)``. ``runs``: BY_DEFAULT, UNDER_BIT_EXACT or
    DEFAULT_WHERE. ``when``: a predicate ``f(builder, operator)`` for a choice the input's type
    alone does not make (an output type, the scales, which weights): with BY_DEFAULT and
    UNDER_BIT_EXACT the kernel runs only where it holds; with DEFAULT_WHERE it says where the
    kernel runs by default. ``table``: ``run`` names a 256-entry (int16: 65,536) table of
    ``ops.exact.unary`` instead, which declines (the converter runs) where the default graph is
    already exact. References are ``"subpackage.module:function"`` under ``tflite2qonnx.ops``.
    """

    run: str
    runs: str = UNDER_BIT_EXACT
    when: str | None = None
    table: bool = False


Kernels = tuple[Kernel, ...]


def _kernels(slot: Kernel | Kernels | str | None) -> Kernels:
    if isinstance(slot, Kernel):
        return (slot,)
    return slot if isinstance(slot, tuple) else ()


@dataclass(frozen=True)
class Op:
    """Everything about one TFLite operator kind.

    ``convert``: the converter ``f(builder, operator)`` for float operands (and, rounding once,
    for integer ones no kernel takes); None for a kind that is only checked (its operands are
    validated on reading, converting it is unsupported). ``ranks``: the operand ranks its
    kernel requires, as (inputs, outputs), None for any rank; an absent or omitted (-1) operand
    is not checked. ``operands``: a rule of ``tflite2qonnx.ops.operands``.

    The kernels, by the type of the activation (input ``activation``), tried in order, the
    first that applies running (``ops.dispatch``): ``int8`` on int8 / uint8 (and, refusing
    them under --bit-exact, on other integer types ``int16`` does not take), else a label
    (ROUNDED_ONCE, EXACT, EXACT_ON_ONE_GRID, DEQUANTIZES: what the converter is on them);
    ``int16`` on 16x8 int16 (none: --bit-exact refuses an int16 input to an op with int8
    kernels, the default rounds once); ``hybrid`` on float activations with integer weights
    (dynamic range; ``when`` names the weights); ``float_input`` on other non-integer inputs.
    ``stored_integers``: the input types on which TFLite's kernel computes on the stored
    integers whatever the scales say (converted so, hence exact; --bit-exact does not warn).
    ``complex``: how it meets complex64 operands in their [real, imag] form
    (``ops.signal.complex_ops``): True if ``convert`` takes them, a reference to the converter
    that does (the others going to ``convert``), False to refuse them by name.

    References are imported on first use (``resolve``), so reading the table loads no converter.
    """

    convert: str | None
    ranks: tuple[tuple[int | None, ...], tuple[int | None, ...]] | None = None
    operands: OperandRule | None = None
    int8: Kernel | Kernels | str = ROUNDED_ONCE
    int16: Kernel | Kernels | None = None
    hybrid: Kernel | Kernels | None = None
    float_input: Kernel | Kernels | None = None
    activation: int = 0
    stored_integers: tuple[str, ...] = ()
    complex: bool | str = False

    def __post_init__(self) -> None:
        if len({k.runs for k in self.int16_kernels}) > 1:
            raise ValueError(f"{self.convert}: int16 kernels that run at different times")

    @property
    def int8_kernels(self) -> Kernels:
        return _kernels(self.int8)

    @property
    def int16_kernels(self) -> Kernels:
        return _kernels(self.int16)

    @property
    def hybrid_kernels(self) -> Kernels:
        return _kernels(self.hybrid)

    @property
    def float_kernels(self) -> Kernels:
        return _kernels(self.float_input)

    @property
    def bit_exact(self) -> str:
        """How --bit-exact treats an int8 input: EMULATED where it has int8 kernels, else the
        ``int8`` label."""
        return EMULATED if self.int8_kernels else str(self.int8)

    @property
    def int8_default(self) -> Kernels:
        """Its int8 kernels that replace the converter by default (BY_DEFAULT; where their
        ``when`` holds): an int8 / uint8 default form that is not the converter's."""
        return tuple(k for k in self.int8_kernels if k.runs == BY_DEFAULT)

    @property
    def int16_runs(self) -> str:
        """When its 16x8 kernels run (a ``Kernel.runs``), "" without any."""
        return self.int16_kernels[0].runs if self.int16_kernels else ""

    @property
    def int16_table(self) -> bool:
        """Whether its int16 kernel is a table (``ops.exact.unary``: the int8 arithmetic over
        65,536 integers)."""
        return any(k.table for k in self.int16_kernels)

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
