"""HGQ2's minifloat quantizer (FloatPointQuantizer) converts to qonnx's FloatQuant, exactly.

``hgq2_float_models.py`` builds, runs (HGQ2's predict) and converts the models in a Keras 3
subprocess, once per module (~1 minute); this process compares, bit for bit, in qonnx's
executor and in onnxruntime (FloatQuant as standard ops, and ``--format qcdq``).
"""

import json

import numpy as np
import onnx
import pytest
from hgq2_support import assert_exact_in_both_runtimes, built_by
from onnx import helper, numpy_helper

pytestmark = pytest.mark.keras

CONVERTED = ("grid", "grid_per_element", "dense")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return built_by("hgq2_float_models.py", tmp_path_factory)


def reference(made, name):
    return dict(np.load(made / f"{name}.npz"))


def converted(made, name):
    return onnx.load(made / f"{name}.inmemory.onnx")


def float_quants(model):
    return [n for n in model.graph.node if n.op_type == "FloatQuant"]


@pytest.mark.parametrize("name", CONVERTED)
def test_minifloat_model_equals_hgq2_predict_bit_for_bit(made, name):
    """Every value of the grid (ties, subnormals, overflow, powers of two and their float32
    neighbours, 0, 1e-30, 1e30, both signs) in every format, at batch 1 and 8."""
    model = converted(made, name)
    onnx.checker.check_model(model)
    ref = reference(made, name)
    assert len(float_quants(model)) == int(ref["quantizers"])  # one node per quantizer
    assert_exact_in_both_runtimes(model, ref, bit_equal=True)


def _parameters(model, node):
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    return [float(inits[name]) for name in node.input[1:6]]


def test_uniform_minifloat_is_one_floatquant_on_the_input(made):
    """(m, e, e0) = (3, 4, 0): exponents -7..7, so E = 4, bias 2^3 - 0 = 8, M = 3 and
    max_val (2 - 2^-3) 2^7 = 240, reading the graph input itself."""
    model = converted(made, "grid")
    node = next(n for n in float_quants(model) if n.name == "f0/input_quantizer")
    assert node.input[0] == model.graph.input[0].name
    assert _parameters(model, node) == [1.0, 4.0, 3.0, 8.0, 240.0]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["rounding_mode"] == b"ROUND" and attrs["has_subnormal"] == 1
    assert attrs["saturation"] == 1 and attrs["has_inf"] == attrs["has_nan"] == 0


def test_per_element_minifloat_is_standard_ops_then_a_covering_floatquant(made):
    """Exponent counted by comparisons, powers of two gathered: no float logarithm whose last
    bit could differ between runtimes; the FloatQuant covers the widest element."""
    model = converted(made, "grid_per_element")
    ops = {n.op_type for n in model.graph.node}
    assert {"GreaterOrEqual", "Gather", "Round"} <= ops and not ops & {"Log", "Pow", "Div"}
    (node,) = float_quants(model)
    # the formats' exponents span -19 (e0 = -12, e = 4) to 7 (e0 = 0, e = 4): 27 exponents
    # take E = 5 with bias 1 - (-19) = 20; the widest mantissa is 4; max 1.875 * 2^7 = 240
    assert _parameters(model, node) == [1.0, 5.0, 4.0, 20.0, 240.0]
    meta = {p.key: p.value for p in model.metadata_props}
    widths = json.loads(meta["qkeras2qonnx.hgq2_widths"])[node.name]
    assert widths["type"] == "float" and widths["m"][:3] == [3, 2, 0]
    assert "minifloat" in json.loads(meta["qonnx_ingest.composite_quantizers"])[node.name]


def test_minifloat_weights_are_hgq2_values_behind_a_floatquant(made):
    """The kernel's quantized values are stored; the FloatQuant after it changes none."""
    model = converted(made, "dense")
    names = {n.name for n in float_quants(model)}
    assert {"fc/kernel_quantizer", "fc/bias_quantizer", "fc/input_quantizer"} <= names
    assert "fc/output_quantizer" in names


def test_minifloat_whose_rounding_depends_on_hgq2s_log2_is_refused(made):
    """(m, e, e0) = (3, 4, -14): HGQ2's floor(log2(|x| + 1e-7)) puts values below 2^-20
    elsewhere than the minifloat does (counted in HGQ2's own quantizer), so no exact form."""
    assert int(reference(made, "refuse_tiny_exponent")["differences"]) > 0
    message = (made / "refuse_tiny_exponent.error.txt").read_text()
    assert not (made / "refuse_tiny_exponent.inmemory.onnx").exists()
    for fragment in ("tiny", "smallest exponent -21", "log2(|x| + 1e-7)", "refused"):
        assert fragment in message, message
