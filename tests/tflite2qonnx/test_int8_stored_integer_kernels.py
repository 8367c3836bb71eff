"""int8 FLOOR_DIV, FLOOR_MOD, SQRT and CAST of quantized tensors against the interpreter's
builtin kernels.

TFLite runs int8 FLOOR_DIV and FLOOR_MOD on the stored integers, whatever the scales say, and
int8 SQRT truncates ``sqrtf(x) / s_out`` onto the output grid. Converting the real functions
was silently wrong, by default and under --bit-exact: FLOOR_DIV up to 148 steps off, FLOOR_MOD
61, SQRT a step off on 40-60% of the outputs; CAST of a quantized tensor casts its stored
integers, and casting the real values was 99% wrong. Every int8 input pair (every non-negative input
for SQRT), on grids with and without zero points.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from int16_op_models import differences
from litert_compare import real_value, reference_interpreter, run_ours
from tflite_writer import build_model

from qonnx_ingest.quant_lowering import lower_quants
from tflite2qonnx.api import convert

MODES = pytest.mark.parametrize("bit_exact", [False, True], ids=["default", "bit_exact"])
GRIDS = pytest.mark.parametrize(
    "s_in, zp_in, s_out, zp_out",
    [(0.05, 0, 0.07, 0), (0.05, 3, 0.07, -2), (0.013, -20, 0.031, 5)],
    ids=["no_zero_points", "zero_points", "other_zero_points"],
)


def _act(name: str, shape, scale: float, zp: int) -> dict:
    return {"name": name, "shape": tuple(shape), "dtype": "int8", "quant": ([scale], [zp])}


def _model(op: str, n_inputs: int, shape, s_in, zp_in, s_out, zp_out) -> bytes:
    tensors = [_act(f"x{i}", shape, s_in, zp_in) for i in range(n_inputs)]
    tensors.append(_act("y", shape, s_out, zp_out))
    spec = {"op": op, "inputs": list(range(n_inputs)), "outputs": [n_inputs], "version": 1}
    return build_model(tensors, [spec], list(range(n_inputs)), [n_inputs])


def _every_pair() -> list[np.ndarray]:
    """Every (dividend, divisor) of int8 with a non-zero stored divisor (the kernels fail),
    but -128 / -1: the kernel casts the double 128.0 to int8 (undefined in C++), and the
    interpreter writes -128 (as converted: wrapped) on a short tensor and 127 on this long
    one (a vectorized saturating cast), so no conversion can match it everywhere."""
    a, d = np.meshgrid(np.arange(-128, 128), np.arange(-128, 128), indexing="ij")
    keep = (d != 0) & ~((a == -128) & (d == -1))
    return [a[keep].astype(np.int8)[None], d[keep].astype(np.int8)[None]]


@MODES
@GRIDS
@pytest.mark.parametrize("op", ["FLOOR_DIV", "FLOOR_MOD"])
def test_int8_floor_div_and_mod_work_on_stored_integers(op, s_in, zp_in, s_out, zp_out, bit_exact):
    feeds = _every_pair()
    data = _model(op, 2, feeds[0].shape, s_in, zp_in, s_out, zp_out)
    assert differences(data, feeds, bit_exact).max() == 0


@MODES
@GRIDS
def test_int8_sqrt_truncates_on_every_input(s_in, zp_in, s_out, zp_out, bit_exact) -> None:
    x = np.arange(zp_in, 128, dtype=np.int8)[None]  # the kernel fails below the zero point
    data = _model("SQRT", 1, x.shape, s_in, zp_in, s_out, zp_out)
    assert differences(data, [x], bit_exact).max() == 0


@pytest.mark.parametrize("op, n", [("FLOOR_DIV", 2), ("FLOOR_MOD", 2), ("SQRT", 1)])
def test_bit_exact_does_not_warn_about_int8_stored_integer_kernels(op: str, n: int) -> None:
    data = _model(op, n, (1, 8), 0.05, 3, 0.07, -2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        convert(data, bit_exact=True)
    assert not [w for w in caught if "single rounding" in str(w.message)], caught


@pytest.mark.parametrize(
    "src, dst",
    [("int8", "int32"), ("int8", "float32"), ("uint8", "int8"), ("int16", "int8"),
     ("int8", "uint8")],
)  # fmt: skip
def test_cast_of_quantized_tensor_casts_stored_integers(src: str, dst: str) -> None:
    info = np.iinfo(src)
    x = np.arange(info.min, info.max + 1, 97 if src == "int16" else 1).astype(src)[None]
    zp = {"int8": 3, "uint8": 131, "int16": 0}[src]
    tensors = [{"name": "x", "shape": x.shape, "dtype": src, "quant": ([0.05], [zp])}]
    tensors.append({"name": "y", "shape": x.shape, "dtype": dst})
    spec = {"op": "CAST", "inputs": [0], "outputs": [1], "version": 1}
    data = build_model(tensors, [spec], [0], [1])
    it = reference_interpreter(data)
    detail = it.get_input_details()[0]
    it.set_tensor(detail["index"], x)
    it.invoke()
    expected = it.get_tensor(it.get_output_details()[0]["index"])
    ours = run_ours(lower_quants(convert(data)), {"x": real_value(x, detail["quantization"])})
    np.testing.assert_array_equal(np.asarray(ours["y"]).astype(dst), expected)
