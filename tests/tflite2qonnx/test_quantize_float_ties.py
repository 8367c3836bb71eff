"""float -> int QUANTIZE with a zero point: TFLite computes zp + round(x / s) (half away from
zero), Quant round(x / s + zp); on the ties between 0 and -zp they differ by a step. The
default conversion keeps the one Quant (within a step); --bit-exact rounds first and equals
the builtin kernel on every half step."""

from __future__ import annotations

import numpy as np
import pytest
from litert_compare import reference_interpreter, run_ours
from tflite_writer import build_model

from tflite2qonnx.api import convert


def _quantize_model(n: int, scale: float, zero_point: int, dtype: str) -> bytes:
    tensors = [
        {"name": "x", "shape": (n,), "dtype": "float32"},
        {"name": "y", "shape": (n,), "dtype": dtype, "quant": ([scale], [zero_point])},
    ]
    return build_model(tensors, [{"op": "QUANTIZE", "inputs": [0], "outputs": [1]}], [0], [1])


@pytest.mark.parametrize(
    "scale, zero_point, dtype",
    [(0.5, 5, "int8"), (0.25, 128, "uint8"), (0.125, -7, "int8")],
    ids=["int8_zp5", "uint8_zp128", "int8_zp-7"],
)
def test_bit_exact_float_quantize_rounds_ties_as_tflite(scale, zero_point, dtype):
    # every half step from well below to well above the grid: each x / s is a tie or integer
    halves = np.arange(-700, 701, dtype=np.float32) / 2
    x = (halves * np.float32(scale)).astype(np.float32)
    data = _quantize_model(x.size, scale, zero_point, dtype)
    it = reference_interpreter(data)
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    want = it.get_tensor(it.get_output_details()[0]["index"]).astype(np.float64)

    def codes(bit_exact: bool) -> np.ndarray:
        y = run_ours(convert(data, bit_exact=bit_exact), {"x": x})["y"].astype(np.float64)
        return np.round(y / scale) + zero_point

    np.testing.assert_array_equal(codes(True), want)
    # the single Quant differs exactly on the ties between 0 and -zp, by one step
    default = codes(False)
    ties = (halves != np.round(halves)) & (np.sign(halves) != np.sign(halves + zero_point))
    assert ties.any()
    assert np.array_equal(default != want, ties)
    assert np.abs(default - want).max() == 1
