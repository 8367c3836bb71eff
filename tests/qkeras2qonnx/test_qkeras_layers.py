"""One small model per layer family (and per graph shape that once lost quantizers): the QONNX
model computes what QKeras computes at batch 1 and 8, with one node per quantizer."""

import warnings

import numpy as np
import onnx
import pytest
from qkeras_helpers import (
    assert_matches_qkeras,
    count_non_uniform,
    count_quantizers,
    keras,
    quant_nodes,
    set_seeded_weights,
)

pytestmark = pytest.mark.keras


def _finish(inputs, outputs, seed):
    model = keras().Model(inputs, outputs)
    set_seeded_weights(model, seed)
    return model


def qdense():
    from qkeras import QDense, quantized_bits

    k = keras()
    inp = k.Input((10,), name="x")
    h = QDense(7, kernel_quantizer=quantized_bits(6, 0, alpha="auto"), use_bias=False)(inp)
    h = QDense(5, kernel_quantizer="quantized_bits(5,1,alpha=1)", activation="relu")(h)
    return _finish(inp, h, 11)


def qconv1d():
    from qkeras import QActivation, QConv1D, quantized_bits, quantized_relu

    k = keras()
    inp = k.Input((16, 3), name="x")
    h = QConv1D(
        4,
        3,
        padding="same",
        kernel_quantizer=quantized_bits(6, 0, alpha="auto"),
        bias_quantizer=quantized_bits(6, 2, alpha=1),
    )(inp)
    h = QActivation(quantized_relu(6, 2))(h)
    h = QConv1D(3, 2, strides=2, kernel_quantizer=quantized_bits(5, 1, alpha=1))(h)
    h = k.layers.GlobalAveragePooling1D()(h)
    return _finish(inp, k.layers.Dense(2)(h), 12)


def qconv2d():
    from qkeras import QConv2D, QDense, quantized_bits, quantized_relu

    k = keras()
    inp = k.Input((10, 10, 3), name="x")
    h = QConv2D(
        5,
        3,
        strides=2,
        padding="same",
        kernel_quantizer=quantized_bits(5, 1, alpha="auto_po2"),
        bias_quantizer=quantized_bits(8, 3, alpha=1),
        activation=quantized_relu(4, 1),
        name="conv",
    )(inp)
    h = k.layers.MaxPooling2D()(h)
    h = k.layers.Flatten()(h)
    out = QDense(4, kernel_quantizer=quantized_bits(6, 0, alpha=1))(h)
    return _finish(inp, out, 13)


def qdepthwise():
    from qkeras import QActivation, QDepthwiseConv2D, quantized_bits

    k = keras()
    inp = k.Input((9, 9, 4), name="x")
    h = QDepthwiseConv2D(
        3,
        depth_multiplier=2,
        depthwise_quantizer=quantized_bits(6, 0, alpha="auto"),
        bias_quantizer=quantized_bits(8, 3, alpha=1),
        name="dw",
    )(inp)
    h = QActivation(quantized_bits(8, 3))(h)
    h = QDepthwiseConv2D(2, padding="same", depthwise_quantizer=quantized_bits(4, 0, alpha=1))(h)
    h = k.layers.AveragePooling2D()(h)
    h = k.layers.Flatten()(h)
    return _finish(inp, k.layers.Dense(3)(h), 14)


def qconv2d_batchnorm():
    """QKeras folds the BN moving statistics into kernel and bias, then quantizes both."""
    from qkeras import QActivation, QConv2DBatchnorm, quantized_bits, quantized_relu

    k = keras()
    inp = k.Input((9, 9, 3), name="x")
    h = QConv2DBatchnorm(
        6,
        3,
        padding="same",
        kernel_quantizer=quantized_bits(6, 0, alpha=1),
        bias_quantizer=quantized_bits(8, 3, alpha=1),
        name="convbn",
    )(inp)
    h = QActivation(quantized_relu(6, 2))(h)
    h = QConv2DBatchnorm(
        4,
        2,
        strides=2,
        use_bias=False,
        kernel_quantizer=quantized_bits(5, 1, alpha="auto_po2"),
        bias_quantizer=quantized_bits(8, 3, alpha=1),
        activation=quantized_relu(5, 2),
        folding_mode="batch_stats_folding",
    )(h)
    h = k.layers.Flatten()(h)
    return _finish(inp, k.layers.Dense(3)(h), 21)


