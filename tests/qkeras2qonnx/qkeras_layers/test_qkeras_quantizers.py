"""One small model per supported quantizer variant: the QONNX model must compute what QKeras
computes, at batch 1 and at batch 8, with one QONNX node per quantizer."""

import numpy as np
import pytest
from qkeras_helpers import (
    assert_matches_qkeras,
    count_quantizers,
    keras,
    quant_nodes,
    set_seeded_weights,
)

pytestmark = pytest.mark.keras


def dense_model(kernel=None, bias=None, activation=None, qact=None, seed=1):
    """Input -> QDense(kernel, bias, activation) [-> QActivation(qact)] -> float Dense head."""
    from qkeras import QActivation, QDense

    k = keras()
    inp = k.Input((12,), name="x")
    h = QDense(
        6, kernel_quantizer=kernel, bias_quantizer=bias, activation=activation, name="qdense"
    )(inp)
    if qact is not None:
        h = QActivation(qact, name="qact")(h)
    out = k.layers.Dense(3, name="head")(h)
    model = k.Model(inp, out)
    set_seeded_weights(model, seed)
    return model


def _zero_unit(model):
    """An all-zero output unit: QKeras's 'auto' scale for it is 0 (not a valid QONNX scale)."""
    layer = model.get_layer("qdense")
    kernel, bias = layer.get_weights()
    kernel[:, 2] = 0.0
    layer.set_weights([kernel, bias])
    return model


def _cases():
    from qkeras import (
        binary,
        quantized_bits,
        quantized_relu,
        stochastic_binary,
        stochastic_ternary,
        ternary,
    )

    return {
        # QDense turns a kernel quantizer's alpha=None into alpha='auto_po2' (QKeras 0.9).
        "bits_alpha_none": lambda: dense_model(quantized_bits(6, 0), quantized_bits(6, 0)),
        "bits_alpha_1_integer": lambda: dense_model(
            quantized_bits(8, 2, alpha=1), quantized_bits(8, 3, alpha=1)
        ),
        "bits_unsigned": lambda: dense_model(quantized_bits(4, 0, keep_negative=False, alpha=1)),
        "bits_symmetric": lambda: dense_model(quantized_bits(4, 0, symmetric=1, alpha=1)),
        "bits_alpha_float": lambda: dense_model(quantized_bits(5, 0, alpha=0.75)),
        "bits_alpha_array": lambda: dense_model(
            quantized_bits(5, 1, alpha=np.linspace(0.5, 2.0, 6).astype(np.float32))
        ),
        "bits_auto": lambda: dense_model(quantized_bits(6, 0, alpha="auto")),
        "bits_auto_po2": lambda: dense_model(quantized_bits(4, 1, alpha="auto_po2")),
        "bits_auto_zero_channel": lambda: _zero_unit(
            dense_model(quantized_bits(6, 0, alpha="auto"))
        ),
        "bits_1bit": lambda: dense_model(quantized_bits(1, 0, alpha=1)),
        "bits_activation_signed": lambda: dense_model(qact=quantized_bits(6, 2, symmetric=1)),
        "bits_activation_unsigned": lambda: dense_model(
            qact=quantized_bits(5, 1, keep_negative=False)
        ),
        "bits_activation_string": lambda: dense_model(qact="quantized_bits(8,2)"),
        "relu": lambda: dense_model(qact=quantized_relu(4, 1)),
        "relu_string": lambda: dense_model(qact="quantized_relu(6)"),
        "relu_in_layer": lambda: dense_model(
            quantized_bits(6, 0, alpha=1), activation="quantized_relu(3,1)"
        ),
        "relu_upper_bound_3bit": lambda: dense_model(
            qact=quantized_relu(4, 2, relu_upper_bound=1.75, is_quantized_clip=False)
        ),
        "relu_upper_bound_narrow": lambda: dense_model(
            qact=quantized_relu(4, 2, relu_upper_bound=3.5, is_quantized_clip=False)
        ),
        "relu_upper_bound_ignored": lambda: dense_model(
            qact=quantized_relu(4, 2, relu_upper_bound=1.0)
        ),
        "binary_kernel": lambda: dense_model(binary()),
        "binary_kernel_alpha": lambda: dense_model(binary(alpha=0.5)),
        "binary_kernel_auto": lambda: dense_model(binary(alpha="auto")),
        "binary_activation": lambda: dense_model(qact="binary"),
        "binary_activation_alpha": lambda: dense_model(qact=binary(alpha=2.0)),
        "binary_kernel_auto_po2": lambda: dense_model(binary(alpha="auto_po2")),
        "binary_kernel_01": lambda: dense_model(binary(use_01=True, alpha=0.5)),
        "binary_kernel_01_auto": lambda: dense_model(binary(use_01=True, alpha="auto")),
        "stochastic_binary_kernel": lambda: dense_model(stochastic_binary(alpha="auto_po2")),
        "stochastic_binary_activation": lambda: dense_model(qact=stochastic_binary(alpha=1.0)),
        "stochastic_ternary_kernel": lambda: dense_model(stochastic_ternary(alpha="auto_po2")),
        # QDense turns ternary's alpha=None into 'auto_po2', like quantized_bits.
        "ternary_kernel": lambda: dense_model(ternary()),
        "ternary_kernel_auto": lambda: dense_model(ternary(alpha="auto")),
        "ternary_kernel_alpha": lambda: dense_model(
            ternary(alpha=0.5, threshold=0.2), quantized_bits(8, 3, alpha=1)
        ),
    }


