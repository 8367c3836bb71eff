"""HGQ2 models convert exactly: qonnx's executor and onnxruntime equal HGQ2's own predict.

The models are built, run and converted in memory by ``hgq2_models.py`` in a Keras 3
subprocess (``hgq2_support``); this process (QKeras 0.9) compares the files, and converts the
saved ``.keras`` file on the command line and through ``convert(path)``'s subprocess.
"""

import json

import numpy as np
import onnx
import pytest
from hgq2_support import assert_exact_in_both_runtimes, made_hgq2_models
from onnx import numpy_helper
from qkeras3_support import run_cli_on_keras3_file
from qkeras_helpers import quant_nodes

from qonnx_ingest.execute import execute_qonnx

# qonnx's executor compares its computed shapes with value_info that run-time reshapes (einsums,
# slices) leave symbolic: the warning is expected here and says nothing about the values.
pytestmark = [
    pytest.mark.keras,
    pytest.mark.filterwarnings("ignore:Output shapes disagree:UserWarning"),
]

CONVERTED = (
    "dense",
    "conv2d_pool",
    "conv1d",
    "batchnorm",
    "trained",
    "modes",
    "multi_input",
    "einsum",
    "sigmoid_out",
    "tables",
    "softmax",
    "reductions",
    "conv3d",
    "inexact_sum",  # warned (test_hgq2_sums), exact on these inputs
    "einsum_output",
    "einsum_axes",
    "op_nodes",
    "minifloat",  # FloatQuant (test_hgq2_float)
    "attention",
    "cross_attention",
    "linformer",
)
WIDTHS = "qkeras2qonnx.hgq2_widths"


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return made_hgq2_models(tmp_path_factory)


def reference(made, name):
    return dict(np.load(made / f"{name}.npz"))


def converted(made, name):
    return onnx.load(made / f"{name}.inmemory.onnx")


def metadata(model):
    return {p.key: p.value for p in model.metadata_props}


@pytest.mark.parametrize("name", CONVERTED)
def test_hgq2_model_matches_hgq2_predict_in_qonnx_and_onnxruntime(made, name):
    model = converted(made, name)
    onnx.checker.check_model(model)
    ref = reference(made, name)
    assert len(quant_nodes(model)) == int(ref["quantizers"])  # one node per HGQ2 quantizer
    assert_exact_in_both_runtimes(model, ref)


@pytest.mark.parametrize(
    "name", ["einsum_axes", "op_nodes", "attention", "cross_attention", "linformer"]
)
def test_einsum_over_any_axis_op_nodes_and_attention_equal_hgq2_bit_for_bit(made, name):
    """QEinsumDense(+Batchnorm) contracting the first, last, both axes of a rank-3 input (tf2onnx
    leaves copies of such kernels that only a Shape reads), slicing / keras.ops /
    arithmetic nodes between layers (no weights: kept as they are), and QMultiHeadAttention
    (self- and cross-attention; its softmax table holds the 1/sqrt(key_dim)) and
    QLinformerAttention: 0 difference."""
    model = converted(made, name)
    ref = reference(made, name)
    assert np.any(ref["y8"] != 0)
    assert_exact_in_both_runtimes(model, ref, bit_equal=True)


def test_op_nodes_become_the_onnx_ops_they_compute(made):
    """x[:, 0] / x[..., 1:3] are Slice (or Gather), keras.ops.concatenate a Concat, the sums
    ReduceSum / ReduceMean: the op nodes are in the graph, not dropped."""
    ops = {n.op_type for n in converted(made, "op_nodes").graph.node}
    assert {"Concat"} <= ops and ops & {"Slice", "Gather"} and ops & {"ReduceSum", "ReduceMean"}


def test_an_einsum_model_output_gets_the_keras_output_shape(made):
    """tf2onnx leaves that output shapeless (onnx.checker refused the model); it is
    [batch, 7, 9], as Keras says."""
    (output,) = converted(made, "einsum_output").graph.output
    dims = output.type.tensor_type.shape.dim
    assert [d.dim_value or d.dim_param for d in dims] == ["batch", 7, 9]


