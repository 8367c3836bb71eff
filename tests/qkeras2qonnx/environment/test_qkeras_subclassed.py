"""Subclassed QKeras models (``keras.Model`` subclasses, in memory and as SavedModels), and
Functional / Sequential models holding them or user-defined layers holding QKeras layers,
convert through their traced calls, every quantizer in place, and equal QKeras's outputs."""

from __future__ import annotations

import numpy as np
import pytest
from qkeras_helpers import (
    assert_matches_qkeras,
    count_quantizers,
    keras,
    quant_nodes,
    set_seeded_weights,
)
from subclassed_models import INPUT, SET, classes

from qonnx_ingest.errors import ConversionError

pytestmark = pytest.mark.keras


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    x = np.zeros((1, *INPUT), np.float32)
    residual = classes().Residual(name="residual")
    residual(x)
    set_seeded_weights(residual, 12)
    raw = classes().RawOp(name="raw")
    raw(x)
    set_seeded_weights(raw, 13)
    sets = np.zeros((1, *SET), np.float32)
    deep_sets = classes().DeepSets(name="deep_sets")
    deep_sets(sets)
    set_seeded_weights(deep_sets, 15)
    cumulative = classes().DeepSets(pool="cumsum", name="cumulative")
    cumulative(sets)
    folder = tmp_path_factory.mktemp("subclassed")
    for name, model in (("residual", residual), ("raw", raw), ("deep_sets", deep_sets)):
        model.save(folder / name)
    cumulative.save(folder / "cumulative")
    return {"residual": residual, "raw": raw, "deep_sets": deep_sets, "folder": folder}


def test_in_memory_subclassed_model_with_a_nested_functional_matches_qkeras(models):
    import qkeras2qonnx

    model = models["residual"]
    onnx_model = qkeras2qonnx.convert(model)
    for batch in (1, 8):
        assert_matches_qkeras(model, onnx_model, batch=batch, step=1 / 16)
    # stem and branch convs (kernel and bias each), two relus, the head's dense kernel
    assert len(quant_nodes(onnx_model)) == count_quantizers(model) == 7


def test_saved_subclassed_model_converts_through_its_traced_call(models):
    import qkeras2qonnx
    from qkeras2qonnx.environment.load import load_model

    path = models["folder"] / "residual"
    revived = load_model(path)
    assert type(revived).__module__.endswith("saved_model.load")  # no Python call to run
    onnx_model = qkeras2qonnx.convert(path)
    for batch in (1, 8):
        assert_matches_qkeras(revived, onnx_model, batch=batch, step=1 / 16)
        assert_matches_qkeras(models["residual"], onnx_model, batch=batch, step=1 / 16)
    assert len(quant_nodes(onnx_model)) == 7


def test_saved_subclassed_model_with_a_relu_between_layers_matches_qkeras(models):
    """The traced call's raw Relu is called again as tf.nn.relu (a TFOpLambda layer)."""
    import qkeras2qonnx

    onnx_model = qkeras2qonnx.convert(models["folder"] / "raw")
    assert "Relu" in {n.op_type for n in onnx_model.graph.node}
    assert_matches_qkeras(models["raw"], onnx_model, batch=4, step=1 / 16)
    assert len(quant_nodes(onnx_model)) == count_quantizers(models["raw"]) == 3


# QDense on [batch, set, features] is tf2onnx's Tensordot: a Reshape to a shape computed from
# Shape -> Cast -> Gather at run time, which onnx's data propagation does not follow, so qonnx's
# executor warns at the nodes after it and then uses the computed shapes (harmless).
@pytest.mark.filterwarnings("ignore:Output shapes disagree:UserWarning")
def test_saved_deep_sets_model_with_a_mean_between_layers_matches_qkeras(models):
    """tf.reduce_mean over the set axis in the model's own call: rebuilt from the traced Mean
    op (its axis a constant of the trace), the quantizers of phi and rho still in place."""
    import qkeras2qonnx
    from qkeras2qonnx.environment.load import load_model

    path = models["folder"] / "deep_sets"
    onnx_model = qkeras2qonnx.convert(path)
    assert "ReduceMean" in {n.op_type for n in onnx_model.graph.node}
    for batch in (1, 8):
        assert_matches_qkeras(models["deep_sets"], onnx_model, batch=batch, step=1 / 16)
    assert_matches_qkeras(load_model(path), onnx_model, batch=8, step=1 / 16)
    names = sorted(n.name for n in quant_nodes(onnx_model))
    assert names == [
        "phi/bias_quantizer",
        "phi/kernel_quantizer",
        "phi_act/activation_quantizer",
        "rho/kernel_quantizer",
    ]


def test_saved_subclassed_model_with_an_op_without_a_rule_is_refused_naming_it(models):
    import qkeras2qonnx

    with pytest.raises(ConversionError, match=r"op '[^']*Cumsum' \(Cumsum\) in the subclassed"):
        qkeras2qonnx.convert(models["folder"] / "cumulative")


