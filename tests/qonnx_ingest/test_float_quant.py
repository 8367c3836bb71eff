"""FloatQuant's standard-op form (onnxruntime) computes what qonnx's executor computes."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from qonnx_ingest.describe import describe
from qonnx_ingest.execute import execute_qonnx
from qonnx_ingest.float_quant import apply, format_max, make_float_quant
from qonnx_ingest.quant_lowering import NotLowerable, lower_quants


def _model(e, m, bias, max_val):
    q = make_float_quant(
        "x", "y", exponent_bits=e, mantissa_bits=m, exponent_bias=bias, max_val=max_val, name="fq"
    )
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [None]) for n in "xy"]
    graph = helper.make_graph([q.node], "g", io[:1], io[1:], q.initializers)
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid("qonnx.custom_op.general", 1)]
    return helper.make_model(graph, opset_imports=opsets)


def _run_lowered(model, x):
    lowered = lower_quants(model)
    assert not [n for n in lowered.graph.node if n.op_type == "FloatQuant"]
    session = ort.InferenceSession(lowered.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def test_e4m3_examples_derived_by_hand():
    """E4M3, bias 7 (OCP's FP8 range without NaN: max 1.875 * 2^8 = 480): ties to even,
    saturation, the smallest subnormal 2^-9 and its half (a tie to 0)."""
    x = np.float32([1.0625, 1.1875, 500.0, -500.0, 2.0**-9, 2.0**-10, 3 * 2.0**-11, 0.3])
    want = np.float32([1.0, 1.25, 480.0, -480.0, 2.0**-9, 0.0, 2.0**-9, 0.3125])
    model = _model(4, 3, 7, format_max(4, 3, 7))
    assert format_max(4, 3, 7) == 480.0
    np.testing.assert_array_equal(execute_qonnx(model, {"x": x})["y"], want)
    np.testing.assert_array_equal(_run_lowered(model, x), want)


@pytest.mark.parametrize("e, m, bias", [(4, 3, 7), (3, 2, 2), (1, 1, -2), (2, 0, 1), (5, 2, 20)])
def test_standard_ops_equal_qonnx_float_quant_on_a_dense_grid(e, m, bias):
    """In every binade from below the smallest subnormal to past the largest value
    (overflow), 256 steps (a quarter of the step of 6 mantissa bits: ties), both signs,
    plus 0, 1e-30 and 1e30."""
    top = format_max(e, m, bias)
    binades = range(1 - bias - m - 3, 2**e - bias + 2)
    x = np.concatenate([2.0**k * (1 + np.arange(256) / 256) for k in binades] + [[0.0]])
    x = np.concatenate([x, -x, [1e-30, -1e-30, 1e30, -1e30]]).astype(np.float32)
    want = apply(x, e, m, bias, top)
    np.testing.assert_array_equal(execute_qonnx(_model(e, m, bias, top), {"x": x})["y"], want)
    np.testing.assert_array_equal(_run_lowered(_model(e, m, bias, top), x), want)


def test_a_per_element_floatquant_is_not_lowered():
    model = _model(4, 3, 7, 480.0)
    init = next(t for t in model.graph.initializer if t.name.endswith("mantissa_bitwidth"))
    init.CopyFrom(onnx.numpy_helper.from_array(np.float32([3, 2]), init.name))
    with pytest.raises(NotLowerable, match="per-element"):
        lower_quants(model)


def test_describe_names_the_minifloat_format():
    text = describe(_model(4, 3, 7, 480.0))
    assert "FloatQuant   minifloat E4M3 bias 7, max 480, scale 1" in text, text
