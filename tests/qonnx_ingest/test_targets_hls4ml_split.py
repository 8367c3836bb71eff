"""qonnx_ingest.targets.hls4ml_split: a HALF_UP Quant no rule proves tie-free, written as
FLOOR(relu(v) + 1/2) - FLOOR(relu(-v) + 1/2), checked on small hand-built graphs against half
away from zero computed by hand, ties and saturation included, in qonnx and (marked hls4ml)
compiled by hls4ml 1.3.0; refused where the negative saturation is neither matched nor
proven unreachable."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from hls4ml_support import compile_vivado
from onnx import TensorProto, helper, numpy_helper

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.execute import execute_qonnx
from qonnx_ingest.targets.hls4ml import EXACT, FORM_KEY, to_hls4ml

DOMAIN = "qonnx.custom_op.general"


def _half_away(v: np.ndarray, low: int, high: int) -> np.ndarray:
    return np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5), low, high)


def _quant(x, out, name, inits, *, narrow=0, rounding="HALF_UP", bits=8):
    names = [f"{name}_{p}" for p in ("s", "z", "b")]
    for n, v in zip(names, (1.0, 0.0, bits), strict=True):
        inits.append(numpy_helper.from_array(np.asarray(v, np.float32), n))
    return helper.make_node(
        "Quant", [x, *names], [out], name=name, domain=DOMAIN, signed=1, narrow=narrow,
        rounding_mode=rounding,
    )  # fmt: skip


def _model(nodes, inits, width: int, out_width: int | None = None) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, out_width or width])],
        inits,
    )
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid(DOMAIN, 1)]
    return helper.make_model(graph, opset_imports=opsets)


def _over_four() -> onnx.ModelProto:
    """n = Quant(x) int8 (ROUND; fed integers), y = Quant(n / 4) int8 HALF_UP, not narrow:
    ties at every n = 2 mod 4, the negative ones where ROUND would differ."""
    inits = [numpy_helper.from_array(np.float32(4.0), "four")]
    nodes = [
        _quant("x", "n", "in", inits, rounding="ROUND"),
        helper.make_node("Div", ["n", "four"], ["d"], name="div"),
        _quant("d", "y", "out", inits),
    ]
    return _model(nodes, inits, 256)


def _rules(model) -> dict[str, str]:
    props = {p.key: p.value for p in model.metadata_props}
    return json.loads(props[FORM_KEY])[EXACT]


def test_integer_over_four_split_by_sign_equals_half_away_from_zero():
    form = to_hls4ml(_over_four())
    assert _rules(form)["out"].startswith("sign split"), _rules(form)
    modes = [a.s for n in form.graph.node for a in n.attribute if a.name == "rounding_mode"]
    assert b"HALF_UP" not in modes and modes.count(b"FLOOR") == 2, modes
    n = np.arange(-128, 128, dtype=np.float32).reshape(1, 256)
    y = execute_qonnx(form, {"x": n})["y"]
    np.testing.assert_array_equal(y, _half_away(n / 4, -128, 127))
    assert y[0, 126] == -1.0  # n = -2: -0.5 away from zero (ROUND would give 0)


def test_narrow_quant_split_even_at_saturation():
    inits: list = []
    form = to_hls4ml(_model([_quant("x", "y", "out", inits, narrow=1)], inits, 600))
    assert "(narrow)" in _rules(form)["out"]
    v = (np.arange(-300, 300, dtype=np.float32) / 2).reshape(1, 600)  # every half step
    y = execute_qonnx(form, {"x": v})["y"]
    np.testing.assert_array_equal(y, _half_away(v, -127, 127))


def test_unbounded_input_not_narrow_refused():
    inits: list = []
    model = _model([_quant("x", "y", "out", inits)], inits, 4)  # -128.4 -> -128, not -127
    with pytest.raises(ConversionError, match="Quant out: rounds HALF_UP"):
        to_hls4ml(model)


def test_accumulator_with_reachable_ties_split():
    """y = Quant(n @ [[0.5], [1]]) int32 HALF_UP: 0.5 * n1 + n2 is a tie for every odd n1."""
    inits = [numpy_helper.from_array(np.array([[0.5], [1.0]], np.float32), "w")]
    nodes = [
        _quant("x", "n", "in", inits, rounding="ROUND"),
        helper.make_node("MatMul", ["n", "w"], ["acc"], name="matmul"),
        _quant("acc", "y", "out", inits, bits=32),
    ]
    form = to_hls4ml(_model(nodes, inits, 2, 1))
    assert "x / s >= -192" in _rules(form)["out"], _rules(form)
    for n in ([-3, 0], [-3, 1], [3, -2], [-128, -128], [127, 127], [-1, 0]):
        x = np.asarray([n], np.float32)
        y = execute_qonnx(form, {"x": x})["y"].item()
        assert y == _half_away(np.float32(0.5 * n[0] + n[1]), -(2**31), 2**31 - 1), n


@pytest.mark.hls4ml
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_hls4ml_compiles_the_split_half_away_from_zero(tmp_path):
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.util.cleanup import cleanup_model

    prepared = cleanup_model(ModelWrapper(to_hls4ml(_over_four())))
    hls_model = compile_vivado(prepared, tmp_path, "fixed<32,16>", {"global_in": "fixed<16,16>"})
    n = np.arange(-128, 128, dtype=np.float32).reshape(1, 256)
    y = np.asarray(hls_model.predict(np.ascontiguousarray(n))).reshape(1, 256)
    np.testing.assert_array_equal(y, _half_away(n / 4, -128, 127))
