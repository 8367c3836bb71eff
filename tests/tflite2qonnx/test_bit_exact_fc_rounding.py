"""--bit-exact int8 FULLY_CONNECTED requantizes as the interpreter does: one rounding with the
whole 31-bit multiplier. The 64-bit overload's multiplier rounded to 16 bits (what the
converter did before) left about one output in 2,000 a step off: the "5 steps of
FULLY_CONNECTED + TANH" loop and the same ops without it were 2 of 16,000 off, hello_world's
first layer 5 of 48,000. Hand-built models with many rows, per-channel and per-tensor
weights, against the builtin reference kernels over every row."""

from __future__ import annotations

import numpy as np
import pytest
from litert_compare import real_value, reference_interpreter, run_ours
from tflite_writer import build_model

from qonnx_ingest.quant_lowering import lower_quants
from tflite2qonnx.api import convert

ROWS, DEPTH, UNITS = 4000, 48, 16


def _fc_model(per_channel: bool, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    w = rng.integers(-127, 128, (UNITS, DEPTH)).astype(np.int8)
    s_w = rng.uniform(0.002, 0.02, UNITS if per_channel else 1).astype(np.float32)
    s_x, s_y = np.float32(rng.uniform(0.005, 0.05)), np.float32(rng.uniform(0.5, 3.0))
    bias = rng.integers(-20000, 20000, UNITS).astype(np.int32)
    tensors = [
        {"name": "x", "shape": (ROWS, DEPTH), "dtype": "int8", "quant": ([s_x], [3])},
        {"name": "w", "shape": w.shape, "dtype": "int8", "data": w,
         "quant": (list(s_w), [0] * s_w.size)},
        {"name": "b", "shape": (UNITS,), "dtype": "int32", "data": bias,
         "quant": (list(s_x * s_w), [0] * s_w.size)},
        {"name": "y", "shape": (ROWS, UNITS), "dtype": "int8", "quant": ([s_y], [-7])},
    ]  # fmt: skip
    spec = {"op": "FULLY_CONNECTED", "inputs": [0, 1, 2], "outputs": [3]}
    return build_model(tensors, [spec], [0], [3])


@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel", "per_tensor"])
@pytest.mark.parametrize("seed", [0, 1])
def test_int8_fully_connected_equals_builtin_under_bit_exact(per_channel: bool, seed: int):
    data = _fc_model(per_channel, seed)
    it = reference_interpreter(data)
    (x,), (y,) = it.get_input_details(), it.get_output_details()
    q = np.random.default_rng(100 + seed).integers(-128, 128, x["shape"]).astype(np.int8)
    it.set_tensor(x["index"], q)
    it.invoke()
    ref = it.get_tensor(y["index"]).astype(np.float64)
    assert np.mean(np.abs(ref) < 127) > 0.5  # mostly unsaturated: the rounding is seen
    ours = run_ours(
        lower_quants(convert(data, bit_exact=True)), {"x": real_value(q, x["quantization"])}
    )
    scale, zero_point = y["quantization"]
    steps = np.abs(np.round(ours["y"].astype(np.float64) / scale) + zero_point - ref)
    assert steps.max() == 0, f"{int(np.sum(steps > 0))} of {steps.size} off"