def test_trained_widths_differ_and_zero_width_weights_are_zero(made):
    """After three epochs with an EBOPs penalty, kernel widths differ and some reach 0 bits;
    those weights are 0 in the graph and the recorded widths say so."""
    bits = reference(made, "trained")["kernel_bits"]
    assert len(np.unique(bits)) >= 2 and np.any(bits == 0), np.unique(bits)
    model = converted(made, "trained")
    widths = json.loads(metadata(model)[WIDTHS])
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    zero_width = 0
    for node in quant_nodes(model):
        if not node.name.endswith("kernel_quantizer"):
            continue
        w = widths[node.name]
        i, f = (np.reshape(w[key], w["shape"]) for key in "if")
        weight = values[node.input[0]]  # Dense kernel: same (in, out) layout as Keras
        assert weight.shape == tuple(w["shape"])
        dead = (i + f) <= 0  # b = i + f = 0 magnitude bits: SAT_SYM's range is [0, 0]
        zero_width += int(dead.sum())
        assert np.all(weight[dead] == 0)
    assert zero_width == int(np.sum(bits == 0))


def test_every_quant_node_has_its_widths_in_the_metadata(made):
    model = converted(made, "modes")
    widths = json.loads(metadata(model)[WIDTHS])
    assert set(widths) == {n.name for n in quant_nodes(model)}
    trn_wrap = widths["trn_wrap/input_quantizer"]
    assert trn_wrap["shape"] == [1, 12] and trn_wrap["overflow_mode"] == "WRAP"
    assert len(set(trn_wrap["f"])) > 1  # per element, as randomized


def test_attention_parts_get_their_own_quant_nodes(made):
    """QMultiHeadAttention's projections and softmax are stripped under ``mha/<part>``: one
    Quant node per HGQ2 quantizer (the key projection has no bias; the softmax's inner exp /
    inverse quantizers are inside its tables)."""
    names = {n.name for n in quant_nodes(converted(made, "cross_attention"))}
    roles = {"query": "ikbo", "key": "iko", "value": "ikbo", "output": "ikb", "softmax": "o"}
    full = {"i": "input", "k": "kernel", "b": "bias", "o": "output"}
    want = {f"mha/{part}/{full[r]}_quantizer" for part, rs in roles.items() for r in rs}
    assert names == want


