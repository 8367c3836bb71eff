"""One small QKeras model per weight-layer family for test_qkeras_layers: dense, conv (1-D,
2-D), depthwise, separable (1-D, 2-D, 'auto' and po2 scales), transpose, and the QKeras layers
that fold batchnorm into a conv; seeded weights."""

from qkeras_helpers import keras, set_seeded_weights


def seeded_model(inputs, outputs, seed):
    model = keras().Model(inputs, outputs)
    set_seeded_weights(model, seed)
    return model


def qdense():
    from qkeras import QDense, quantized_bits

    k = keras()
    inp = k.Input((10,), name="x")
    h = QDense(7, kernel_quantizer=quantized_bits(6, 0, alpha="auto"), use_bias=False)(inp)
    h = QDense(5, kernel_quantizer="quantized_bits(5,1,alpha=1)", activation="relu")(h)
    return seeded_model(inp, h, 11)


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
    return seeded_model(inp, k.layers.Dense(2)(h), 12)


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
    return seeded_model(inp, out, 13)


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
    return seeded_model(inp, k.layers.Dense(3)(h), 14)


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
    return seeded_model(inp, k.layers.Flatten()(h), 25)


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
    return seeded_model(inp, QActivation(quantized_bits(8, 3))(h), 26)


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
    return seeded_model(inp, k.layers.Flatten()(h), 27)


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
    return seeded_model(inp, out, 28)


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
    return seeded_model(inp, k.layers.Flatten()(h), 32)


def qconv2d_po2_stochastic_kernel():
    """google/qkeras examples/example_mnist_po2.py's last convolution: a quantized_po2 kernel
    with stochastic rounding, which acts only in training (a quantized constant, no node)."""
    from qkeras import QConv2D, quantized_po2, quantized_relu_po2

    k = keras()
    inp = k.Input((6, 6, 2), name="x")
    h = QConv2D(
        3,
        3,
        kernel_quantizer=quantized_po2(4, 1, use_stochastic_rounding=True),
        bias_quantizer=quantized_po2(4, 1),
        activation=quantized_relu_po2(4, 4, use_stochastic_rounding=True),
        name="conv",
    )(inp)
    return seeded_model(inp, k.layers.Flatten()(h), 33)


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
    return seeded_model(inp, h, seed)


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
    from qkeras2qonnx.environment.backend import keras as converter_keras

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
    return seeded_model(inp, k.layers.Dense(3)(h), 21)


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
    return seeded_model(inp, k.layers.Flatten()(out), 22)