def qdepthwise_batchnorm():
    from qkeras import QActivation, QDepthwiseConv2DBatchnorm, quantized_bits

    k = keras()
    inp = k.Input((8, 8, 3), name="x")
    h = QDepthwiseConv2DBatchnorm(
        3,
        depth_multiplier=2,
        padding="same",
        depthwise_quantizer=quantized_bits(6, 1, alpha=1),
        bias_quantizer=quantized_bits(8, 3, alpha=1),
        name="dwbn",
    )(inp)
    h = QActivation(quantized_bits(8, 3))(h)
    h = QDepthwiseConv2DBatchnorm(
        2, use_bias=False, depthwise_quantizer=quantized_bits(6, 0, alpha="auto")
    )(h)
    # No float head: a long float dot product only adds accumulation-order noise.
    out = QActivation(quantized_bits(8, 3))(h)
    return _finish(inp, k.layers.Flatten()(out), 22)


def qbatchnorm():
    """QBatchNormalization after a Dense (2-D) and a conv (4-D): no quantizers (plain BN),
    uniform quantizers on all four parameters (Quant nodes), and QKeras's po2 defaults
    (quantized constants, warned about)."""
    from qkeras import QActivation, QBatchNormalization, QConv2D, QDense, quantized_bits

    k = keras()
    bits = quantized_bits(8, 2, alpha=1)
    inp = k.Input((6, 6, 2), name="x")
    h = QConv2D(4, 3, kernel_quantizer=quantized_bits(6, 0, alpha=1))(inp)
    h = QBatchNormalization(
        gamma_quantizer=bits,
        beta_quantizer=bits,
        mean_quantizer=bits,
        variance_quantizer=quantized_bits(8, 3, keep_negative=False, alpha=1),
        name="qbn_conv",
    )(h)
    h = QActivation(quantized_bits(8, 3))(h)
    h = k.layers.Flatten()(h)
    h = QDense(6, kernel_quantizer=quantized_bits(6, 0, alpha=1))(h)
    h = QBatchNormalization(
        gamma_quantizer=None, beta_quantizer=None, mean_quantizer=None, variance_quantizer=None
    )(h)
    h = QActivation(quantized_bits(8, 3))(h)
    h = QDense(5, kernel_quantizer=quantized_bits(6, 0, alpha=1))(h)
    h = QBatchNormalization(scale=False, name="qbn_po2")(h)
    return _finish(inp, QActivation(quantized_bits(8, 3))(h), 23)


def qpooling():
    """QAveragePooling2D / QGlobalAveragePooling2D: average, then the layer's quantizer; a
    2x2 average_quantizer that keeps 1/4 exact is folded."""
    from qkeras import (
        QActivation,
        QAveragePooling2D,
        QConv2D,
        QGlobalAveragePooling2D,
        quantized_bits,
        quantized_relu,
    )

    k = keras()
    inp = k.Input((8, 8, 3), name="x")
    h = QActivation(quantized_bits(8, 2))(inp)
    h = QConv2D(4, 3, padding="same", kernel_quantizer=quantized_bits(6, 0, alpha=1))(h)
    h = QAveragePooling2D(
        2, average_quantizer=quantized_bits(8, 0, alpha=1), activation=quantized_relu(6, 2)
    )(h)
    h = QAveragePooling2D(2, activation=quantized_bits(8, 2))(h)
    out = QGlobalAveragePooling2D(
        average_quantizer=quantized_bits(8, 0, alpha=1), activation=quantized_bits(8, 3)
    )(h)
    return _finish(inp, out, 24)


def linear_qactivations():
    """Identity activations between layers: where the old converter lost its quantizers."""
    from qkeras import QActivation, QDense, quantized_bits

    k = keras()
    inp = k.Input((8,), name="x")
    h = QActivation(quantized_bits(8, 2), name="input_quant")(inp)
    h = QDense(6, kernel_quantizer=quantized_bits(6, 0, alpha=1))(h)
    h = QActivation(quantized_bits(6, 2))(h)
    h = QDense(4, kernel_quantizer=quantized_bits(6, 0, alpha=1))(h)
    h = QActivation(quantized_bits(6, 1))(h)
    return _finish(inp, h, 15)


def plain_layers():
    from qkeras import QActivation, quantized_bits, quantized_relu

    k = keras()
    inp = k.Input((8, 8, 2), name="x")
    h = QActivation(quantized_bits(8, 3))(inp)
    h = k.layers.Conv2D(4, 3, padding="same")(h)
    h = k.layers.BatchNormalization()(h)
    h = k.layers.Activation("relu")(h)
    h = QActivation(quantized_relu(6, 2))(h)
    h = k.layers.Dropout(0.5)(h)
    h = k.layers.Reshape((16, 16))(h)
    h = k.layers.Dense(5)(h)
    h = k.layers.Flatten()(h)
    h = k.layers.Dense(4)(h)
    return _finish(inp, k.layers.Softmax()(h), 16)


