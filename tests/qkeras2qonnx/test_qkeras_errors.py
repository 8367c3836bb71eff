"""Whatever cannot be converted exactly is refused with a ConversionError that names the layer
and the quantizer; nothing is dropped or approximated silently."""

import pytest
from qkeras_helpers import keras, set_seeded_weights

from qonnx_ingest.errors import ConversionError

pytestmark = pytest.mark.keras


def _model(layer_factory):
    k = keras()
    inp = k.Input((8,), name="x")
    out = layer_factory()(k.layers.Dense(8, name="pre")(inp))
    model = k.Model(inp, out)
    set_seeded_weights(model, 3)
    return model


def _qdense(**kwargs):
    from qkeras import QDense

    return lambda: QDense(4, name="culprit", **kwargs)


def _qact(activation):
    from qkeras import QActivation

    return lambda: QActivation(activation, name="culprit")


def _cases():
    from qkeras import (
        QBatchNormalization,
        binary,
        quantized_bits,
        quantized_po2,
        quantized_relu,
        ternary,
    )

    return {
        "po2_kernel": (_qdense(kernel_quantizer=quantized_po2(4)), "quantized_po2"),
        "ternary_kernel": (_qdense(kernel_quantizer=ternary()), "ternary"),
        "noise": (
            _qdense(kernel_quantizer=quantized_bits(6, 0, alpha=1, qnoise_factor=0.5)),
            "qnoise_factor",
        ),
        "binary_01_kernel": (_qdense(kernel_quantizer=binary(use_01=True)), "use_01"),
        "binary_01_activation": (_qact(binary(use_01=True)), "use_01"),
        "auto_activation": (_qact(quantized_bits(8, 0, alpha="auto")), "alpha='auto'"),
        "alpha_activation": (_qact(quantized_bits(8, 0, alpha=0.5)), "alpha"),
        "leaky_relu": (_qact(quantized_relu(4, 0, negative_slope=0.25)), "negative_slope"),
        "sigmoid_relu": (_qact(quantized_relu(4, 0, use_sigmoid=1)), "use_sigmoid"),
        "relu_bound": (
            _qact(quantized_relu(4, 2, relu_upper_bound=2.5, is_quantized_clip=False)),
            "relu_upper_bound",
        ),
        "tanh_activation": (_qact("quantized_tanh(4)"), "quantized_tanh"),
        "qkeras_function": (_qact("binary_tanh"), "binary_tanh"),
        "qbatchnorm_layer": (lambda: QBatchNormalization(name="culprit"), "QBatchNormalization"),
    }


CASES = [
    "po2_kernel",
    "ternary_kernel",
    "noise",
    "binary_01_kernel",
    "binary_01_activation",
    "auto_activation",
    "alpha_activation",
    "leaky_relu",
    "sigmoid_relu",
    "relu_bound",
    "tanh_activation",
    "qkeras_function",
    "qbatchnorm_layer",
]


def test_case_list_is_complete():
    assert sorted(CASES) == sorted(_cases())


@pytest.mark.parametrize("case", CASES)
def test_refused_naming_layer_and_quantizer(case):
    import qkeras2qonnx

    factory, what = _cases()[case]
    with pytest.raises(ConversionError) as info:
        qkeras2qonnx.convert(_model(factory))
    message = str(info.value)
    assert message.startswith("culprit"), message
    assert what in message, message
    assert info.value.exit_code == 1


def test_unsupported_quantizer_message_lists_what_is_supported():
    from qkeras import quantized_po2

    import qkeras2qonnx

    with pytest.raises(ConversionError, match="supported: binary, quantized_bits, quantized_relu"):
        qkeras2qonnx.convert(_model(_qdense(kernel_quantizer=quantized_po2(4))))


def test_custom_layer_is_refused():
    import qkeras2qonnx

    class Custom(keras().layers.Layer):
        def call(self, x):
            return x * 2.0

    with pytest.raises(ConversionError, match="culprit: unsupported custom layer class Custom"):
        qkeras2qonnx.convert(_model(lambda: Custom(name="culprit")))


def test_shared_quantized_layer_is_refused():
    from qkeras import QDense, quantized_bits

    import qkeras2qonnx

    k = keras()
    inp = k.Input((4,), name="x")
    shared = QDense(4, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="culprit")
    model = k.Model(inp, shared(shared(inp)))
    with pytest.raises(ConversionError, match="culprit: .*called more than once"):
        qkeras2qonnx.convert(model)
