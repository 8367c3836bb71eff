"""Bidirectional (QBidirectional and Keras's own) around QSimpleRNN / QLSTM / QGRU (QGRU also
with reset_after=True), and a single recurrent layer with go_backwards: both cells unrolled,
merged as Keras merges them (concat, sum, mul, ave; sequences flipped back into time order),
exact against QKeras 0.9 with every quantizer of both directions a node of its own. One model
holds every case."""

import json

import numpy as np
import pytest
from qkeras_helpers import assert_matches_qkeras, keras, quant_nodes

from qonnx_ingest.errors import ConversionError

pytestmark = pytest.mark.keras

STEPS, FEATURES, UNITS = 2, 2, 2
PER_STEP = {  # quantizer applications per step (QKeras 0.9 qrecurrent.py)
    "QSimpleRNN": {"state": 1, "activation": 1},
    "QLSTM": {"state": 2, "recurrent_activation": 3, "activation": 2},
    "QGRU": {"state": 1, "recurrent_activation": 2, "activation": 1},
}
# (wrapper, recurrent layer, implementation, merge_mode, return_sequences, extra arguments):
# every merge mode both ways on the small QSimpleRNN, QLSTM and QGRU once each
BRANCHES = [
    ("QBidirectional", "QSimpleRNN", 1, "concat", True, {}),
    ("QBidirectional", "QSimpleRNN", 1, "sum", False, {}),
    ("Bidirectional", "QSimpleRNN", 1, "ave", True, {}),
    ("QBidirectional", "QSimpleRNN", 1, "mul", False, {}),
    ("QBidirectional", "QLSTM", 2, "mul", True, {}),
    ("Bidirectional", "QGRU", 1, "concat", False, {"reset_after": True}),
    ("QBidirectional", "QGRU", 2, "ave", True, {"reset_after": True}),
]


def _recurrent(kind, implementation, return_sequences, **kwargs):
    import qkeras

    extra = {}
    if kind != "QSimpleRNN":
        extra = {
            "recurrent_activation": qkeras.quantized_bits(6, 0, alpha=1),
            "implementation": implementation,
        }
    return getattr(qkeras, kind)(
        UNITS,
        kernel_quantizer=qkeras.quantized_bits(6, 1, alpha=1),
        recurrent_quantizer=qkeras.quantized_bits(6, 1, alpha=1),
        bias_quantizer=qkeras.quantized_bits(6, 1, alpha=1),
        state_quantizer=qkeras.quantized_bits(8, 1, alpha=1),
        activation=qkeras.quantized_bits(6, 1, alpha=1),
        return_sequences=return_sequences,
        **extra,
        **kwargs,
    )


@pytest.fixture(scope="module")
def converted():
    import qkeras2qonnx

    model = _model()
    return model, qkeras2qonnx.convert(model)


def _model():
    import qkeras

    from qkeras2qonnx.environment.backend import keras as backend_keras

    backend_keras()  # restores the names QKeras's cells call before they run
    k = keras()
    inp = k.Input((STEPS, FEATURES), name="x")
    outputs = []
    for i, (wrapper, kind, impl, merge, seq, extra) in enumerate(BRANCHES):
        cls = qkeras.QBidirectional if wrapper == "QBidirectional" else k.layers.Bidirectional
        inner = _recurrent(kind, impl, seq, **extra)
        outputs.append(cls(inner, merge_mode=merge, name=f"bi{i}")(inp))
    backwards = _recurrent("QSimpleRNN", 1, True, go_backwards=True, name="back")
    outputs.append(backwards(inp))
    model = k.Model(inp, outputs)
    rng = np.random.default_rng(11)
    for layer in model.layers[1:]:
        layer.set_weights(
            [rng.uniform(-1.5, 1.5, w.shape).astype(np.float32) for w in layer.get_weights()]
        )
    return model


def test_bidirectional_and_go_backwards_match_qkeras_at_batch_1(converted):
    """qonnx's executor (one node at a time, so one sample on this ~600-node graph)."""
    model, onnx_model = converted
    # inputs on a 1/64 grid: every sum before a quantizer is exact in float32
    assert_matches_qkeras(model, onnx_model, batch=1, samples=1, step=2**-6)


def test_bidirectional_and_go_backwards_match_qkeras_at_batch_8(converted):
    """32 samples through onnxruntime on the Quant nodes' standard-op form (--verify's runner)."""
    from qonnx_ingest.verification import run_converted

    model, onnx_model = converted
    rng = np.random.default_rng(3)
    xs = [np.round(rng.uniform(-2, 2, (8, STEPS, FEATURES)) * 64) / 64 for _ in range(4)]
    xs = [x.astype(np.float32) for x in xs]
    got, runner = run_converted(onnx_model, [{"x": x} for x in xs])
    assert runner.startswith("onnxruntime")
    for x, outputs in zip(xs, got, strict=True):
        ref = model(x, training=False)
        for r, out in zip(ref, onnx_model.graph.output, strict=True):
            r = np.asarray(r)
            np.testing.assert_allclose(outputs[out.name], r, rtol=1e-6, atol=1e-6 * np.abs(r).max())


def _expected_nodes(path: str, kind: str) -> set[str]:
    weights = {f"{path}/{w}_quantizer" for w in ("kernel", "recurrent", "bias")}
    return weights | {
        f"{path}/{role}_quantizer/t{t}/{k}"
        for role, count in PER_STEP[kind].items()
        for t in range(STEPS)
        for k in range(count)
    }


def test_every_quantizer_of_both_directions_is_a_quant_node(converted):
    model, onnx_model = converted
    expected = _expected_nodes("back", "QSimpleRNN")
    for i, (_, kind, *_rest) in enumerate(BRANCHES):
        for direction in ("forward", "backward"):
            expected |= _expected_nodes(f"bi{i}/{direction}", kind)
    names = {n.name for n in quant_nodes(onnx_model)}
    assert names == expected
    props = {p.key: p.value for p in onnx_model.metadata_props}
    assert set(json.loads(props["qkeras2qonnx.quantizers"])) == names
    assert not any(n.op_type in ("LSTM", "GRU", "RNN") for n in onnx_model.graph.node)


def test_merged_output_shapes_follow_merge_mode_and_return_sequences(converted):
    model, onnx_model = converted
    for out, keras_out in zip(onnx_model.graph.output, model.outputs, strict=True):
        dims = [d.dim_value for d in out.type.tensor_type.shape.dim[1:]]
        assert dims == list(keras_out.shape[1:])


def test_bidirectional_without_merge_is_refused_by_name():
    import qkeras

    import qkeras2qonnx
    from qkeras2qonnx.environment.backend import keras as backend_keras

    backend_keras()
    k = keras()
    inner = qkeras.QLSTM(3, kernel_quantizer=qkeras.quantized_bits(6, 0, alpha=1))
    inp = k.Input((STEPS, FEATURES), name="x")
    out = qkeras.QBidirectional(inner, merge_mode=None, name="bi")(inp)
    with pytest.raises(ConversionError, match="^bi: Bidirectional with merge_mode=None"):
        qkeras2qonnx.convert(k.Model(inp, out))
