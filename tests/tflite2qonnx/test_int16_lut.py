"""int16 EXP, LOG and GELU (the builtin kernels' 513-entry tables read with interpolation,
``tflite2qonnx.ops.exact.int16_interpolated``) against the interpreter's builtin reference
kernels, on
hand-built single-op models fed every int16 input, run in onnxruntime as --verify runs them:
100% of the output integers equal, by default and under --bit-exact, at several input and
output scales (rounding the function once was up to 163, 17290 and 2 steps off).

The steep cases pin the kernel's int16 arithmetic where it is not the function: a slope
between two entries that wraps int16 (LOG, GELU with a fine output grid), an interpolated sum
that wraps it (LOG), and expf overflowing to inf in the table (EXP past 88.7: inf - inf
entries the kernel casts to 0).
"""

from __future__ import annotations

import numpy as np
import pytest
from litert_compare import integer_differences, reference_interpreter
from tflite_writer import build_model

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.verification import _onnxruntime_session
from tflite2qonnx.api import convert
from tflite2qonnx.ops.exact.int16_interpolated import _interpolate, kernel_table
from tflite2qonnx.reader import read_model

ALL_INT16 = np.arange(-(1 << 15), 1 << 15, dtype=np.int16)
MODES = pytest.mark.parametrize("bit_exact", [False, True], ids=["default", "bit_exact"])
_TANH_FORM = ("GeluOptions", {"Approximate": True})

# (op, input scale, output scale, options)
CASES = [
    ("EXP", 1 / 3000, 1 / 1234.5, None),
    ("EXP", 2.0**-12, 2.0**-8, None),
    ("EXP", 1 / 3000, 1 / 3000, None),  # one grid
    ("EXP", 0.01, 1e-4, None),  # expf overflows: inf and NaN entries
    ("LOG", 1 / 3000, 1 / 1234.5, None),
    ("LOG", 0.01, 2.0**-12, None),
    ("LOG", 1 / 3000, 1 / 3000, None),
    ("LOG", 0.01, 1e-5, None),  # a wrapped slope and wrapped sums next to x = 0
    ("GELU", 1 / 3000, 1 / 1234.5, None),
    ("GELU", 2.0**-10, 2.0**-12, None),
    ("GELU", 1 / 3000, 1 / 3000, None),
    ("GELU", 0.01, 1e-5, None),  # a wrapped slope
    ("GELU", 1 / 3000, 1 / 1234.5, _TANH_FORM),
    ("GELU", 2.0**-10, 2.0**-12, _TANH_FORM),
]
IDS = [f"{op}-{s_in:.3g}-{s_out:.3g}{'-tanh' if o else ''}" for op, s_in, s_out, o in CASES]


def _single_op(op: str, s_in: float, s_out: float, options=None) -> bytes:
    def tensor(name, scale):
        return {"name": name, "shape": ALL_INT16.shape, "dtype": "int16", "quant": ([scale], [0])}

    spec = {"op": op, "inputs": [0], "outputs": [1]}
    if options is not None:
        spec["options"] = options
    return build_model([tensor("x", s_in), tensor("y", s_out)], [spec], [0], [1])


@MODES
@pytest.mark.parametrize("op, s_in, s_out, options", CASES, ids=IDS)
def test_int16_table_kernel_equals_builtin_on_every_input(op, s_in, s_out, options, bit_exact):
    data = _single_op(op, s_in, s_out, options)
    model = convert(data, bit_exact=bit_exact)
    assert "Gather" in {n.op_type for n in model.graph.node}
    session, runner = _onnxruntime_session(model)
    assert session is not None, runner
    differ, total = integer_differences(reference_interpreter(data), session, ALL_INT16)
    assert total == ALL_INT16.size and differ == 0, f"{differ} of {total} differ"


def _grids(data: bytes):
    from tflite2qonnx.fixed_point import Grid

    model = read_model(data)
    op = model.subgraphs[0].operators[0]
    tensors = model.subgraphs[0].tensors
    g_in, g_out = (
        Grid(float(np.float32(tensors[i].quantization.scale[0])), 0, 16, True)
        for i in (op.inputs[0], op.outputs[0])
    )
    return op, g_in, g_out


@pytest.mark.parametrize(
    "op, s_in, s_out, wrapped_sum",
    [("LOG", 0.01, 1e-5, True), ("GELU", 0.01, 1e-5, False), ("EXP", 0.01, 1e-4, True)],
)
def test_steep_cases_reach_the_int16_wraps(op: str, s_in: float, s_out: float, wrapped_sum):
    """The steep CASES above are not vacuous: their tables step by more than int16 holds
    (and the interpolated sums leave it), and EXP's has 0 entries where expf is inf."""
    table = kernel_table(*_grids(_single_op(op, s_in, s_out)))
    assert np.any(np.abs(np.diff(table)) > 32767)
    raw = _interpolate(ALL_INT16, table)
    assert bool(np.any((raw < -32768) | (raw > 32767))) == wrapped_sum
    if op == "EXP":  # inputs past 88.7 (entries past 256 + 88.7 / (128 s_in)): inf - inf
        first_inf = 256 + int(np.ceil(88.8 / (128 * s_in)))
        assert np.all(table[first_inf:512] == 0) and table[512] == 32767


def _exp_model(output: dict) -> bytes:
    x = {"name": "x", "shape": (8,), "dtype": "int16", "quant": ([1 / 3000], [0])}
    tensors = [x, {"name": "y", "shape": (8,), **output}]
    return build_model(tensors, [{"op": "EXP", "inputs": [0], "outputs": [1]}], [0], [1])


def test_int16_table_kernel_with_zero_point_refused() -> None:
    """The kernels' Prepare refuses int16 zero points; so does the converter, by name."""
    data = _exp_model({"dtype": "int16", "quant": ([1 / 1234.5], [3])})
    with pytest.raises(RuntimeError):
        reference_interpreter(data)
    with pytest.raises(ConversionError, match="int16 tensor 'y' has a zero point"):
        convert(data)


def test_int16_exp_into_an_int8_output_refused() -> None:
    """EXP's Prepare retypes the output to the input's type: the interpreter writes int16
    integers (here exp(1) / 0.05 = 55) into the tensor the file calls int8. Which bit width
    the model means is unclear, so the converter refuses it by name rather than guess."""
    data = _exp_model({"dtype": "int8", "quant": ([0.05], [0])})
    it = reference_interpreter(data)
    it.set_tensor(it.get_input_details()[0]["index"], np.full(8, 3000, np.int16))
    it.invoke()
    assert it.get_tensor(it.get_output_details()[0]["index"]).dtype == np.int16
    with pytest.raises(ConversionError, match="int16 EXP: the output is int8, not int16"):
        convert(data)
