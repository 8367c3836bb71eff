"""16x8 CONV_2D / TRANSPOSE_CONV / FULLY_CONNECTED with int32 biases (TFLite accepts int32 or
int64 there; the xmos denoiser carries int32), on hand-built single-op models:

* the int32 instantiation of the kernels (int32 accumulator, the 32-bit double-rounding
  MultiplyByQuantizedMultiplier) is emulated by default and under --bit-exact: 100% equal to
  the builtin reference kernels, which run it when the op declares ``quantized_bias_type``
  INT32; the same model with an int64 bias computes other numbers (the 64-bit kernel), so
  the comparison tells the two apart;
* without that declaration (older converters) LiteRT's kernels read the bias as int64, past
  its end: --verify runs them on a copy declaring it, and says so.
"""

from __future__ import annotations

import numpy as np
import pytest
import tflite
from litert_compare import real_value, reference_interpreter, run_ours
from tflite_writer import build_model

from qonnx_ingest.quant_lowering import lower_quants
from tflite2qonnx.api import convert
from tflite2qonnx.reference import verify

S_IN = 1 / 3000
N, CIN, COUT = 64, 16, 8


def _model(op: str, bias_dtype: str, declared: bool) -> bytes:
    rng = np.random.default_rng(3)
    s_w = list(rng.uniform(0.002, 0.02, COUT))
    bias_scales = [float(np.float32(S_IN)) * s for s in s_w]
    bias = rng.integers(-300_000, 300_000, COUT).astype(bias_dtype)
    fields = (
        {"QuantizedBiasType": getattr(tflite.TensorType, bias_dtype.upper())} if declared else {}
    )
    x = {"name": "x", "shape": (N, 1, 12, CIN), "dtype": "int16", "quant": ([S_IN], [0])}
    b = {"name": "b", "shape": (COUT,), "dtype": bias_dtype, "data": bias}
    b["quant"] = (bias_scales, [0] * COUT)
    if op == "CONV_2D":
        w = rng.integers(-127, 128, (COUT, 1, 3, CIN)).astype(np.int8)
        y_shape, options = (N, 1, 10, COUT), "Conv2DOptions"
        fields |= {"Padding": 1, "StrideW": 1, "StrideH": 1}
        tensors, inputs = [x, None, b], [0, 1, 2]
    elif op == "TRANSPOSE_CONV":
        w = rng.integers(-127, 128, (COUT, 1, 3, CIN)).astype(np.int8)
        y_shape, options = (N, 1, 25, COUT), "TransposeConvOptions"
        fields |= {"Padding": 1, "StrideW": 2, "StrideH": 1}
        shape = {"name": "shape", "shape": (4,), "dtype": "int32"}
        shape["data"] = np.array(y_shape, np.int32)
        tensors, inputs = [x, shape, None, b], [1, 2, 0, 3]
    else:  # FULLY_CONNECTED
        w = rng.integers(-127, 128, (COUT, CIN)).astype(np.int8)
        x = {**x, "shape": (N * 12, CIN)}
        y_shape, options = (N * 12, COUT), "FullyConnectedOptions"
        tensors, inputs = [x, None, b], [0, 1, 2]
    wi = tensors.index(None)
    tensors[wi] = {"name": "w", "shape": w.shape, "dtype": "int8", "data": w}
    tensors[wi]["quant"] = (s_w, [0] * COUT)
    tensors.append({"name": "y", "shape": y_shape, "dtype": "int16", "quant": ([1 / 20], [0])})
    spec = {"op": op, "inputs": inputs, "outputs": [len(tensors) - 1], "version": 3,
            "options": (options, fields)}  # fmt: skip
    return build_model(tensors, [spec], [0], [len(tensors) - 1])


def _run(data: bytes, x: np.ndarray) -> np.ndarray:
    it = reference_interpreter(data)
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"]).astype(np.int64)


OPS = ["CONV_2D", "TRANSPOSE_CONV", "FULLY_CONNECTED"]


def _feed(op: str, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).integers(-32768, 32768, (N, 1, 12, CIN)).astype(np.int16)
    return x.reshape(N * 12, CIN) if op == "FULLY_CONNECTED" else x


@pytest.mark.parametrize("bit_exact", [False, True], ids=["default", "bit_exact"])
@pytest.mark.parametrize("op", OPS)
def test_int32_bias_kernel_equals_the_builtin_kernels(op, bit_exact):
    data, x = _model(op, "int32", declared=True), _feed(op)
    ref = _run(data, x)
    ours = run_ours(
        lower_quants(convert(data, bit_exact=bit_exact)), {"x": real_value(x, (S_IN, 0))}
    )
    np.testing.assert_array_equal(np.round(np.asarray(ours["y"], np.float64) * 20), ref)
    if op != "FULLY_CONNECTED":  # FULLY_CONNECTED requantizes both in double
        assert np.any(ref != _run(_model(op, "int64", True), x))  # the 64-bit kernel differs


def test_verify_declares_an_undeclared_int32_bias():
    """LiteRT reads the undeclared bias as int64 (saturated garbage); verify's copy does not."""
    data = _model("CONV_2D", "int32", declared=False)
    x = _feed("CONV_2D", 1)
    assert np.any(_run(data, x) != _run(_model("CONV_2D", "int32", True), x))
    figures = verify(data, convert(data, bit_exact=True))
    assert figures.passed and figures.outputs[0].max_abs_error == 0
    assert "declaring the 16x8 kernels' int32 biases" in figures.runner