def conv_then_batchnorm():
    """tf2onnx fuses Conv+BatchNormalization into the kernel; a quantized kernel must survive."""
    from qkeras import QActivation, QConv2D, quantized_bits, quantized_relu

    k = keras()
    inp = k.Input((8, 8, 3), name="x")
    h = QConv2D(4, 3, kernel_quantizer=quantized_bits(6, 0, alpha=1))(inp)
    h = k.layers.BatchNormalization()(h)
    h = QActivation(quantized_relu(6, 2))(h)
    h = k.layers.Flatten()(h)
    return _finish(inp, k.layers.Dense(3)(h), 17)


def sequential():
    from qkeras import QActivation, QDense, quantized_bits, quantized_relu

    k = keras()
    model = k.Sequential(
        [
            k.Input((6,), name="x"),
            QDense(8, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="fc1"),
            QActivation(quantized_relu(6, 1), name="relu1"),
            QDense(3, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="fc2"),
            k.layers.Activation("softmax"),
        ]
    )
    set_seeded_weights(model, 18)
    return model


def branches():
    """Two quantizers on one tensor (tf2onnx merges duplicate nodes), two inputs, two outputs."""
    from qkeras import QActivation, QDense, quantized_bits, quantized_relu

    k = keras()
    a = k.Input((6,), name="a")
    b = k.Input((4,), name="b")
    h = k.layers.Concatenate()([a, b])
    h = QDense(8, kernel_quantizer=quantized_bits(6, 0, alpha=1))(h)
    left = QActivation(quantized_relu(4, 1))(h)
    right = QActivation(quantized_bits(5, 1))(h)
    merged = k.layers.Add()([left, right])
    out1 = QDense(2, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="out1")(merged)
    out2 = k.layers.Dense(3, name="out2")(right)
    return _finish([a, b], [out1, out2], 19)


def nested():
    from qkeras import QActivation, QDense, quantized_bits, quantized_relu

    k = keras()
    inner = k.Sequential(
        [
            k.Input((5,)),
            QDense(6, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="inner_fc"),
            QActivation(quantized_relu(5, 1), name="inner_relu"),
        ],
        name="block",
    )
    inp = k.Input((5,), name="x")
    h = inner(inp)
    out = QDense(2, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="outer_fc")(h)
    return _finish(inp, out, 20)


FAMILIES = {
    "qdense": qdense,
    "qconv1d": qconv1d,
    "qconv2d": qconv2d,
    "qdepthwise": qdepthwise,
    "qconv2d_batchnorm": qconv2d_batchnorm,
    "qdepthwise_batchnorm": qdepthwise_batchnorm,
    "qbatchnorm": qbatchnorm,
    "qpooling": qpooling,
    "linear_qactivations": linear_qactivations,
    "plain_layers": plain_layers,
    "conv_then_batchnorm": conv_then_batchnorm,
    "sequential": sequential,
    "branches": branches,
    "nested": nested,
}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def converted(request):
    import qkeras2qonnx
    from qkeras2qonnx.quantizers import QuantizerAnnotationLost

    model = FAMILIES[request.param]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuantizerAnnotationLost)  # qbatchnorm's po2 defaults
        return request.param, model, qkeras2qonnx.convert(model)


@pytest.mark.parametrize("batch", [1, 8])
def test_matches_qkeras(converted, batch):
    _, model, onnx_model = converted
    assert_matches_qkeras(model, onnx_model, batch=batch)


def test_one_node_per_quantizer(converted):
    _, model, onnx_model = converted
    lost = count_non_uniform(model)
    assert len(quant_nodes(onnx_model)) == count_quantizers(model) - lost > 0


def test_passes_onnx_checker(converted):
    _, _, onnx_model = converted
    onnx.checker.check_model(onnx_model, full_check=True)


def test_no_markers_or_conv_batchnorm_fusion_left(converted):
    name, _, onnx_model = converted
    ops = [n.op_type for n in onnx_model.graph.node]
    assert "Clip" not in ops and "CheckNumerics" not in ops
    if name == "conv_then_batchnorm":
        assert "BatchNormalization" in ops


def test_conv_weight_scales_are_per_output_channel():
    """Conv weights are [O, I, kh, kw] in ONNX: a per-channel scale lies on axis 0; the
    depthwise kernel [kh, kw, C, M] becomes a grouped Conv weight [C*M, 1, kh, kw]."""
    from onnx import numpy_helper

    import qkeras2qonnx

    for build, node, channels in (
        (qconv2d, "conv/kernel_quantizer", 5),
        (qdepthwise, "dw/depthwise_quantizer", 8),
    ):
        onnx_model = qkeras2qonnx.convert(build())
        inits = {t.name: numpy_helper.to_array(t) for t in onnx_model.graph.initializer}
        kernel = next(n for n in quant_nodes(onnx_model) if n.name == node)
        scale = inits[kernel.input[1]]
        assert scale.shape == (channels, 1, 1, 1)
        assert len(np.unique(scale)) > 1
