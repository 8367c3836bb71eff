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
        binary,
        quantized_bits,
        quantized_hswish,
        quantized_po2,
        quantized_relu,
        quantized_relu_po2,
        quantized_ulaw,
        ternary,
    )

    return {
        # (converted exactly since: quantized_tanh/sigmoid/hswish, ternary and leaky relu
        # activations, binary_tanh, see test_qkeras_activations; QKeras's float functions such
        # as smooth_tanh, see test_qkeras_sweep_regressions)
        "ternary_auto_activation": (_qact(ternary(alpha="auto")), "alpha='auto'"),
        "hswish_auto_activation": (_qact(quantized_hswish(6, 2, alpha="auto")), "alpha='auto'"),
        "leaky_sigmoid_relu": (
            _qact(quantized_relu(4, 0, use_sigmoid=1, negative_slope=0.5)),
            "use_sigmoid",
        ),
        # (po2, relu_po2 and ulaw activations convert since: test_qkeras_po2_activations)
        "po2_grid_beyond_float32": (_qact(quantized_po2(8)), "needs 128 bits"),
        "relu_po2_noise": (_qact(quantized_relu_po2(4, qnoise_factor=0.5)), "qnoise_factor"),
        "ulaw_one_bit": (_qact(quantized_ulaw(1)), "1-bit"),
        "noise": (
            _qdense(kernel_quantizer=quantized_bits(6, 0, alpha=1, qnoise_factor=0.5)),
            "qnoise_factor",
        ),
        "binary_01_auto_activation": (_qact(binary(use_01=True, alpha="auto")), "alpha='auto'"),
        "auto_activation": (_qact(quantized_bits(8, 0, alpha="auto")), "alpha='auto'"),
        "alpha_activation": (_qact(quantized_bits(8, 0, alpha=0.5)), "alpha"),
        "relu_bound": (
            _qact(quantized_relu(4, 2, relu_upper_bound=2.5, is_quantized_clip=False)),
            "relu_upper_bound",
        ),
    }


CASES = [
    "ternary_auto_activation",
    "hswish_auto_activation",
    "leaky_sigmoid_relu",
    "po2_grid_beyond_float32",
    "relu_po2_noise",
    "ulaw_one_bit",
    "noise",
    "binary_01_auto_activation",
    "auto_activation",
    "alpha_activation",
    "relu_bound",
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
    from qkeras.quantizers import BaseQuantizer

    import qkeras2qonnx

    class own_quantizer(BaseQuantizer):  # a user's own quantizer: no grid to read
        bits = 8

        def __call__(self, x):
            return x

        def max(self):  # QKeras's layers ask for it
            return 1.0

        def min(self):
            return -1.0

        def get_config(self):
            return {"bits": 8}

    with pytest.raises(
        ConversionError, match=r"culprit kernel_quantizer: .*own_quantizer.*supported: "
    ):
        qkeras2qonnx.convert(_model(_qdense(kernel_quantizer=own_quantizer())))


def test_bernoulli_is_refused_saying_it_is_random_at_inference():
    from qkeras import bernoulli

    import qkeras2qonnx

    with pytest.raises(ConversionError, match=r"culprit kernel_quantizer: bernoulli.*random"):
        qkeras2qonnx.convert(_model(_qdense(kernel_quantizer=bernoulli())))


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


def test_qbidirectional_around_a_plain_lstm_is_refused_by_name():
    """Bidirectional converts around QSimpleRNN / QLSTM / QGRU (test_qkeras_bidirectional);
    QBidirectional around anything else is refused."""
    import qkeras

    from qkeras2qonnx.environment.backend import keras
    from qkeras2qonnx.layers import rule_for_layer

    rnn = qkeras.QBidirectional(keras().layers.LSTM(3), name="culprit")
    rnn.build((None, 4, 2))
    with pytest.raises(ConversionError, match="^culprit: Bidirectional around LSTM"):
        rule_for_layer(rnn, "culprit")(rnn, "culprit")


def test_qlstm_with_stateful_option_is_refused_naming_the_layer():
    from qkeras import QLSTM, quantized_bits

    import qkeras2qonnx

    k = keras()
    inp = k.Input((4, 2), name="x")
    q = quantized_bits(6, 0, alpha=1)
    out = QLSTM(3, kernel_quantizer=q, return_state=True, name="culprit")(inp)[0]
    with pytest.raises(ConversionError, match="^culprit: QLSTM with return_state=True"):
        qkeras2qonnx.convert(k.Model(inp, out))


def test_average_quantizer_that_rescales_is_refused():
    """Pool area 9: QKeras multiplies the average by 9 * q(1/9) != 1."""
    from qkeras import QAveragePooling2D, quantized_bits

    import qkeras2qonnx

    k = keras()
    inp = k.Input((6, 6, 2), name="x")
    pool = QAveragePooling2D(3, average_quantizer=quantized_bits(8, 0, alpha=1), name="culprit")
    with pytest.raises(ConversionError, match="^culprit average_quantizer: quantized_bits"):
        qkeras2qonnx.convert(k.Model(inp, pool(inp)))


def test_exact_average_quantizer_is_recorded_as_folded():
    import json

    from qkeras import QAveragePooling2D, quantized_bits

    import qkeras2qonnx

    k = keras()
    inp = k.Input((4, 4, 2), name="x")
    pool = QAveragePooling2D(2, average_quantizer=quantized_bits(8, 0, alpha=1), name="pool")
    onnx_model = qkeras2qonnx.convert(k.Model(inp, pool(inp)))
    props = {p.key: p.value for p in onnx_model.metadata_props}
    assert list(json.loads(props["qkeras2qonnx.folded_quantizers"])) == ["pool average_quantizer"]


@pytest.mark.parametrize("role", ["depthwise_quantizer", "pointwise_quantizer"])
def test_separable_kernel_refusal_names_layer_and_quantizer(role):
    from qkeras import QSeparableConv2D, quantized_bits

    import qkeras2qonnx

    k = keras()
    inp = k.Input((6, 6, 2), name="x")
    quantizers = {
        "depthwise_quantizer": quantized_bits(6, 0, alpha=1),
        "pointwise_quantizer": quantized_bits(6, 0, alpha=1),
        role: "bernoulli()",
    }
    out = QSeparableConv2D(3, 3, name="culprit", **quantizers)(inp)
    with pytest.raises(ConversionError, match=f"^culprit {role}: bernoulli.*random"):
        qkeras2qonnx.convert(k.Model(inp, out))


def test_unsupported_qkeras_layer_is_refused_by_name():
    from qkeras import QAdaptiveActivation

    import qkeras2qonnx

    layer = lambda: QAdaptiveActivation("quantized_bits", 8, name="culprit")  # noqa: E731
    with pytest.raises(
        ConversionError, match="^culprit: unsupported QKeras layer QAdaptiveActivation"
    ):
        qkeras2qonnx.convert(_model(layer))
