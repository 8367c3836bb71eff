"""int16 LOGISTIC and TANH (the reference kernels' interpolated sigmoid table) against the
interpreter's builtin reference kernels, run by onnxruntime as --verify runs them:

* hand-built single-op models over every int16 input, at input scales reaching each Prepare
  path (power-of-two scales the kernel takes as such, power-of-two ones it rescales, general
  ones, one without a right shift) and the output scales the kernel accepts: 100% equal by
  default and under --bit-exact;
* the generated table equals what int16_sigmoid_probe.py (beside this file) measures from the
  installed interpreter now (so a TFLite change shows here);
* a TF-generated 16x8 model (Dense + sigmoid, Dense + tanh): 100% equal end to end.
"""

from __future__ import annotations

import numpy as np
import pytest
from litert_compare import compare, real_value, reference_interpreter, run_ours
from tflite_writer import build_model

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.quant_lowering import lower_quants
from tflite2qonnx.api import convert
from tflite2qonnx.ops.exact.int16_sigmoid_table import SIGMOID_TABLE_UINT16

ALL_INT16 = np.arange(-(1 << 15), 1 << 15, dtype=np.int16)
MODES = pytest.mark.parametrize("bit_exact", [False, True], ids=["default", "bit_exact"])
CASES = [
    ("LOGISTIC", 2.0**-12, 2.0**-15),  # the power-of-two path: v = 3q
    ("LOGISTIC", 2.0**-10, 2.0**-15),  # a power of two rescaled as a general scale
    ("LOGISTIC", 1 / 3000, 2.0**-15),
    ("LOGISTIC", 0.000123, 2.0**-15),
    ("LOGISTIC", 1.7, 2.0**-15),  # multiplier above 16383.5 at once: no right shift
    ("TANH", 2.0**-12, 2.0**-15),
    ("TANH", 2.0**-11, 2.0**-15),  # v = 6q
    ("TANH", 2.0**-9, 2.0**-15),
    ("TANH", 1 / 3000, 1 / 32767),  # an output scale CheckedLog2 rounds to 2^-15
    ("TANH", 0.0021, 2.0**-15),
]


def _single_op(op: str, s_in: float, s_out: float, n: int = ALL_INT16.size) -> bytes:
    def tensor(name, scale):
        return {"name": name, "shape": (n,), "dtype": "int16", "quant": ([scale], [0])}

    spec = {"op": op, "inputs": [0], "outputs": [1]}
    return build_model([tensor("x", s_in), tensor("y", s_out)], [spec], [0], [1])


@MODES
@pytest.mark.parametrize(
    "op, s_in, s_out", CASES, ids=[f"{op}-{s_in:.3g}-{s_out:.3g}" for op, s_in, s_out in CASES]
)
def test_int16_logistic_tanh_equal_builtin_on_every_input(op, s_in, s_out, bit_exact) -> None:
    data = _single_op(op, s_in, s_out)
    it = reference_interpreter(data)
    (x,), (y,) = it.get_input_details(), it.get_output_details()
    it.set_tensor(x["index"], ALL_INT16)
    it.invoke()
    ref = it.get_tensor(y["index"]).astype(np.float64)
    feeds = {x["name"]: real_value(ALL_INT16, x["quantization"])}
    ours = run_ours(lower_quants(convert(data, bit_exact=bit_exact)), feeds)[y["name"]]
    steps = np.abs(np.round(ours.astype(np.float64) / y["quantization"][0]) - ref)
    assert steps.max() == 0, f"{100 * np.mean(steps == 0):.2f}% equal, {steps.max()} steps"


@pytest.mark.parametrize("op", ["LOGISTIC", "TANH"])
def test_int16_logistic_tanh_output_scale_not_2_pow_minus_15_is_refused(op: str) -> None:
    # the kernel's Prepare refuses it too; the converter says so rather than guess
    with pytest.raises(ConversionError, match=f"int16 {op}: the output scale must be 2\\^-15"):
        convert(_single_op(op, 1 / 3000, 1 / 1000, n=8))


@pytest.fixture(scope="module")
def probe():
    import int16_sigmoid_probe

    return int16_sigmoid_probe


def test_generated_table_equals_the_interpreters_measured_now(probe) -> None:
    # measure() reads the table through TANH, checks it against every LOGISTIC output at its
    # probe scales and both kernels at 13 scales over every input, raising on a difference
    table, summary = probe.measure()
    assert tuple(int(v) for v in table) == SIGMOID_TABLE_UINT16
    assert summary["determined_by_logistic"] > 150  # LOGISTIC's own reading is not vacuous


@pytest.mark.keras
@pytest.mark.parametrize("bit_exact", [False, True], ids=["default", "bit_exact"])
def test_tf_16x8_dense_sigmoid_tanh_equals_builtin_end_to_end(tf_dense_sigmoid_tanh, bit_exact):
    it = reference_interpreter(tf_dense_sigmoid_tanh)
    assert it.get_input_details()[0]["dtype"] == np.int16
    model = lower_quants(convert(tf_dense_sigmoid_tanh, bit_exact=bit_exact))
    pairs = compare(model, it, n_inputs=16)
    steps = np.concatenate([p.steps() for p in pairs])
    assert steps.size == 16 * 2 * 24
    assert steps.max() == 0, f"{100 * np.mean(steps == 0):.2f}% equal, {steps.max()} steps"


@pytest.fixture(scope="module")
def tf_dense_sigmoid_tanh() -> bytes:
    from tf_models import OpCase, build_tflite

    def build(tf, xs):
        h = tf.keras.layers.Dense(24, activation="sigmoid")(xs[0])
        t = tf.keras.layers.Dense(24, activation="tanh")(xs[0])
        return [h, t]

    data = build_tflite(OpCase("LOGISTIC", build, ((1, 16),), -4.0, 4.0), True, int16=True)
    from tflite2qonnx.reader import read_model

    names = {op.name for op in read_model(data).subgraphs[0].operators}
    assert {"FULLY_CONNECTED", "LOGISTIC", "TANH"} <= names
    return data
