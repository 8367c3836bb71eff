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


def qseparable_conv2d():
    from qkeras import QSeparableConv2D, quantized_bits, quantized_relu

    k = keras()
    inp = k.Input((9, 9, 3), name="x")
    h = QSeparableConv2D(
        5,
        3,
        padding="same",
        depthwise_quantizer=quantized_bits(6, 0, alpha=1),
        pointwise_quantizer=quantized_bits(6, 0, alpha=1),
        bias_quantizer=quantized_bits(8, 3, alpha=1),
        activation=quantized_relu(6, 2),
        name="sep",
    )(inp)
    h = QSeparableConv2D(
        4,
        2,
        strides=2,
        depth_multiplier=2,
        depthwise_quantizer=quantized_bits(5, 1, alpha=1),
        pointwise_quantizer=quantized_bits(6, 0, alpha=1),
        use_bias=False,
        activation=quantized_relu(6, 2),
    )(h)
    return _finish(inp, k.layers.Flatten()(h), 25)


def qseparable_conv2d_auto_alpha():
    """Per-channel scales: on the depthwise kernel [kh, kw, C, M] QKeras's 'auto' scale is per
    depth multiplier (its last axis), on the pointwise kernel per output filter."""
    from qkeras import QActivation, QSeparableConv2D, quantized_bits, quantized_relu

    k = keras()
    inp = k.Input((9, 9, 3), name="x")
    h = QSeparableConv2D(
        6,
        3,
        strides=2,
        depth_multiplier=2,
        depthwise_quantizer=quantized_bits(6, 0, alpha="auto"),
        pointwise_quantizer=quantized_bits(6, 0, alpha="auto"),
        bias_quantizer=quantized_bits(8, 3, alpha=1),
        activation=quantized_relu(6, 2),
        name="sep",
    )(inp)
    h = QSeparableConv2D(
        4,
        2,
        padding="same",
        depthwise_quantizer=quantized_bits(5, 1, alpha="auto_po2"),
        pointwise_quantizer=quantized_bits(6, 0, alpha="auto_po2"),
        bias_quantizer=quantized_bits(8, 3, alpha=1),
    )(h)
    return _finish(inp, QActivation(quantized_bits(8, 3))(h), 26)


def qseparable_conv1d():
    from qkeras import QSeparableConv1D, quantized_bits, quantized_relu

    k = keras()
    inp = k.Input((16, 3), name="x")
    h = QSeparableConv1D(
        5,
        3,
        padding="same",
        depthwise_quantizer=quantized_bits(6, 0, alpha=1),
        pointwise_quantizer=quantized_bits(6, 0, alpha=1),
        bias_quantizer=quantized_bits(8, 3, alpha=1),
        activation=quantized_relu(6, 2),
        name="sep",
    )(inp)
    h = QSeparableConv1D(
        4,
        3,
        padding="valid",
        depth_multiplier=2,
        depthwise_quantizer=quantized_bits(5, 1, alpha=1),
        pointwise_quantizer=quantized_bits(6, 0, alpha=1),
        bias_quantizer=quantized_bits(8, 3, alpha=1),
        activation=quantized_relu(6, 2),
    )(h)
    return _finish(inp, k.layers.Flatten()(h), 27)


def qseparable_conv1d_auto_alpha():
    """QKeras quantizes QSeparableConv1D's kernels expanded to 2-D ([1, k, C, M] and
    [1, 1, C*M, F]): with ``scale_axis=2`` the depthwise scale is per *input* channel there,
    where the stored [k, C, M] kernel's axis 2 would be the depth multiplier."""
    from qkeras import QActivation, QSeparableConv1D, quantized_bits, quantized_relu

    k = keras()
    inp = k.Input((16, 3), name="x")
    h = QSeparableConv1D(
        6,
        3,
        strides=2,
        depth_multiplier=2,
        depthwise_quantizer=quantized_bits(6, 0, alpha="auto"),
        pointwise_quantizer=quantized_bits(6, 0, alpha="auto"),
        bias_quantizer=quantized_bits(8, 3, alpha=1),
        activation=quantized_relu(6, 2),
    )(inp)
    h = QSeparableConv1D(
        4,
        2,
        depth_multiplier=2,
        depthwise_quantizer=quantized_bits(6, 0, alpha="auto", scale_axis=2),
        pointwise_quantizer=quantized_bits(5, 1, alpha="auto_po2"),
        use_bias=False,
        name="sep_axis",
    )(h)
    out = QActivation(quantized_bits(8, 3))(k.layers.Flatten()(h))
    return _finish(inp, out, 28)


def qseparable_conv1d_po2():
    """A non-uniform kernel quantizer of QSeparableConv1D is applied in QKeras's expanded shape
    and written back in the stored one (a quantized constant, no node)."""
    from qkeras import QSeparableConv1D, quantized_bits, quantized_po2, quantized_relu

    k = keras()
    inp = k.Input((12, 3), name="x")
    h = QSeparableConv1D(
        4,
        3,
        depthwise_quantizer=quantized_po2(4),
        pointwise_quantizer=quantized_bits(6, 0, alpha="auto"),
        bias_quantizer=quantized_bits(8, 3, alpha=1),
        activation=quantized_relu(6, 2),
    )(inp)
    return _finish(inp, k.layers.Flatten()(h), 32)