def test_in_memory_subclassed_model_with_a_raw_op_matches_qkeras(models):
    """In memory the raw op is traced as a layer of its own (TFOpLambda) and converts."""
    import qkeras2qonnx

    model = models["raw"]
    onnx_model = qkeras2qonnx.convert(model)
    assert_matches_qkeras(model, onnx_model, batch=4, step=1 / 16)
    assert len(quant_nodes(onnx_model)) == count_quantizers(model) == 3


def test_subclassed_model_never_called_is_refused_with_a_hint():
    import qkeras2qonnx

    with pytest.raises(ConversionError, match="never called has no input shape"):
        qkeras2qonnx.convert(classes().Residual(name="fresh"))


@pytest.fixture(scope="module")
def nested():
    model = classes().Nested(name="outer")
    model(np.zeros((1, *INPUT), np.float32))
    set_seeded_weights(model, 14)
    return model


def test_subclassed_model_and_custom_layer_nested_in_a_subclassed_model_match_qkeras(nested):
    """The nested subclassed model and the user-defined layer are traced through: their QKeras
    layers are converted where they sit (Keras cannot clone a model holding a subclassed one)."""
    import qkeras2qonnx

    onnx_model = qkeras2qonnx.convert(nested)
    for batch in (1, 8):
        assert_matches_qkeras(nested, onnx_model, batch=batch, step=1 / 16)
    # block's conv (kernel, bias) and relu; the dense block's kernel and relu
    assert len(quant_nodes(onnx_model)) == 5


def _assert_exact(model, onnx_model, *, names: tuple[str, ...]) -> None:
    """qonnx's executor, and onnxruntime on the standard-op and QCDQ forms, equal QKeras at
    batch 1 and 8; the Quant nodes are the ``names`` given (where the layers sit)."""
    from hgq2_support import onnxruntime_forms

    rng = np.random.default_rng(3)
    sessions = onnxruntime_forms(onnx_model)
    for batch in (1, 8):
        assert_matches_qkeras(model, onnx_model, batch=batch, step=1 / 16)
        x = (np.round(rng.uniform(-2, 2, (batch, *INPUT)) * 16) / 16).astype(np.float32)
        want = np.asarray(model(x, training=False))
        for form, session in sessions.items():
            got = session.run(None, {onnx_model.graph.input[0].name: x})[0]
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=form)
    assert sorted(n.name for n in quant_nodes(onnx_model)) == sorted(names)


# block's conv (kernel, bias) and relu, where the block sits in the outer model
BLOCK = ("conv/kernel_quantizer", "conv/bias_quantizer", "act/activation_quantizer")
DENSE_BLOCK = ("dense/fc/kernel_quantizer", "dense/fc_act/activation_quantizer")


@pytest.fixture(scope="module")
def outer_models(nested, tmp_path_factory):
    """Functional and Sequential models calling the nested model's subclassed block and its
    user-defined dense-block layer, directly or one Functional level down; saved ones."""
    from qkeras import QDense, quantized_bits

    k = keras()
    inp = k.Input(INPUT, name="x")
    functional = k.Model(
        inp, nested.dense(k.layers.MaxPooling2D(2)(nested.block(inp))), name="functional"
    )
    fc = QDense(2, kernel_quantizer=quantized_bits(4, 0, alpha=1), name="fc")
    sequential = k.Sequential(
        [k.Input(INPUT), nested.block, k.layers.Flatten(), fc], name="sequential"
    )
    fc.set_weights([np.linspace(-1, 1, w.size).reshape(w.shape) for w in fc.get_weights()])
    mid = k.Model(inp, k.layers.MaxPooling2D(2)(nested.block(inp)), name="mid")
    deep = k.Model(inp, nested.dense(mid(inp)), name="deep")
    folder = tmp_path_factory.mktemp("outer")
    deep.save(folder / "deep")
    return {"functional": functional, "sequential": sequential, "deep": deep, "folder": folder}


def test_subclassed_model_and_custom_layer_called_in_a_functional_model_match_qkeras(
    outer_models,
):
    """Keras's cloning cannot rebuild them (it loops forever on the subclassed one): the
    Functional model is replayed node by node, each of them replaced by the Functional model
    of its call, so their QKeras layers convert under their own names."""
    import qkeras2qonnx

    model = outer_models["functional"]
    onnx_model = qkeras2qonnx.convert(model)
    _assert_exact(model, onnx_model, names=tuple(f"block/{n}" for n in BLOCK) + DENSE_BLOCK)
    assert onnx_model.graph.input[0].name == "x"


def test_subclassed_model_in_a_sequential_model_matches_qkeras(outer_models):
    import qkeras2qonnx

    model = outer_models["sequential"]
    onnx_model = qkeras2qonnx.convert(model)
    _assert_exact(model, onnx_model, names=(*(f"block/{n}" for n in BLOCK), "fc/kernel_quantizer"))


