"""qonnx_ingest.targets.hls4ml_rounding: TFLite's HALF_UP requantization written as ROUND /
FLOOR where provably the same function, checked on small hand-built graphs against half away
from zero computed by hand, ties included; what is not proven stays for the form to refuse."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.execute import execute_qonnx
from qonnx_ingest.targets.hls4ml import DEVIATED, EXACT, FORM_KEY, to_hls4ml

DOMAIN = "qonnx.custom_op.general"


def _half_away(v: np.ndarray) -> np.ndarray:
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def _quant(x, out, scale, zero_point, bits, signed, name, inits, rounding="HALF_UP"):
    names = [f"{name}_{p}" for p in ("s", "z", "b")]
    for n, v in zip(names, (scale, zero_point, bits), strict=True):
        inits.append(numpy_helper.from_array(np.asarray(v, np.float32), n))
    return helper.make_node(
        "Quant",
        [x, *names],
        [out],
        name=name,
        domain=DOMAIN,
        signed=signed,
        narrow=0,
        rounding_mode=rounding,
    )


def _requantize(pot: float, out_scale: float, out_zero_point: float, out_signed: int, clip_to=None):
    """n = Quant(x, 1) (an integer; ROUND: the tests feed integers), Quant(n / pot, 1), times
    out_scale, Quant on out_scale: TFLite's RoundingDivideByPOT and output Quant, as
    tflite2qonnx writes them."""
    inits = [
        numpy_helper.from_array(np.float32(pot), "pot"),
        numpy_helper.from_array(np.float32(out_scale), "c"),
    ]
    nodes = [
        _quant("x", "n", 1.0, 0.0, 32, 1, "high_mul", inits, "ROUND"),
        helper.make_node("Div", ["n", "pot"], ["d"], name="div"),
        _quant("d", "k", 1.0, 0.0, 32, 1, "divide_by_pot", inits),
        helper.make_node("Mul", ["k", "c"], ["m"], name="mul"),
        _quant("m", "y", out_scale, out_zero_point, 8, out_signed, "out", inits),
    ]
    if clip_to is not None:  # a fused RELU6-like range between the Mul and the output Quant
        inits += [
            numpy_helper.from_array(np.float32(v), n) for n, v in zip("lh", clip_to, strict=True)
        ]
        nodes[-1].input[0] = "clipped"
        nodes.insert(-1, helper.make_node("Clip", ["m", "l", "h"], ["clipped"], name="clip"))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 128])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 128])],
        inits,
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(DOMAIN, 1)]
    )


def _modes(model) -> dict[str, str]:
    return {
        n.name: helper.get_attribute_value(a).decode()
        for n in model.graph.node
        for a in n.attribute
        if a.name == "rounding_mode"
    }


def test_divide_by_pot_ties_floor_plus_half_where_negatives_clip_at_zero():
    """Output uint8 with zero point 0: negative values all clip to 0, so FLOOR(n/4 + 1/2)
    gives TFLite's results on every integer, ties (n = +-2, +-6, ...) included."""
    model = _requantize(4.0, 0.5, 0.0, 0)
    form = to_hls4ml(model)
    assert "HALF_UP" not in _modes(form).values()
    assert _modes(form)["divide_by_pot"] == "FLOOR"
    record = json.loads({p.key: p.value for p in form.metadata_props}[FORM_KEY])
    assert record[EXACT]["divide_by_pot"].startswith("integer over 2^2: FLOOR(x + 1/2)")
    assert "own scale" in record[EXACT]["out"]
    n = np.arange(-64, 64, dtype=np.float32)  # every tie n = 2 (mod 4) in range is there
    expected = 0.5 * np.clip(_half_away(n / 4), 0, 255)
    for model_ in (model, form):
        y = execute_qonnx(model_, {"x": n.reshape(1, 128)})["y"].ravel()
        np.testing.assert_array_equal(y, expected.astype(np.float32))
    # ROUND (half to even) would differ at n = 2: 0 instead of 1 step
    assert expected[list(n).index(2.0)] == 0.5


def test_divide_by_pot_split_by_sign_where_a_negative_tie_reaches_the_output():
    """int8 output with zero point 0: n = -2 (n/4 = -1/2) is -1 step half away from zero,
    FLOOR(x + 1/2) gives 0, and both are above the lowest level: no tie-free or moot form, so
    the rounding is split by sign (hls4ml_split), exact on every integer. (With zero point 10
    the output Quant is refused: hls4ml_zero_points.)"""
    model = _requantize(4.0, 0.5, 0.0, 1)
    form = to_hls4ml(model)
    record = json.loads({p.key: p.value for p in form.metadata_props}[FORM_KEY])
    assert record[EXACT]["divide_by_pot"].startswith("sign split"), record
    assert DEVIATED not in record
    n = np.arange(-64, 64, dtype=np.float32)
    expected = 0.5 * np.clip(_half_away(n / 4), -128, 127)
    assert expected[list(n).index(-2.0)] == -0.5  # the negative tie, one step down
    for model_ in (model, form):
        y = execute_qonnx(model_, {"x": n.reshape(1, 128)})["y"].ravel()
        np.testing.assert_array_equal(y, expected.astype(np.float32))


