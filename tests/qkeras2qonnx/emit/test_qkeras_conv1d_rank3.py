"""Conv1D-family layers come out as ONNX's 1-D Conv / MaxPool / AveragePool on rank-3
tensors (qkeras2qonnx.emit.conv1d), not tf2onnx's Unsqueeze -> 2-D op -> Squeeze, and compute what
QKeras computes; chains that are not an exact 1-D form are left alone."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from qkeras_helpers import assert_matches_qkeras, keras, set_seeded_weights

from qkeras2qonnx.emit.conv1d import conv1d_as_rank3
from qonnx_ingest.quant import QUANT_OP_TYPES

SPATIAL = ("Conv", "MaxPool", "AveragePool")


@pytest.fixture(scope="module")
def conv1d_model():
    """QConv1D (per-channel alpha='auto' scales), MaxPooling1D, QSeparableConv1D (depth
    multiplier 2), plain Conv1D (dilated), DepthwiseConv1D, AveragePooling1D."""
    from qkeras import QActivation, QConv1D, QSeparableConv1D, quantized_bits, quantized_relu

    k = keras()
    inp = k.Input((40, 3), name="x")
    h = QConv1D(
        4,
        3,
        strides=2,
        padding="same",
        kernel_quantizer=quantized_bits(6, 0, alpha="auto"),
        bias_quantizer=quantized_bits(6, 2, alpha=1),
        name="conv",
    )(inp)
    h = QActivation(quantized_relu(6, 2))(h)
    h = k.layers.MaxPooling1D(2)(h)
    h = QSeparableConv1D(
        5,
        3,
        depth_multiplier=2,
        depthwise_quantizer=quantized_bits(6, 0, alpha=1),
        pointwise_quantizer=quantized_bits(6, 0, alpha=1),
        activation=quantized_relu(6, 2),
    )(h)
    h = k.layers.Conv1D(4, 2, dilation_rate=2)(h)
    h = k.layers.DepthwiseConv1D(3)(h)
    h = k.layers.AveragePooling1D(2)(h)
    model = k.Model(inp, k.layers.Dense(2)(k.layers.Flatten()(h)))
    set_seeded_weights(model, 41)
    return model


@pytest.fixture(scope="module")
def converted(conv1d_model):
    import qkeras2qonnx

    return qkeras2qonnx.convert(conv1d_model)


def _shapes(model: onnx.ModelProto) -> dict[str, list[int]]:
    infos = (*model.graph.input, *model.graph.value_info, *model.graph.output)
    return {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in infos}


def test_conv1d_layers_become_rank3_ops_with_1d_attributes(converted):
    graph = converted.graph
    ops = [n.op_type for n in graph.node]
    assert "Unsqueeze" not in ops and "Squeeze" not in ops, ops
    assert ops.count("Conv") == 5 and ops.count("MaxPool") == 1 and ops.count("AveragePool") == 1
    shapes = _shapes(converted)
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    producers = {o: n for n in graph.node for o in n.output}
    for node in (n for n in graph.node if n.op_type in SPATIAL):
        assert len(shapes[node.input[0]]) == 3 and len(shapes[node.output[0]]) == 3, node.name
        attrs = {a.name: list(a.ints) for a in node.attribute if a.ints}
        assert len(attrs["kernel_shape"]) == 1 and len(attrs["pads"]) == 2, (node.name, attrs)
        assert all(len(attrs[a]) == 1 for a in ("strides", "dilations") if a in attrs), attrs
        if node.op_type == "Conv":
            quant = producers.get(node.input[1])
            weight = inits[quant.input[0]] if quant is not None else inits[node.input[1]]
            assert weight.ndim == 3, (node.name, weight.shape)
    dilated = [n for n in graph.node if n.op_type == "Conv" and _attr(n, "dilations") == [2]]
    assert len(dilated) == 1
    kernel = next(
        n for n in graph.node if n.op_type in QUANT_OP_TYPES and n.name == "conv/kernel_quantizer"
    )
    assert inits[kernel.input[0]].shape == (4, 3, 3)
    scale = inits[kernel.input[1]]
    assert scale.shape == (4, 1, 1) and len(np.unique(scale)) > 1


def _attr(node, name):
    return next((list(a.ints) for a in node.attribute if a.name == name), None)


@pytest.mark.parametrize("batch", [1, 8])
def test_rank3_conv1d_matches_qkeras(conv1d_model, converted, batch):
    assert_matches_qkeras(conv1d_model, converted, batch=batch, samples=16, step=1 / 64)


def _chain_model(*, pads=(0, 0, 0, 0), strides=(1, 1)) -> onnx.ModelProto:
    """NWC x -> Unsqueeze(1) -> Transpose to NCHW -> Conv over (1, W) -> Transpose to NHWC
    -> Squeeze(1): tf2onnx's Conv1D form with both transposes."""
    rng = np.random.default_rng(3)
    weight = rng.normal(size=(2, 3, 3 if pads[0] else 1, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Unsqueeze", ["x", "ax"], ["u"]),
        helper.make_node("Transpose", ["u"], ["t"], perm=[0, 3, 1, 2]),
        helper.make_node(
            "Conv",
            ["t", "w"],
            ["c"],
            kernel_shape=list(weight.shape[2:]),
            pads=list(pads),
            strides=list(strides),
        ),  # fmt: skip
        helper.make_node("Transpose", ["c"], ["b"], perm=[0, 2, 3, 1]),
        helper.make_node("Squeeze", ["b", "ax"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 9, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(np.array([1]), "ax")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return onnx.shape_inference.infer_shapes(model)


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def test_transposed_chain_becomes_transpose_conv1d_transpose_with_equal_output():
    model = _chain_model()
    x = np.random.default_rng(4).normal(size=(2, 9, 3)).astype(np.float32)
    expected = _run(model, x)  # onnxruntime on tf2onnx's 2-D form
    assert conv1d_as_rank3(model) == (model, True)
    assert [n.op_type for n in model.graph.node] == ["Transpose", "Conv", "Transpose"]
    assert [_attr(n, "perm") for n in model.graph.node if n.op_type == "Transpose"] == [
        [0, 2, 1],
        [0, 2, 1],
    ]
    onnx.checker.check_model(onnx.shape_inference.infer_shapes(model), full_check=True)
    np.testing.assert_allclose(_run(model, x), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "form", [{"pads": (1, 0, 1, 0)}, {"strides": (2, 1)}], ids=["padded_axis", "strided_axis"]
)
def test_chain_acting_on_the_size1_axis_is_left_alone(form):
    model = _chain_model(**form)
    before = model.SerializeToString()
    assert conv1d_as_rank3(model) == (model, False)
    assert model.SerializeToString() == before


def test_reshape_moving_the_size1_axis_counts_as_its_transpose():
    """tf2onnx writes a transpose that only moves the size-1 axis as a Reshape: NCW x ->
    Unsqueeze(1) -> Reshape (N, 1, C, W) -> (N, C, W, 1) -> MaxPool (2, 1) -> Squeeze(3)."""
    nodes = [
        helper.make_node("Unsqueeze", ["x", "one"], ["u"]),
        helper.make_node("Reshape", ["u", "shape"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 1], strides=[2, 1]),
        helper.make_node("Squeeze", ["p", "three"], ["y"]),
    ]
    constants = {"one": [1], "three": [3], "shape": [-1, 4, 6, 1]}
    graph = helper.make_graph(
        nodes,
        "reshaped",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(v), k) for k, v in constants.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model = onnx.shape_inference.infer_shapes(model)
    x = np.random.default_rng(5).normal(size=(2, 4, 6)).astype(np.float32)
    expected = _run(model, x)
    assert conv1d_as_rank3(model) == (model, True)
    assert [n.op_type for n in model.graph.node] == ["MaxPool"]
    assert _attr(model.graph.node[0], "kernel_shape") == [2]
    np.testing.assert_allclose(_run(model, x), expected, rtol=0, atol=0)
