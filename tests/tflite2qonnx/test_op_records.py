"""Each operator record's --bit-exact and int16 declarations are what conversion does.

Two views: the dispatch's decisions (``ops.dispatch``: emulates, is_integer_op, rounded_once)
for every record, against what each declared constant means; and, for every record with an
int16 kernel and a hand-built 16x8 single-op model (``int16_op_models.CASES``), the converted
graphs: a kernel that runs by default converts the same with and without --bit-exact and
equals the interpreter's builtin kernel; one that runs under --bit-exact only converts
differently by default (one rounding) and under --bit-exact (the kernel).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from int16_op_models import CASES, differences

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.api import convert
from tflite2qonnx.ops import OPERATORS
from tflite2qonnx.ops.record import (
    ANY_INTEGER,
    DEQUANTIZES,
    EMULATED,
    EXACT,
    EXACT_ON_ONE_GRID,
    INT16_BIT_EXACT,
    INT16_DEFAULT,
    INT16_DEFAULT_INT64_BIAS,
    ROUNDED_ONCE,
)
from tflite2qonnx.ops.treatment import emulates, is_integer_op, rounded_once


def _builder(dtype: str, bit_exact: bool, bias: str = "int32", out_scale: float = 0.5):
    """A stand-in GraphBuilder: input 0 of ``dtype``, bias 2 of ``bias``, output 1."""
    q_in = SimpleNamespace(scale=[0.25], zero_point=[0])
    q_out = SimpleNamespace(scale=[out_scale], zero_point=[0])
    tensors = {
        0: SimpleNamespace(dtype=dtype, integer_quantized=True, quantization=q_in),
        1: SimpleNamespace(dtype=dtype, integer_quantized=True, quantization=q_out),
        2: SimpleNamespace(dtype=bias, integer_quantized=False, quantization=None),
    }
    return SimpleNamespace(bit_exact=bit_exact, tensor=tensors.__getitem__)


def _op(name: str):
    return SimpleNamespace(name=name, inputs=[0, 9, 2], outputs=[1], where=f"{name} (test)")


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_int16_dispatch_follows_the_record(name: str) -> None:
    treatment = OPERATORS[name].int16
    op = _op(name)
    by_default = emulates(_builder("int16", False), op)
    assert by_default == (treatment == INT16_DEFAULT)
    if treatment == INT16_DEFAULT_INT64_BIAS:  # the 16x8 convolution kernel: int64 biases
        assert emulates(_builder("int16", False, bias="int64"), op)
    if treatment:
        assert emulates(_builder("int16", True), op) and is_integer_op(_builder("int16", True), op)
    else:
        with pytest.raises(ConversionError, match=f"int16 {name} is not emulated"):
            emulates(_builder("int16", True), op)


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_bit_exact_warning_follows_the_record(name: str) -> None:
    """--bit-exact warns about an int8 operator it leaves rounding once, and about no other."""
    record = OPERATORS[name]
    for same_grid in (True, False):
        b = _builder("int8", True, out_scale=0.25 if same_grid else 0.5)
        warned = rounded_once(b, [_op(name)]) == [name]
        if record.stored_integers == ANY_INTEGER or record.bit_exact in (
            EMULATED,
            EXACT,
            DEQUANTIZES,
        ):
            assert not warned
        elif record.bit_exact == EXACT_ON_ONE_GRID:
            assert warned != same_grid
        else:
            assert record.bit_exact == ROUNDED_ONCE and warned


INT16_CASES = sorted(n for n in CASES if n in OPERATORS and OPERATORS[n].int16)


def test_int16_cases_cover_both_treatments() -> None:
    kinds = {OPERATORS[n].int16 for n in INT16_CASES}
    assert {INT16_DEFAULT, INT16_BIT_EXACT} <= kinds, INT16_CASES


@pytest.mark.parametrize("name", INT16_CASES)
def test_int16_declaration_is_what_conversion_does(name: str) -> None:
    case = CASES[name]
    data = case.model(same=False)
    default = convert(data).SerializeToString()
    exact = convert(data, bit_exact=True).SerializeToString()
    if OPERATORS[name].int16 == INT16_DEFAULT:
        assert default == exact
        assert differences(data, case.feeds(), bit_exact=False).max() == 0
    else:
        assert OPERATORS[name].int16 == INT16_BIT_EXACT
        assert default != exact
