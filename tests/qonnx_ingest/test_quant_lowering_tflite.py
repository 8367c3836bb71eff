"""``lower_graph_quants(..., tflite_rounding=True)``: TFLite's quantize, round(x / s) with ties
away from zero and then the zero point, against values derived in float64 by hand."""

import numpy as np
import onnx
from onnx import TensorProto, helper
from quant_models import finished, ort_session

from qonnx_ingest.quant import make_quant
from qonnx_ingest.quant_lowering import lower_graph_quants

SCALE, ZERO_POINT = np.float32(0.25), -10.0


def _lowered(tflite_rounding: bool) -> onnx.ModelProto:
    graph = helper.make_graph(
        [],
        "q",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])],
    )
    make_quant("x", "y", SCALE, ZERO_POINT, 8, rounding_mode="HALF_UP", name="q").add_to(graph)
    model = finished(graph)
    lower_graph_quants(model.graph, tflite_rounding=tflite_rounding)
    kept = [o for o in model.opset_import if o.domain in ("", "ai.onnx")]  # no Quant is left
    del model.opset_import[:]
    model.opset_import.extend(kept)
    return model


def _probe() -> np.ndarray:
    """Ties k + 1/2 on both sides of 0 and of -zp, the float32 just below 1/2 (which
    floor(|q| + 0.5) rounds up in float32), values beyond the range, noise."""
    k = np.arange(-40, 40, dtype=np.float64)
    below_half = np.nextafter(np.float32(0.5), np.float32(0))
    quotients = np.concatenate([k + 0.5, [below_half, -below_half, 300.5, -300.5]])
    noise = np.random.default_rng(0).uniform(-40, 40, 64)
    return (np.concatenate([quotients, noise]) * SCALE).astype(np.float32)


def _tflite(x: np.ndarray) -> np.ndarray:
    """std::round(x / s) + zp, clamped to int8, times s: in float64 after float32 division."""
    q = (x / SCALE).astype(np.float64)
    rounded = np.sign(q) * np.floor(np.abs(q) + 0.5)
    return (SCALE * (np.clip(rounded + ZERO_POINT, -128, 127) - ZERO_POINT)).astype(np.float32)


def test_tflite_rounding_rounds_before_the_zero_point_with_ties_away_from_zero() -> None:
    x = _probe()
    (y,) = ort_session(_lowered(True)).run(None, {"x": x})
    np.testing.assert_array_equal(y, _tflite(x))


def test_qonnx_rounding_differs_on_ties_between_zero_and_minus_the_zero_point() -> None:
    """The qonnx form rounds x / s + zp: x / s = 1.5 with zp = -10 gives -9, TFLite -8."""
    x = np.array([1.5, 3.5, -1.5], np.float32) * SCALE
    (y,) = ort_session(_lowered(False)).run(None, {"x": x})
    np.testing.assert_array_equal(y / SCALE, [1.0, 3.0, -2.0])
    np.testing.assert_array_equal(_tflite(x) / SCALE, [2.0, 4.0, -2.0])
