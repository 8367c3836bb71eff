"""Each operator record's --bit-exact and int16 declarations are what conversion does.

Three views: the dispatch's decisions (``ops.dispatch``: emulates, is_integer_op, rounded_once)
for every record, against what each declared constant means; and, for every record with an
int16 kernel and a hand-built 16x8 single-op model (``int16_op_models.CASES``), the converted
graphs: a kernel that runs by default converts the same with and without --bit-exact and
equals the interpreter's builtin kernel; one that runs under --bit-exact only converts
differently by default (one rounding) and under --bit-exact (the kernel); and, for every
record naming an int8 ``table`` or ``kernel``, a hand-built int8 single-op model converts
differently under --bit-exact and then equals the interpreter's builtin kernel.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from int16_op_models import CASES, differences
from tflite_writer import build_model

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


def _int8(name: str, shape, scale: float, zero_point: int) -> dict:
    return {"name": name, "shape": shape, "dtype": "int8", "quant": ([scale], [zero_point])}


# operand shapes of the int8 single-op models (one input unless listed), output grid
_INT8_SHAPES = {"BATCH_MATMUL": [(2, 3), (3, 4)], "PRELU": [(4, 16), (16,)]}
_TWO_INPUTS = {"ADD", "SUB", "MUL", "DIV", "SQUARED_DIFFERENCE"}
# the only grid these kernels write
_OUTPUT_GRID = {"L2_NORMALIZATION": (1 / 128, 0), "LOGISTIC": (1 / 256, -128)}
_INT8_KERNELS = sorted(
    n for n, op in OPERATORS.items() if op.table is not None or op.kernel is not None
)


def _int8_model(name: str) -> bytes:
    shapes = _INT8_SHAPES.get(name) or [(4, 16)] * (2 if name in _TWO_INPUTS else 1)
    tensors = [_int8(f"x{i}", s, 0.05 + 0.01 * i, 3 - 5 * i) for i, s in enumerate(shapes)]
    out_shape = (2, 4) if name == "BATCH_MATMUL" else (4, 16)
    tensors.append(_int8("y", out_shape, *_OUTPUT_GRID.get(name, (0.07, -2))))
    n = len(shapes)
    spec = {"op": name, "inputs": list(range(n)), "outputs": [n], "version": 1}
    return build_model(tensors, [spec], list(range(n)), [n])


def test_int8_kernel_cases_cover_every_declared_kernel() -> None:
    assert {"ADD", "LOGISTIC", "RELU", "L2_NORMALIZATION", "QUANTIZE"} <= set(_INT8_KERNELS)


@pytest.mark.parametrize("name", _INT8_KERNELS)
def test_int8_table_or_kernel_runs_under_bit_exact(name: str) -> None:
    """Declared ``table`` / ``kernel``: under --bit-exact the graph is the kernel's (not the
    default single rounding) and equals the builtin kernel on every fed input."""
    data = _int8_model(name)
    assert convert(data).SerializeToString() != convert(data, bit_exact=True).SerializeToString()
    rng = np.random.default_rng(0)
    shapes = _INT8_SHAPES.get(name) or [(4, 16)] * (2 if name in _TWO_INPUTS else 1)
    feeds = [rng.integers(-128, 128, s).astype(np.int8) for s in shapes]
    if name in ("DIV",):
        feeds[1][feeds[1] == 3] = 4  # a zero divisor (q == zero point) fails the kernel
    if name in ("LOG", "RSQRT"):
        feeds[0] = np.maximum(feeds[0], 4)  # the real input above zero
    # the reference resolver has no ELU: the default one's int8 ELU is the same table
    assert differences(data, feeds, bit_exact=True, xnnpack=name == "ELU").max() == 0