def test_subclassed_model_one_functional_level_down_matches_qkeras(outer_models):
    import qkeras2qonnx

    model = outer_models["deep"]
    onnx_model = qkeras2qonnx.convert(model)
    _assert_exact(model, onnx_model, names=tuple(f"mid/block/{n}" for n in BLOCK) + DENSE_BLOCK)


def test_saved_functional_model_holding_revived_subclassed_block_and_custom_layer_matches(
    outer_models,
):
    """From the SavedModel, the block and the dense-block layer come back as revived classes
    without Python code: each is rebuilt from its traced call's name scopes."""
    import qkeras2qonnx
    from qkeras2qonnx.environment.load import load_model

    path = outer_models["folder"] / "deep"
    revived = load_model(path)
    dense = revived.get_layer("dense")
    assert type(dense).__module__.endswith("saved_model.load")  # no Python call to run
    onnx_model = qkeras2qonnx.convert(path)
    names = tuple(f"mid/block/{n}" for n in BLOCK) + DENSE_BLOCK
    _assert_exact(revived, onnx_model, names=names)
    _assert_exact(outer_models["deep"], onnx_model, names=names)


@pytest.fixture(scope="module")
def saved_nesting(tmp_path_factory):
    """A subclassed model holding a subclassed block, a Functional and a Sequential sub-model,
    and a Functional model holding a Sequential one, saved (SavedModel; .h5 for the latter)."""
    from qkeras import QActivation, QConv2D, QDense, quantized_bits, quantized_relu

    k = keras()
    holder = classes().Holder(name="holder")
    holder(np.zeros((1, *INPUT), np.float32))
    set_seeded_weights(holder, 16)
    inner = k.Sequential(
        [
            QConv2D(2, 3, kernel_quantizer=quantized_bits(6, 2, alpha=1), name="conv"),
            QActivation(quantized_relu(6, 2), name="relu"),
        ],
        name="inner",
    )
    inp = k.Input(INPUT)
    q6 = quantized_bits(6, 0, alpha=1)  # quantized weights: every sum exact in float32
    head = QDense(2, kernel_quantizer=q6, bias_quantizer=q6, name="d")
    outer = k.Model(inp, head(k.layers.Flatten()(inner(inp))), name="fs")
    set_seeded_weights(outer, 17)
    folder = tmp_path_factory.mktemp("saved_nesting")
    holder.save(folder / "holder")
    outer.save(folder / "fs")
    outer.save(folder / "fs.h5")
    return {"holder": holder, "fs": outer, "folder": folder}


def test_saved_subclassed_model_holding_subclassed_functional_and_sequential_models_matches(
    saved_nesting,
):
    import qkeras2qonnx
    from qkeras2qonnx.environment.load import load_model

    path = saved_nesting["folder"] / "holder"
    onnx_model = qkeras2qonnx.convert(path)
    names = (
        *(f"block/{n}" for n in BLOCK), "func/relu/activation_quantizer", "seq/fc/kernel_quantizer"
    )  # fmt: skip
    _assert_exact(load_model(path), onnx_model, names=names)
    _assert_exact(saved_nesting["holder"], onnx_model, names=names)


@pytest.mark.parametrize("file", ["fs", "fs.h5"])
def test_saved_functional_model_holding_a_sequential_model_matches_qkeras(saved_nesting, file):
    import qkeras2qonnx

    onnx_model = qkeras2qonnx.convert(saved_nesting["folder"] / file)
    names = (
        "inner/conv/kernel_quantizer", "inner/relu/activation_quantizer",
        "d/kernel_quantizer", "d/bias_quantizer",
    )  # fmt: skip
    _assert_exact(saved_nesting["fs"], onnx_model, names=names)


def test_saved_custom_layer_without_its_python_code_is_refused_naming_it(tmp_path):
    """A revived class holding no layers has only a traced function, not Keras's own code:
    refused by name, never cloned as if it were a plain Keras layer."""
    import qkeras2qonnx

    k = keras()
    inp = k.Input((4,))
    model = k.Model(inp, classes().Scale(name="half")(k.layers.Dense(2, name="d")(inp)))
    model.save(tmp_path / "scaled")
    with pytest.raises(ConversionError, match=r"half.*unsupported custom layer class Scale"):
        qkeras2qonnx.convert(tmp_path / "scaled")


def test_subclassed_block_called_twice_in_a_functional_model_is_refused_naming_its_layer(nested):
    """Shared weights: its layers would be called more than once, which no layer may be."""
    import qkeras2qonnx

    k = keras()
    a, b = k.Input(INPUT, name="a"), k.Input(INPUT, name="b")
    shared = k.Model([a, b], k.layers.Add()([nested.block(a), nested.block(b)]), name="shared")
    with pytest.raises(ConversionError, match="block/conv: .*called more than once"):
        qkeras2qonnx.convert(shared)
