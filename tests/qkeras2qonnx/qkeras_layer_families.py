"""The layer families of test_qkeras_layers, one builder each, in one table (``FAMILIES``):
the weight layers (qkeras_weight_layer_models) and the models here, batchnorm, pooling,
activations, plain Keras layers and the graph shapes that once lost quantizers (sequential,
branches, nested models)."""

from qkeras_helpers import keras, set_seeded_weights
from qkeras_weight_layer_models import (
    qconv1d,
    qconv2d,
    qconv2d_batchnorm,
    qconv2d_po2_stochastic_kernel,
    qconv2d_transpose_auto_alpha,
    qconv2d_transpose_same_stride2,
    qconv2d_transpose_valid_stride2,
    qdense,
    qdepthwise,
    qdepthwise_batchnorm,
    qseparable_conv1d,
    qseparable_conv1d_auto_alpha,
    qseparable_conv1d_po2,
    qseparable_conv2d,
    qseparable_conv2d_auto_alpha,
    seeded_model,
)


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
    return seeded_model(inp, QActivation(quantized_bits(8, 3))(h), 23)


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
    return seeded_model(inp, out, 24)


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
    return seeded_model(inp, h, 15)


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
    return seeded_model(inp, k.layers.Softmax()(h), 16)


def conv_then_batchnorm():
    """tf2onnx fuses Conv+BatchNormalization into the kernel; a quantized kernel must survive."""
    from qkeras import QActivation, QConv2D, quantized_bits, quantized_relu

    k = keras()
    inp = k.Input((8, 8, 3), name="x")
    h = QConv2D(4, 3, kernel_quantizer=quantized_bits(6, 0, alpha=1))(inp)
    h = k.layers.BatchNormalization()(h)
    h = QActivation(quantized_relu(6, 2))(h)
    h = k.layers.Flatten()(h)
    return seeded_model(inp, k.layers.Dense(3)(h), 17)


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
    return seeded_model([a, b], [out1, out2], 19)


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
    return seeded_model(inp, out, 20)


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
    "qconv2d_po2_stochastic_kernel": qconv2d_po2_stochastic_kernel,
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
