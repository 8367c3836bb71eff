"""Quant as standard ops gives exactly the bits qonnx's executor gives, in one onnxruntime
session: every rounding mode, ties, clamping, zero points, narrow ranges, per-channel scales."""

import itertools

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from quant_models import activation_model, finished, ort_session

from qonnx_ingest.execute import execute_qonnx
from qonnx_ingest.quant import make_quant, make_trunc
from qonnx_ingest.quant_lowering import NotLowerable, lower_quants

MODES = ["ROUND", "HALF_EVEN", "HALF_UP", "HALF_DOWN", "FLOOR", "CEIL", "UP", "DOWN"]
SCALES = np.array([0.25, 0.1, 3.0], np.float32)  # per channel (axis 1)


def quant_model(mode: str, bits: int, signed: bool, narrow: bool, zero_point: float):
    graph = helper.make_graph(
        [],
        "q",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 3])],
    )
    make_quant("x", "y", SCALES, zero_point, bits, signed=signed, narrow=narrow,
               rounding_mode=mode, x_shape=(64, 3), axis=1, name="q").add_to(graph)  # fmt: skip
    return finished(graph)


def probe_input(bits: int) -> np.ndarray:
    """Exact ties k + 1/2 of each channel's grid, values beyond the range, and noise."""
    rng = np.random.default_rng(bits)
    k = np.concatenate([np.arange(-12, 12), [2.0**bits, -(2.0**bits)]])
    ties = (k[:, None] + 0.5) * SCALES
    noise = rng.uniform(-1.5, 1.5, (38, 1)) * (2.0 ** (bits - 1)) * SCALES
    return np.concatenate([ties, noise]).astype(np.float32)


def run_lowered(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    (y,) = ort_session(lower_quants(model)).run(None, {"x": x})
    return y


@pytest.mark.parametrize(
    "mode, bits, signed, narrow, zero_point",
    [
        *((m, 8, True, False, 0.0) for m in MODES),
        *((m, b, s, n, z) for m in ("HALF_UP", "ROUND") for b, s, n, z in
          itertools.product([2, 4, 16], [True, False], [False, True], [0.0, 1.0])),
    ],
)  # fmt: skip
def test_standard_ops_match_qonnx_bit_for_bit(mode, bits, signed, narrow, zero_point):
    model = quant_model(mode, bits, signed, narrow, zero_point)
    x = probe_input(bits)
    lowered = run_lowered(model, x)
    np.testing.assert_array_equal(lowered, execute_qonnx(model, {"x": x})["y"])
    assert not any(n.op_type == "Quant" for n in lower_quants(model).graph.node)


def test_ties_really_split_the_modes():
    """The probe holds ties: HALF_UP and HALF_DOWN disagree on them (else the test is idle)."""
    x = probe_input(8)
    up, down = (
        run_lowered(quant_model(m, 8, True, False, 0.0), x) for m in ("HALF_UP", "HALF_DOWN")
    )
    assert np.count_nonzero(up != down) >= 24


def test_a_float64_scale_computes_in_float64_like_numpy():
    """numpy promotes x to the scale's type; the result is float32, as qonnx returns it."""
    model = quant_model("HALF_UP", 8, True, False, 0.0)
    for init in model.graph.initializer:
        if init.data_type == TensorProto.FLOAT:
            init.CopyFrom(
                numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float64), init.name)
            )
    doubled = {t.name for t in model.graph.initializer}  # their float32 value_info goes too
    kept = [v for v in model.graph.value_info if v.name not in doubled]
    del model.graph.value_info[:]
    model.graph.value_info.extend(kept)
    x = probe_input(8) / 3.0
    lowered = run_lowered(model, x)
    assert lowered.dtype == np.float32
    np.testing.assert_array_equal(lowered, execute_qonnx(model, {"x": x})["y"])


def trunc_model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [],
        "t",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    make_trunc("x", "y", 1.0, 0.0, 8, 4, name="trunc").add_to(graph)
    return finished(graph)


def one_bit_signed_model() -> onnx.ModelProto:
    """qonnx executes a signed 1-bit Quant as bipolar (make_quant refuses to write one)."""
    model = activation_model(bits=2)
    for init in model.graph.initializer:
        if numpy_helper.to_array(init).size == 1 and numpy_helper.to_array(init) == 2:
            init.CopyFrom(numpy_helper.from_array(np.array(1.0, np.float32), init.name))
    return model


@pytest.mark.parametrize(
    "model, reason",
    [
        (lambda: activation_model(bipolar=True), "BipolarQuant"),
        (trunc_model, "Trunc"),
        (one_bit_signed_model, "1-bit signed"),
    ],
    ids=["bipolar", "trunc", "one_bit_signed"],
)
def test_quantizers_without_a_standard_form_are_refused(model, reason):
    with pytest.raises(NotLowerable, match=reason):
        lower_quants(model())


def test_a_float64_input_to_a_float32_scale_computes_in_float64():
    """--bit-exact graphs quantize float64 values with float32 scales: numpy's promotion."""
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["x64"], to=TensorProto.DOUBLE, name="cast")],
        "q64",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 3])],
        value_info=[helper.make_tensor_value_info("x64", TensorProto.DOUBLE, [64, 3])],
    )
    make_quant("x64", "y", SCALES, 0.0, 16, rounding_mode="HALF_UP", x_shape=(64, 3), axis=1,
               name="q").add_to(graph)  # fmt: skip
    model = finished(graph)
    x = probe_input(16) / 3.0
    np.testing.assert_array_equal(run_lowered(model, x), execute_qonnx(model, {"x": x})["y"])