def _transpose(padding, seed, **kwargs):
    from qkeras import QConv2DTranspose, quantized_bits, quantized_relu

    _restore_qkeras_conv2d_transpose()
    k = keras()
    inp = k.Input((5, 5, 3), name="x")
    h = QConv2DTranspose(
        4,
        3,
        strides=2,
        padding=padding,
        bias_quantizer=quantized_bits(8, 3, alpha=1),
        activation=quantized_relu(6, 2),
        name="deconv",
        **kwargs,
    )(inp)
    return _finish(inp, h, seed)


def qconv2d_transpose_same_stride2():
    from qkeras import quantized_bits

    return _transpose("same", 29, kernel_quantizer=quantized_bits(6, 0, alpha=1))


def qconv2d_transpose_valid_stride2():
    """QKeras drops ``output_padding`` (it passes None to Keras), so the conversion must too."""
    from qkeras import quantized_bits

    kernel = quantized_bits(5, 1, alpha=1)
    return _transpose("valid", 30, kernel_quantizer=kernel, output_padding=(1, 1))


def qconv2d_transpose_auto_alpha():
    """The Keras kernel is [kh, kw, out, in]: QKeras's 'auto' scale is per *input* channel."""
    from qkeras import quantized_bits

    return _transpose("same", 31, kernel_quantizer=quantized_bits(6, 0, alpha="auto"))


def _restore_qkeras_conv2d_transpose():
    """QKeras's QConv2DTranspose needs an alias TensorFlow 2.19 lacks; the converter's backend
    restores it (see ``backend``), and QKeras must have it before the model is built."""
    from qkeras2qonnx.backend import keras as converter_keras

    converter_keras()


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
    "qseparable_conv2d": qseparable_conv2d,
    "qseparable_conv2d_auto_alpha": qseparable_conv2d_auto_alpha,
    "qseparable_conv1d": qseparable_conv1d,
    "qseparable_conv1d_auto_alpha": qseparable_conv1d_auto_alpha,
    "qseparable_conv1d_po2": qseparable_conv1d_po2,
    "qconv2d_transpose_same_stride2": qconv2d_transpose_same_stride2,
    "qconv2d_transpose_valid_stride2": qconv2d_transpose_valid_stride2,
    "qconv2d_transpose_auto_alpha": qconv2d_transpose_auto_alpha,
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


def _qkeras_scale(layer, role, expand=False):
    """QKeras's own per-channel scale for ``role`` (in the Keras kernel's axes), as a Quant
    scale: quantized_bits(6, 0, alpha='auto') returns ``scale * z / 2**5``."""
    kernel = getattr(
        layer, "kernel" if role == "kernel_quantizer" else role.replace("quantizer", "kernel")
    )
    quantizer = getattr(layer, f"{role}_internal")
    quantizer(kernel[None] if expand else kernel)
    return np.asarray(quantizer.scale) / 2**5


def test_separable_and_transpose_weight_scales_follow_the_qkeras_axis():
    """Each per-channel scale lands where QKeras computed it: ConvTranspose weights are
    [in, out, kh, kw] and the Keras kernel [kh, kw, out, in] is scaled per *input* channel (axis
    0); a depthwise kernel [kh, kw, C, M] is scaled per depth multiplier, i.e. channel c*M + m
    of the grouped Conv weight [C*M, 1, kh, kw] repeats M scales; the pointwise kernel is
    scaled per output filter; QSeparableConv1D's scale_axis=2 counts axes of [1, k, C, M] (its
    ONNX weight is the 1-D [C*M, 1, k])."""
    from onnx import numpy_helper

    import qkeras2qonnx

    cases = {
        qconv2d_transpose_auto_alpha: [("deconv", "kernel_quantizer", lambda s: s, 3)],
        qseparable_conv2d_auto_alpha: [
            ("sep", "depthwise_quantizer", lambda s: np.tile(s, 3), 6),  # C=3, M=2
            ("sep", "pointwise_quantizer", lambda s: s, 6),
        ],
        qseparable_conv1d_auto_alpha: [
            ("sep_axis", "depthwise_quantizer", lambda s: np.repeat(s, 2), 12),  # C=6, M=2
        ],
    }
    for build, checks in cases.items():
        model = build()
        onnx_model = qkeras2qonnx.convert(model)
        inits = {t.name: numpy_helper.to_array(t) for t in onnx_model.graph.initializer}
        nodes = {n.name: n for n in quant_nodes(onnx_model)}
        for layer, role, to_onnx, channels in checks:
            scale = inits[nodes[f"{layer}/{role}"].input[1]]
            expand = build is qseparable_conv1d_auto_alpha
            # the 1-D separable conv's weights are rank 3 (qonnx_ingest.conv1d)
            shape = (channels, 1, 1) if expand else (channels, 1, 1, 1)
            assert scale.shape == shape, (layer, role, scale.shape)
            expected = to_onnx(_qkeras_scale(model.get_layer(layer), role, expand).ravel())
            assert len(np.unique(expected)) > 1
            np.testing.assert_allclose(scale.ravel(), expected, rtol=1e-6)
