"""--bit-exact on an int8 CONV_2D whose requantization multiplier is above 1 (a left shift of
13: OSNet's near-constant channels, output scale 7.8e-9): MultiplyByQuantizedMultiplier's
``x * (1 << left_shift)`` overflows int32 and the kernel uses the wrapped value. Emulated, not
refused: 100% equal to the builtin reference kernels, and the outputs do reach the wrap."""

from __future__ import annotations

import numpy as np
from litert_compare import real_value, reference_interpreter, run_ours
from tflite_writer import build_model

from qonnx_ingest.quant_lowering import lower_quants
from tflite2qonnx.api import convert

S_IN, S_OUT, CIN = 0.004, 7.843137e-9, 64


_RNG = np.random.default_rng(5)
_SCALES = list(_RNG.uniform(0.011, 0.014, 4))
_WEIGHTS = _RNG.integers(60, 128, (4, 1, 1, CIN)).astype(np.int8)  # sums past 2^31 / 2^13


def _model() -> bytes:
    s_w = _SCALES
    tensors = [
        {"name": "x", "shape": (32, 1, 1, CIN), "dtype": "int8", "quant": ([S_IN], [-128])},
        {"name": "w", "shape": (4, 1, 1, CIN), "dtype": "int8", "quant": (s_w, [0] * 4),
         "data": _WEIGHTS},
        {"name": "b", "shape": (4,), "dtype": "int32", "data": np.zeros(4, np.int32),
         "quant": ([S_IN * s for s in s_w], [0] * 4)},
        {"name": "y", "shape": (32, 1, 1, 4), "dtype": "int8", "quant": ([S_OUT], [0])},
    ]  # fmt: skip
    options = ("Conv2DOptions", {"Padding": 1, "StrideW": 1, "StrideH": 1})
    spec = {"op": "CONV_2D", "inputs": [0, 1, 2], "outputs": [3], "options": options}
    return build_model(tensors, [spec], [0], [3])


def test_wrapped_left_shift_equals_the_builtin_kernels():
    data = _model()
    x = np.random.default_rng(0).integers(-128, 128, (32, 1, 1, CIN)).astype(np.int8)
    it = reference_interpreter(data)
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    ref = it.get_tensor(it.get_output_details()[0]["index"]).astype(np.int64)
    ours = run_ours(lower_quants(convert(data, bit_exact=True)), {"x": real_value(x, (S_IN, -128))})
    np.testing.assert_array_equal(np.round(np.asarray(ours["y"], np.float64) / S_OUT), ref)
    # the wrap decides: a saturating shift would give every output the sign of its accumulator
    w = np.asarray(_WEIGHTS, np.int64).reshape(4, CIN)
    acc = (x.reshape(32, CIN).astype(np.int64) + 128) @ w.T
    assert np.any(np.sign(ref.reshape(32, 4)) != np.sign(acc))