def test_fused_activation_range_keeps_both_proofs():
    """Mul, Clip(0, 6), int8 Quant with zero point -128 (TFLite's RELU6): the Clip sends every
    negative value to 0 (negative ties moot) and its bounds, 0 and 12 steps, are no ties."""
    model = _requantize(4.0, 0.5, -128.0, 1, clip_to=(0.0, 6.0))
    form = to_hls4ml(model)
    record = json.loads({p.key: p.value for p in form.metadata_props}[FORM_KEY])
    assert "moot (Clip clip from 0)" in record[EXACT]["divide_by_pot"]
    assert record[EXACT]["out"].startswith("own scale through a Clip")
    n = np.arange(-64, 64, dtype=np.float32)
    expected = 0.5 * np.clip(_half_away(n / 4), 0, 12)
    for model_ in (model, form):
        y = execute_qonnx(model_, {"x": n.reshape(1, 128)})["y"].ravel()
        np.testing.assert_array_equal(y, expected.astype(np.float32))


def test_clip_bound_on_a_tie_refused():
    """A bound of 6.25 is 12.5 steps of 0.5: a tie of the output Quant, no rule for it."""
    model = _requantize(4.0, 0.5, -128.0, 1, clip_to=(0.0, 6.25))
    with pytest.raises(ConversionError, match="Quant out: rounds HALF_UP"):
        to_hls4ml(model)


def _dense(weights: np.ndarray, in_scale: float, out_scale: float, in_rounding="ROUND"):
    """Quant(x, in_scale) int8, MatMul with constant weights, Quant(out_scale) int8, HALF_UP."""
    inits = [numpy_helper.from_array(weights.astype(np.float32), "w")]
    nodes = [
        _quant("x", "q", in_scale, 0.0, 8, 1, "in", inits, in_rounding),
        helper.make_node("MatMul", ["q", "w"], ["acc"], name="mm"),
        _quant("acc", "y", out_scale, 0.0, 8, 1, "out", inits),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])],
        inits,
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(DOMAIN, 1)]
    )


def test_accumulator_without_reachable_tie_written_round():
    """acc / s = 0.5 * (k1 + 3 k2) / 4 / float32(0.3): a tie would need 2^22 (k1 + 3 k2) to be
    an odd multiple of 0.3's odd mantissa 5033165, impossible (even against odd)."""
    model = _dense(np.array([[0.25], [0.75]]), 0.5, float(np.float32(0.3)))
    form = to_hls4ml(model, round_unproven_ties=False)
    assert _modes(form)["out"] == "ROUND"
    record = json.loads({p.key: p.value for p in form.metadata_props}[FORM_KEY])
    assert record[EXACT]["out"].startswith("accumulator: MatMul mm of integers in [-128, 127]")


def test_accumulator_with_reachable_tie_refused():
    """acc / s = (k1 + 3 k2) / 8 / 0.25 = (k1 + 3 k2) / 2: k1 = 1, k2 = 0 is a tie."""
    model = _dense(np.array([[0.25], [0.75]]), 0.5, 0.25)
    x = np.array([[0.5, 0.0]], np.float32)  # k = (1, 0): acc = 0.125 = half a step
    assert execute_qonnx(model, {"x": x})["y"].item() == 0.25  # HALF_UP: one step
    with pytest.raises(ConversionError, match="Quant out: rounds HALF_UP"):
        to_hls4ml(model)


def test_graph_input_without_an_integer_source_refused():
    """The input-grid rule needs the source's integer input on record (TFLite's
    io_quantization): a float input may sit on a tie."""
    model = _dense(np.array([[0.25], [0.75]]), 0.5, float(np.float32(0.3)), "HALF_UP")
    with pytest.raises(ConversionError, match="Quant in: rounds HALF_UP"):
        to_hls4ml(model)
    io = {"x": {"dtype": "int8", "scale": [0.5], "zero_point": [0]}}
    helper.set_model_props(model, {"tflite2qonnx.io_quantization": json.dumps(io)})
    record = json.loads({p.key: p.value for p in to_hls4ml(model).metadata_props}[FORM_KEY])
    assert record[EXACT]["in"].startswith("input grid: the source's int8 inputs")


def test_source_model_not_changed_by_the_rounding_rules():
    model = _requantize(4.0, 0.5, 0.0, 0)
    before = model.SerializeToString()
    to_hls4ml(model)
    assert model.SerializeToString() == before
    assert onnx.checker.check_model(to_hls4ml(model)) is None


@pytest.mark.parametrize("out_scale, proven", [(0.25, True), (1.0, False)])
def test_requantize_of_a_quant_output(out_scale, proven):
    """int8 on 0.5 requantized onto 0.25 (k * 2: integers) or onto 1.0 (k / 2: k = 1 is a
    tie), through a Reshape as TFLite's SpatialSqueeze."""
    inits = [numpy_helper.from_array(np.array([1, 4], np.int64), "shape")]
    nodes = [
        _quant("x", "q", 0.5, 0.0, 8, 1, "in", inits, "ROUND"),
        helper.make_node("Reshape", ["q", "shape"], ["r"], name="reshape"),
        _quant("r", "y", out_scale, 0.0, 8, 1, "out", inits),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(DOMAIN, 1)]
    )
    if not proven:
        with pytest.raises(ConversionError, match="Quant out: rounds HALF_UP"):
            to_hls4ml(model)
        return
    record = json.loads({p.key: p.value for p in to_hls4ml(model).metadata_props}[FORM_KEY])
    assert record[EXACT]["out"] == "requantize: integers in [-128, 127] times 2, never a tie"
