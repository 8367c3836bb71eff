"""channels_last=True on Conv1D-family models: the rank-3 1-D form with each bias inside its
Conv (qkeras2qonnx.emit.conv1d_bias), on which qonnx 1.0's ConvertToChannelsLastAndClean returns
(a quantized bias as an Add after a rank-3 Conv made it loop forever), computing exactly what
QKeras computes."""

import signal
from contextlib import contextmanager

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from qkeras_helpers import keras, set_seeded_weights

from qkeras2qonnx.emit.conv1d_bias import fold_conv1d_bias
from qonnx_ingest.execute import execute_qonnx

CHANNELS_LAST = "qonnx.custom_op.channels_last"
STEP = 1 / 16  # inputs on this grid in [-2, 2): every sum below is exact in float32


@contextmanager
def deadline(seconds: int):
    """Raise TimeoutError in the main thread after ``seconds`` (qonnx's pass is pure Python)."""

    def expired(signum, frame):
        raise TimeoutError(f"did not finish in {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _qonnx_channels_last(model: onnx.ModelProto) -> onnx.ModelProto:
    """hls4ml's documented preparation: cleanup_model, then ConvertToChannelsLastAndClean."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean
    from qonnx.util.cleanup import cleanup_model

    with deadline(60):
        wrapper = cleanup_model(ModelWrapper(model))
        return wrapper.transform(ConvertToChannelsLastAndClean()).model


@pytest.fixture(scope="module")
def conv1d_models():
    """QConv1D (quantized bias, padding='same'), QActivation, MaxPooling1D, QSeparableConv1D
    (quantized bias), QConv1D, then Flatten -> QDense ('flat') or GlobalAveragePooling1D
    ('pooled'); and a 1-D residual block, conv -> conv added to its input ('residual')."""
    from qkeras import (
        QActivation,
        QConv1D,
        QDense,
        QSeparableConv1D,
        quantized_bits,
        quantized_relu,
    )

    k = keras()
    q6 = quantized_bits(6, 0, alpha=1)
    bias = quantized_bits(6, 2, alpha=1)
    inp = k.Input((16, 3), name="x")
    h = QConv1D(4, 3, padding="same", kernel_quantizer=q6, bias_quantizer=bias, name="c1")(inp)
    h = QActivation(quantized_relu(6, 2), name="a1")(h)
    h = k.layers.MaxPooling1D(2)(h)
    h = QSeparableConv1D(
        5,
        3,
        depthwise_quantizer=q6,
        pointwise_quantizer=q6,
        bias_quantizer=bias,
        activation=quantized_relu(6, 2),
        name="sep",
    )(h)
    h = QConv1D(3, 2, kernel_quantizer=q6, bias_quantizer=bias, name="c2")(h)
    h = QActivation(quantized_relu(6, 2), name="a2")(h)
    dense = QDense(2, kernel_quantizer=q6, bias_quantizer=bias, name="d")
    flat = k.Model(inp, dense(k.layers.Flatten()(h)))
    pooled = k.Model(inp, k.layers.GlobalAveragePooling1D()(h))
    r = QConv1D(3, 1, kernel_quantizer=q6, bias_quantizer=bias, name="r")(inp)
    r = QActivation(quantized_relu(6, 2), name="ra")(r)
    s = QConv1D(3, 3, padding="same", kernel_quantizer=q6, bias_quantizer=bias, name="s")(r)
    s = QActivation(quantized_relu(6, 2), name="sa")(s)
    residual = k.Model(inp, k.layers.Flatten()(k.layers.Add()([r, s])))
    for seed, model in enumerate((flat, pooled, residual), 11):
        set_seeded_weights(model, seed)
    return {"flat": flat, "pooled": pooled, "residual": residual}


@pytest.fixture(scope="module")
def converted(conv1d_models):
    import qkeras2qonnx

    return {
        name: qkeras2qonnx.convert(model, channels_last=True)
        for name, model in conv1d_models.items()
    }


@pytest.mark.keras
@pytest.mark.parametrize("name", ["flat", "pooled", "residual"])
def test_channels_last_conv1d_equals_qkeras_predict(conv1d_models, converted, name):
    model, ours = conv1d_models[name], converted[name]
    rng = np.random.default_rng(5)
    x = (rng.integers(-32, 32, (12, 16, 3)) * STEP).astype(np.float32)
    expected = model.predict(x, verbose=0)
    inp, out = ours.graph.input[0].name, ours.graph.output[0].name
    got = np.concatenate([execute_qonnx(ours, {inp: row[None]})[out] for row in x])
    np.testing.assert_array_equal(got, expected)


@pytest.mark.keras
@pytest.mark.parametrize("name", ["flat", "pooled"])
def test_channels_last_conv1d_is_rank3_with_bias_inside(converted, name):
    graph = converted[name].graph
    ops = [n.op_type for n in graph.node]
    producers = {o: n for n in graph.node for o in n.output}
    assert "Unsqueeze" not in ops, ops
    for squeeze in (n for n in graph.node if n.op_type == "Squeeze"):  # the pooled axis only
        assert producers[squeeze.input[0]].op_type == "GlobalAveragePool"
    convs = [n for n in graph.node if n.op_type in ("Conv", "MaxPool")]
    assert len(convs) == 5 and {n.domain for n in convs} == {CHANNELS_LAST}
    shapes = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in (*graph.input, *graph.value_info, *graph.output)
    }
    for node in convs:
        assert len(shapes[node.input[0]]) == 3, node.name
    # bias inside: c1, the separable conv's pointwise half (its depthwise half has none), c2
    assert [len(n.input) for n in convs if n.op_type == "Conv"] == [3, 2, 3, 3]
    assert "Add" not in ops  # every bias went into its Conv (or the Dense's Gemm)


@pytest.mark.keras
@pytest.mark.parametrize("name", ["flat", "pooled"])
def test_qonnx_channels_last_pass_finishes_on_our_output(converted, name):
    prepared = _qonnx_channels_last(converted[name])
    ops = [n.op_type for n in prepared.graph.node]
    assert "Unsqueeze" not in ops and "Conv" in ops


@pytest.mark.keras
def test_residual_conv1d_block_is_rank3_and_qonnx_finishes(converted):
    """tf2onnx's 2-D form of this block made qonnx's pass loop too (on the Add joining the
    two branches); the rank-3 form, biases inside, is converted."""
    ops = [n.op_type for n in converted["residual"].graph.node]
    assert "Unsqueeze" not in ops and "Squeeze" not in ops, ops
    prepared = _qonnx_channels_last(converted["residual"])
    assert {n.domain for n in prepared.graph.node if n.op_type == "Conv"} == {CHANNELS_LAST}


def _biased_conv() -> onnx.ModelProto:
    """x (1, 2, 8) -> 1-D Conv -> Add(Quant(bias (1, 3, 1))): a QConv1D's rank-3 form."""
    rng = np.random.default_rng(9)
    values = {
        "w": (rng.integers(-8, 8, (3, 2, 3)) / 8).astype(np.float32),
        "b": np.array([0.3, -0.7, 1.1], np.float32).reshape(1, 3, 1),
        "s": np.float32(0.25),
        "z": np.float32(0),
        "n": np.float32(4),
    }
    quant = helper.make_node(
        "Quant",
        ["b", "s", "z", "n"],
        ["bq"],
        domain="qonnx.custom_op.general",
        signed=1,
        narrow=0,
        rounding_mode="ROUND",
    )
    conv = dict(kernel_shape=[3], pads=[1, 1], strides=[1], dilations=[1], group=1)
    nodes = [quant, helper.make_node("Conv", ["x", "w"], ["c"], **conv)]
    nodes.append(helper.make_node("Add", ["c", "bq"], ["y"]))
    graph = helper.make_graph(
        nodes,
        "biased",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8])],
        [numpy_helper.from_array(v, k) for k, v in values.items()],
    )
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.infer_shapes import InferShapes

    model = ModelWrapper(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    return model.transform(InferShapes()).model


def test_quantized_bias_add_after_rank3_conv_is_where_qonnx_loops():
    """The minimal graph qonnx 1.0's pass never returns on (it takes 0.1 s once the bias is
    folded): MoveChanFirstDownstream moves the Conv's output Transpose (0, 2, 1) past the
    Add, puts its inverse, (0, 2, 1) again, on the Quant's output and moves that one next,
    one Transpose more per round. If this fails, qonnx fixed it."""
    model = _biased_conv()
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean

    with pytest.raises(TimeoutError), deadline(5):
        ModelWrapper(model).transform(ConvertToChannelsLastAndClean())


def test_folding_the_bias_into_the_conv_keeps_its_values_and_lets_qonnx_finish():
    model = _biased_conv()
    x = (np.random.default_rng(2).integers(-16, 16, (1, 2, 8)) / 8).astype(np.float32)
    expected = execute_qonnx(model, {"x": x})["y"]
    assert fold_conv1d_bias(model) == (model, True)  # the one Add gone, as checked below
    assert [n.op_type for n in model.graph.node] == ["Quant", "Conv"]
    conv = model.graph.node[1]
    assert list(conv.input)[2] == model.graph.node[0].output[0] and conv.output[0] == "y"
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.infer_shapes import InferShapes

    model = ModelWrapper(model).transform(InferShapes()).model
    np.testing.assert_array_equal(execute_qonnx(model, {"x": x})["y"], expected)
    last = _qonnx_channels_last(model)
    assert [n.domain for n in last.graph.node if n.op_type == "Conv"] == [CHANNELS_LAST]