def _attributes(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def test_uniform_saturating_quantizers_are_one_plain_quant(made):
    """Uniform (k, i, f) = (1, 1, 2) with SAT / RND_CONV is Quant(4-bit signed, scale 1/4,
    ROUND) on the input itself; SAT_SYM / TRN is the narrow FLOOR Quant."""
    model = converted(made, "modes")
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    nodes = {n.name: n for n in model.graph.node}
    graph_input = model.graph.input[0].name
    for name, rounding, narrow in (("uniform_sat", b"ROUND", 0), ("uniform_sat_sym", b"FLOOR", 1)):
        node = nodes[f"{name}/input_quantizer"]
        assert node.input[0] == graph_input
        assert float(inits[node.input[1]]) == 0.25 and float(inits[node.input[3]]) == 4
        attrs = _attributes(node)
        assert (attrs["rounding_mode"], attrs["signed"], attrs["narrow"]) == (rounding, 1, narrow)


def test_wrapping_quantizers_are_standard_ops_then_a_covering_quant(made):
    """WRAP / RND has no Quant form: standard ops compute it, a Quant as wide as the widest
    element (identity on the result's grid) follows; the metadata names the form."""
    model = converted(made, "modes")
    producers = {o: n for n in model.graph.node for o in n.output}
    node = next(n for n in model.graph.node if n.name == "rnd_wrap/input_quantizer")
    ops = set()
    frontier = [node.input[0]]
    while frontier:
        producer = producers.get(frontier.pop())
        if producer is not None and producer.op_type != "Concat":
            ops.add(producer.op_type)
            frontier.extend(producer.input)
    assert {"Floor", "Mul", "Sub"} <= ops and "Quant" not in ops
    widths = json.loads(metadata(model)[WIDTHS])["rnd_wrap/input_quantizer"]
    kif = zip(widths["k"], widths["i"], widths["f"], strict=True)
    active = [f for k, i, f in kif if k + i + f > 0]
    scale = numpy_helper.to_array(
        next(t for t in model.graph.initializer if t.name == node.input[1])
    )
    assert float(scale) == 2.0 ** -max(active)
    forms = json.loads(metadata(model)["qonnx_ingest.composite_quantizers"])
    assert "RND/WRAP" in forms["rnd_wrap/input_quantizer"]


@pytest.mark.parametrize("name, functions", [("tables", {"Tanh", "Sigmoid"}), ("softmax", {"Exp"})])
def test_float_functions_are_tables_hgq2_computed_not_float_ops(made, name, functions):
    """tanh, sigmoid, exp and 1/x are Gathers from tables (exact), never float ops whose
    last bit could differ between runtimes before a quantizer."""
    ops = {n.op_type for n in converted(made, name).graph.node}
    assert "Gather" in ops
    assert not ops & (functions | {"Div", "Reciprocal"}), ops & functions


def test_batch_norm_is_folded_not_an_onnx_batchnormalization(made):
    ops = {n.op_type for n in converted(made, "batchnorm").graph.node}
    assert "BatchNormalization" not in ops


def test_channels_last_conv_model_stays_exact(made):
    """qonnx's channels-last pass (batch fixed to 1) on the per-element quantizer ops."""
    model = onnx.load(made / "conv2d_pool.channels_last.onnx")
    onnx.checker.check_model(model)
    ref = reference(made, "conv2d_pool")
    inputs = {model.graph.input[0].name: ref["x1_0"]}
    got = execute_qonnx(model, inputs)[model.graph.output[0].name]
    np.testing.assert_allclose(got, ref["y1"], rtol=1e-6, atol=1e-6)


def test_cli_converts_a_saved_hgq2_keras_file(made, tmp_path):
    """A fresh ``qkeras2qonnx`` process reads the .keras file (Keras 3, hgq2 on its path)."""
    out = tmp_path / "saved.onnx"
    done = run_cli_on_keras3_file(made / "saved.keras", "-o", out, "--verify")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "verify: ok, " in done.stdout
    assert "source: HGQ2 predict" in done.stdout  # HGQ2 ran the reference, not QKeras
    model = onnx.load(out)
    onnx.checker.check_model(model)
    assert_exact_in_both_runtimes(model, reference(made, "conv2d_pool"))


def test_a_saved_hgq2_file_converts_to_the_same_bytes_after_other_models(made):
    """``multi_input.keras`` by path, then again after the other models in that process: the
    same bytes (its QAdd's quantizers get Keras's counter-made names, once in the metadata)."""
    first = (made / "multi_input.path.onnx").read_bytes()
    assert first == (made / "multi_input.again.onnx").read_bytes()
    assert_exact_in_both_runtimes(
        onnx.load(made / "multi_input.path.onnx"), reference(made, "multi_input")
    )


def test_saved_hgq2_file_converts_in_a_subprocess_from_a_qkeras09_process(made):
    import qkeras

    import qkeras2qonnx

    assert qkeras.__version__.startswith("0.9")
    model = qkeras2qonnx.convert(made / "saved.keras")
    assert_exact_in_both_runtimes(model, reference(made, "conv2d_pool"))


@pytest.mark.parametrize(
    "name, fragments",
    [
        ("refuse_softmax_unstable", ("soft", "stable=False", "no exact table")),
        ("refuse_attention_mask", ("mha", "call arguments ['use_causal_mask']")),
        ("refuse_tanh", ("fc", "activation 'tanh'")),
        ("refuse_avg3", ("avg3", "not a power of two")),
        ("refuse_custom_op", ("twice", "unsupported operation Twice from __main__")),
    ],
)
def test_unsupported_hgq2_models_are_refused_naming_the_layer(made, name, fragments):
    """The in-memory ``convert(model, path)`` raised, naming the layer, and wrote nothing."""
    message = (made / f"{name}.error.txt").read_text()
    assert not (made / f"{name}.inmemory.onnx").exists()
    for fragment in fragments:
        assert fragment in message, message
