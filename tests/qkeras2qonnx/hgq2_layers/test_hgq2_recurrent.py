"""HGQ2's recurrent layers, unrolled, equal HGQ2's predict bit for bit.

``hgq2_recurrent_models.py`` builds, runs and converts the models in a Keras 3 subprocess,
once per module (~1 minute); this process compares in qonnx's executor and in onnxruntime
(Quant as standard ops, and ``--format qcdq``) at batch 1 and 8.
"""

import json

import numpy as np
import onnx
import pytest
from hgq2_support import assert_exact_in_both_runtimes, built_by
from onnx import helper, numpy_helper
from qkeras_helpers import quant_nodes

pytestmark = pytest.mark.keras

CONVERTED = (
    "simple_rnn",
    "simple_rnn_sequences",
    "gru",
    "gru_reset_before",
    "gru_backwards_no_bias",
)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return built_by("hgq2_recurrent_models.py", tmp_path_factory)


def converted(made, name):
    return onnx.load(made / f"{name}.inmemory.onnx")


@pytest.mark.parametrize("name", CONVERTED)
def test_unrolled_recurrent_model_equals_hgq2_predict_bit_for_bit(made, name):
    model = converted(made, name)
    onnx.checker.check_model(model)
    ref = dict(np.load(made / f"{name}.npz"))
    assert len(quant_nodes(model)) == int(ref["quantizers"])  # one per application
    assert len(np.unique(ref["y8"])) > 8  # the recurrence computes something non-trivial
    assert_exact_in_both_runtimes(model, ref, bit_equal=True)


def test_every_step_has_its_own_state_and_pre_activation_quantizer(made):
    """Five steps: pre-activation quantizers t0..t4, state quantizers t1..t4 (step 0 reads
    the zero state), and no ONNX RNN op (it has no place for them)."""
    model = converted(made, "simple_rnn_sequences")
    names = {n.name for n in quant_nodes(model)}
    assert {f"rnn/t{t}_pre_activation_quantizer" for t in range(5)} <= names
    state = {n for n in names if n.endswith("_state_quantizer")}
    assert state == {f"rnn/t{t}_state_quantizer" for t in range(1, 5)}
    assert not {n.op_type for n in model.graph.node} & {"RNN", "GRU", "LSTM", "Loop", "Scan"}


def test_a_float_activation_inside_the_recurrence_is_refused(made):
    message = (made / "refuse_tanh_rnn.error.txt").read_text()
    assert not (made / "refuse_tanh_rnn.inmemory.onnx").exists()
    assert "rnn" in message and "'tanh'" in message, message


def test_gru_gate_quantizer_covers_its_affine_image(made):
    """HGQ2's hard-sigmoid gate quantizer outputs q(x) * 0.25 + 0.5 with q signed, i = 1:
    [0, 1) on a grid 4 times finer than q's, so the covering Quant is unsigned with scale
    2^-(F + 2), F the largest f; the metadata records the affine."""
    model = converted(made, "gru")
    node = next(n for n in quant_nodes(model) if n.name == "gru/t2_gate_quantizer")
    meta = {p.key: p.value for p in model.metadata_props}
    widths = json.loads(meta["qkeras2qonnx.hgq2_widths"])[node.name]
    assert widths["affine"] == [0.25, 0.5] and set(widths["k"]) == {1} and set(widths["i"]) == {1}
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert float(inits[node.input[1]]) == 2.0 ** -(max(widths["f"]) + 2)
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["signed"] == 0
    per_step = {"state", "gate", "reset_state", "candidate"}
    names = {n.name for n in quant_nodes(model)}
    assert {f"gru/t{t}_{role}_quantizer" for t in range(5) for role in per_step} <= names
