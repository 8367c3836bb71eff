"""QSimpleRNN / QLSTM / QGRU unrolled over their static sequence length: exact against QKeras
0.9's predict, every quantizer (kernel, recurrent, bias, state on every step, activation and
recurrent activation on every step) a node of its own; what is not converted is refused by
name. (qkeras2qonnx restores the ``nest.is_sequence`` / ``array_ops.unstack`` names QKeras's
cells call, so they run on TensorFlow 2.19 at all.)"""

import json

import numpy as np
import pytest
from qkeras_helpers import assert_matches_qkeras, keras, quant_nodes

pytestmark = pytest.mark.keras

STEPS, FEATURES, UNITS = 5, 3, 4
# Quantizer applications per step (QKeras 0.9 qrecurrent.py): SimpleRNN quantizes the state
# and its output; LSTM its two states (c then h), the gates i, f, o and tanh of the candidate
# and of c; GRU its state, gates z and r, and the candidate.
PER_STEP = {
    "QSimpleRNN": {"state": 1, "recurrent_activation": 0, "activation": 1},
    "QLSTM": {"state": 2, "recurrent_activation": 3, "activation": 2},
    "QGRU": {"state": 1, "recurrent_activation": 2, "activation": 1},
}


def _build(layer_name: str, return_sequences: bool, implementation: int = 1, seed: int = 7):
    import qkeras

    from qkeras2qonnx.environment.backend import keras as backend_keras

    backend_keras()  # restores the names before QKeras's layers are called
    k = keras()
    weights = qkeras.quantized_bits(6, 1, alpha=1)
    extra = {}
    if layer_name != "QSimpleRNN":
        extra = {
            "recurrent_activation": qkeras.quantized_sigmoid(6),
            "implementation": implementation,
        }
    layer = getattr(qkeras, layer_name)(
        UNITS,
        kernel_quantizer=weights,
        recurrent_quantizer=weights,
        bias_quantizer=qkeras.quantized_bits(6, 1, alpha=1),
        state_quantizer=qkeras.quantized_bits(8, 1, alpha=1),
        activation=qkeras.quantized_tanh(6),
        return_sequences=return_sequences,
        name="rnn",
        **extra,
    )
    inp = k.Input((STEPS, FEATURES), name="x")
    model = k.Model(inp, layer(inp))
    rng = np.random.default_rng(seed)
    layer.set_weights(
        [rng.uniform(-1.5, 1.5, w.shape).astype(np.float32) for w in layer.get_weights()]
    )
    return model


CASES = [
    (name, seq, impl)
    for name in ("QSimpleRNN", "QLSTM", "QGRU")
    for seq in (False, True)
    for impl in ((1,) if name == "QSimpleRNN" else (1, 2))
]


@pytest.fixture(scope="module", params=CASES, ids=lambda c: f"{c[0]}-seq{int(c[1])}-impl{c[2]}")
def converted(request):
    import qkeras2qonnx

    name, seq, impl = request.param
    model = _build(name, seq, impl)
    return name, model, qkeras2qonnx.convert(model)


@pytest.mark.parametrize("batch", [1, 8])
def test_unrolled_cell_matches_qkeras(converted, batch):
    _, model, onnx_model = converted
    # inputs on a 1/64 grid: every sum before a quantizer is exact in float32
    assert_matches_qkeras(model, onnx_model, batch=batch, step=2**-6)


def test_every_quantizer_application_is_a_quant_node(converted):
    name, _, onnx_model = converted
    names = {n.name for n in quant_nodes(onnx_model)}
    weights = {f"rnn/{w}_quantizer" for w in ("kernel", "recurrent", "bias")}
    per_step = {
        f"rnn/{role}_quantizer/t{t}/{k}"
        for role, count in PER_STEP[name].items()
        for t in range(STEPS)
        for k in range(count)
    }
    assert names == weights | per_step
    props = {p.key: p.value for p in onnx_model.metadata_props}
    assert set(json.loads(props["qkeras2qonnx.quantizers"])) == names
    # quantized_tanh / quantized_sigmoid inside the cell take the composite form
    composite = json.loads(props["qonnx_ingest.composite_quantizers"])
    assert set(composite) == {n for n in per_step if "/state_quantizer/" not in n}
    assert not any(n.op_type in ("LSTM", "GRU", "RNN") for n in onnx_model.graph.node)


def test_output_shape_follows_return_sequences(converted):
    _, model, onnx_model = converted
    dims = onnx_model.graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in dims[1:]] == list(model.output_shape[1:])


def test_plain_activations_in_the_cell_match_qkeras():
    """QKeras's default hard_sigmoid gates (0.5 x + 0.5) and no state quantizer."""
    import qkeras

    import qkeras2qonnx
    from qkeras2qonnx.environment.backend import keras as backend_keras

    backend_keras()
    k = keras()
    q = qkeras.quantized_bits(6, 1, alpha=1)
    layer = qkeras.QLSTM(UNITS, kernel_quantizer=q, recurrent_quantizer=q, name="rnn")
    inp = k.Input((STEPS, FEATURES), name="x")
    model = k.Model(inp, layer(inp))
    onnx_model = qkeras2qonnx.convert(model)
    assert_matches_qkeras(model, onnx_model, batch=8, step=2**-6)
    # kernel, recurrent and quantized_tanh twice per step; no bias or state quantizer
    assert len(quant_nodes(onnx_model)) == 2 + 2 * STEPS


@pytest.mark.parametrize("name", ["QSimpleRNN", "QLSTM", "QGRU"])
def test_batch_size_leaves_no_symbolic_dim_and_qonnx_runs_it_without_shape_warnings(name):
    """The zero state is ConstantOfShape(Shape(x)[:1], units): with --batch-size folding makes
    it a [batch, units] constant, and every value_info after it must be static (FINN and
    hls4ml need static shapes; qonnx's executor warns "Output shapes disagree" on each node
    whose value_info is not)."""
    import warnings

    import qkeras2qonnx

    model = _build(name, return_sequences=True)
    onnx_model = qkeras2qonnx.convert(model, batch_size=3)
    graph = onnx_model.graph
    symbolic = [
        v.name
        for v in (*graph.input, *graph.value_info, *graph.output)
        if not all(d.HasField("dim_value") for d in v.type.tensor_type.shape.dim)
    ]
    assert symbolic == []
    assert len(graph.value_info) > 10 * STEPS  # the unrolled steps' tensors, all static
    assert [d.dim_value for d in graph.output[0].type.tensor_type.shape.dim] == [3, STEPS, UNITS]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert_matches_qkeras(model, onnx_model, batch=3, samples=3, step=2**-6)
    assert not [w for w in caught if "Output shapes disagree" in str(w.message)]
