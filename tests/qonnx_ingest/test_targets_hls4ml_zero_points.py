"""qonnx_ingest.targets.hls4ml_zero_points: hls4ml 1.3.0 drops a zero point on a power-of-two
scale, so an int8 Quant with zero point -128 there is written as the unsigned Quant it equals
(checked against values rounded by hand, ties included, and compiled in hls4ml), and any
other such zero point is refused by name."""

from __future__ import annotations

import numpy as np
import pytest
from hls4ml_support import compile_vivado
from onnx import TensorProto, helper, numpy_helper

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.execute import execute_qonnx
from qonnx_ingest.targets.hls4ml import to_hls4ml

DOMAIN = "qonnx.custom_op.general"
# 0 .. 141.75 in quarter steps: ties of the 0.5 grid (x / 0.5 = k + 1/2) and saturation at 127.5
X = (np.arange(568, dtype=np.float32) * 0.25).reshape(1, 568)


def _relu_quant(scale: float, zero: float, signed: int, rounding: str = "ROUND"):
    inits = [
        numpy_helper.from_array(np.float32(v), n) for n, v in (("s", scale), ("z", zero), ("b", 8))
    ]
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node(
            "Quant", ["r", "s", "z", "b"], ["y"], name="act", domain=DOMAIN, signed=signed,
            narrow=0, rounding_mode=rounding,
        ),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(X.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(X.shape))],
        inits,
    )
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid(DOMAIN, 1)]
    return helper.make_model(graph, opset_imports=opsets)


def _attrs_and_zero(model):
    (node,) = [n for n in model.graph.node if n.op_type == "Quant"]
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}, inits[node.input[2]]


@pytest.mark.parametrize("rounding", ["ROUND", "FLOOR"])
def test_int8_zero_point_minus_128_on_a_power_of_two_scale_becomes_the_unsigned_quant(rounding):
    source = _relu_quant(0.5, -128.0, 1, rounding)
    form = to_hls4ml(source)
    attrs, zero = _attrs_and_zero(form)
    assert attrs["signed"] == 0 and zero == 0
    # by hand: the int8 level round(x / 0.5) - 128 clipped to [-128, 127], then + 128, * 0.5
    steps = np.round(X / 0.5) if rounding == "ROUND" else np.floor(X / 0.5)  # half to even
    want = np.clip(steps, 0, 255) * 0.5
    assert np.any(X / 0.5 % 1 == 0.5) and want.max() == 127.5  # ties and saturation met
    for model in (source, form):
        np.testing.assert_array_equal(execute_qonnx(model, {"x": X})["y"], want)


def test_uint8_zero_point_128_on_a_power_of_two_scale_becomes_the_signed_quant():
    """TFLite's uint8 inputs on 1/128 (MobileNet v1): levels q - 128 in [-128, 127]."""
    source = _relu_quant(0.5, 128.0, 0)
    form = to_hls4ml(source)
    attrs, zero = _attrs_and_zero(form)
    assert attrs["signed"] == 1 and zero == 0
    want = np.clip(np.round(X / 0.5), -128, 127) * 0.5  # by hand, half to even
    assert want.max() == 63.5
    for model in (source, form):
        np.testing.assert_array_equal(execute_qonnx(model, {"x": X})["y"], want)


@pytest.mark.parametrize(("zero", "signed"), [(-100.0, 1), (20.0, 0)])
def test_other_zero_points_on_a_power_of_two_scale_are_refused_naming_the_quant(zero, signed):
    with pytest.raises(ConversionError, match=r"Quant act: zero point .* drops the zero point"):
        to_hls4ml(_relu_quant(0.5, zero, signed))


def test_zero_points_on_other_scales_are_left_to_hls4ml_s_apply_alpha():
    attrs, zero = _attrs_and_zero(to_hls4ml(_relu_quant(0.3, -128.0, 1)))
    assert attrs["signed"] == 1 and zero == -128


@pytest.mark.hls4ml
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_hls4ml_computes_the_rewritten_quant_as_qonnx_does(tmp_path):
    """As converted, hls4ml saturated this Quant at 63.5 (docs/hls4ml.md)."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.util.cleanup import cleanup_model

    source = _relu_quant(0.5, -128.0, 1)
    prepared = cleanup_model(ModelWrapper(to_hls4ml(source)))
    hls_model = compile_vivado(prepared, tmp_path, "fixed<32,16>", {"global_in": "fixed<16,10>"})
    got = np.asarray(hls_model.predict(np.ascontiguousarray(X))).reshape(X.shape)
    np.testing.assert_array_equal(got, execute_qonnx(source, {"x": X})["y"])