# Names only, so that collecting this module does not import TensorFlow.
CASES = [
    "bits_alpha_none",
    "bits_alpha_1_integer",
    "bits_unsigned",
    "bits_symmetric",
    "bits_alpha_float",
    "bits_alpha_array",
    "bits_auto",
    "bits_auto_po2",
    "bits_auto_zero_channel",
    "bits_1bit",
    "bits_activation_signed",
    "bits_activation_unsigned",
    "bits_activation_string",
    "relu",
    "relu_string",
    "relu_in_layer",
    "relu_upper_bound_3bit",
    "relu_upper_bound_narrow",
    "relu_upper_bound_ignored",
    "binary_kernel",
    "binary_kernel_alpha",
    "binary_kernel_auto",
    "binary_activation",
    "binary_activation_alpha",
    "binary_kernel_auto_po2",
    "binary_kernel_01",
    "binary_kernel_01_auto",
    "stochastic_binary_kernel",
    "stochastic_binary_activation",
    "stochastic_ternary_kernel",
    "ternary_kernel",
    "ternary_kernel_auto",
    "ternary_kernel_alpha",
]


@pytest.fixture(scope="module", params=CASES)
def converted(request):
    import qkeras2qonnx

    model = _cases()[request.param]()
    return model, qkeras2qonnx.convert(model)


def test_case_list_is_complete():
    assert sorted(CASES) == sorted(_cases())


@pytest.mark.parametrize("batch", [1, 8])
def test_matches_qkeras(converted, batch):
    model, onnx_model = converted
    assert_matches_qkeras(model, onnx_model, batch=batch)


def test_one_node_per_quantizer(converted):
    model, onnx_model = converted
    assert len(quant_nodes(onnx_model)) == count_quantizers(model) > 0


def test_auto_scales_are_per_channel():
    """alpha='auto' gives one scale per output unit, on axis 1 of the MatMul weight [in, out]."""
    from onnx import numpy_helper

    import qkeras2qonnx

    model = _cases()["bits_auto"]()
    onnx_model = qkeras2qonnx.convert(model)
    (node,) = quant_nodes(onnx_model)
    inits = {t.name: numpy_helper.to_array(t) for t in onnx_model.graph.initializer}
    scale = inits[node.input[1]]
    assert scale.shape == (1, 6)
    assert len(np.unique(scale)) == 6


def test_alpha_none_kernel_really_is_auto_po2():
    """The QKeras subtlety the converter must follow: QDense rewrites the kernel quantizer."""
    model = _cases()["bits_alpha_none"]()
    layer = model.get_layer("qdense")
    assert layer.kernel_quantizer_internal.alpha == "auto_po2"
    assert layer.bias_quantizer_internal.alpha is None


@pytest.mark.parametrize(
    "kernel,bias",
    [("quantized_po2(4,1)", "quantized_po2(4,8)"), ("quantized_ulaw(6,0)", None)],
)
def test_non_uniform_weights_become_constants_with_a_loud_warning(kernel, bias):
    """No QONNX node can express a po2/ulaw grid: QKeras's quantized weights are written as
    constants (still exact) and each lost annotation is warned about and listed in metadata."""
    import json

    import qkeras2qonnx
    from qkeras2qonnx.qkeras_layers.quantizers import QuantizerAnnotationLost

    model = dense_model(kernel, bias, qact="quantized_relu(6,2)", seed=5)
    with pytest.warns(QuantizerAnnotationLost) as record:
        onnx_model = qkeras2qonnx.convert(model)
    lost = [str(w.message) for w in record if w.category is QuantizerAnnotationLost]
    assert len(lost) == 1 + (bias is not None)
    assert lost[0].startswith(f"qdense kernel_quantizer {kernel.split(',')[0]}")
    assert len(quant_nodes(onnx_model)) == 1  # the relu
    props = {p.key: p.value for p in onnx_model.metadata_props}
    assert set(json.loads(props["qkeras2qonnx.lost_quantizers"])) >= {"qdense kernel_quantizer"}
    for batch in (1, 8):
        assert_matches_qkeras(model, onnx_model, batch=batch)


def test_ternary_weight_is_a_2bit_narrow_quant():
    """ternary(alpha=0.5) on a weight: Quant(2-bit signed narrow, scale 0.5) of {-.5, 0, .5}."""
    from onnx import numpy_helper

    import qkeras2qonnx

    model = _cases()["ternary_kernel_alpha"]()
    onnx_model = qkeras2qonnx.convert(model)
    node = next(n for n in quant_nodes(onnx_model) if n.name == "qdense/kernel_quantizer")
    inits = {t.name: numpy_helper.to_array(t) for t in onnx_model.graph.initializer}
    assert float(inits[node.input[1]]) == 0.5
    assert float(inits[node.input[3]]) == 2.0
    assert dict((a.name, a.i) for a in node.attribute if a.name != "rounding_mode") == {
        "signed": 1,
        "narrow": 1,
    }
    kernel = model.get_layer("qdense").get_weights()[0]
    fed = inits[node.input[0]]  # MatMul weight [in, out]
    expected = 0.5 * (np.abs(kernel) >= 0.2) * np.sign(kernel)
    np.testing.assert_array_equal(fed, expected)
