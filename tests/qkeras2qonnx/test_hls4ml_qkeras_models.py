"""Every model hls4ml's own QKeras tests build (hls4ml ``test/pytest/test_qkeras.py``, 41 models
across its test functions: the jet tagger it loads, 40 it builds) converts exactly, passes
onnx.checker and matches QKeras (all 41 convert; none computes a wrong number).

The models are rebuilt here layer for layer (same layers, quantizers, initializers, shapes;
seeded instead of hls4ml's unseeded initializers) and fed hls4ml's inputs: ``np.random.rand``
values, rounded to 2**-10 where hls4ml rounds them (``ap_fixed<16,6>``), negated for the
negative-slope ReLUs, quantized to 8 bits for the separable convolutions, hls4ml's linspace
sequence for the recurrent layers. Each model is compared with QKeras at batch 1 and 8 within
1e-6 relative, and the one-input activation models on all 1000 of hls4ml's inputs at once.
hls4ml's jet-tagging data (``fetch_openml``) is not available offline: the jet tagger gets
standardized-looking normal features instead.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from qkeras_helpers import CORPUS, keras

from qonnx_ingest.execute import execute_qonnx
from support import requires_corpus

pytestmark = pytest.mark.keras

Q8 = "quantized_bits(8, 0, alpha=1)"


def _dense_act(alpha):
    def build(q, k):
        return k.Sequential(
            [
                q.QDense(
                    16,
                    input_shape=(16,),
                    name="fc1",
                    kernel_quantizer=q.quantized_bits(4, 0, alpha=alpha),
                    bias_quantizer=q.quantized_bits(4, 0, alpha=1),
                    kernel_initializer="lecun_uniform",
                ),
                q.QActivation(activation=q.quantized_relu(4, 0), name="relu1"),
            ]
        )

    return build


def _activation(make):
    """hls4ml's one-input QActivation models (test_quantizer, _special, _relu_negative_slope)."""

    def build(q, k):
        return k.Sequential([q.QActivation(make(q), input_shape=(1,), name="quantizer")])

    return build


def _btnn(kernel, activation, batchnorm):
    """test_btnn: QDense(10) [-> BatchNormalization] -> QActivation."""

    def build(q, k):
        layers = [
            q.QDense(
                10,
                input_shape=(10,),
                kernel_quantizer=kernel(q),
                bias_quantizer=q.quantized_bits(5, 2),
                name="dense",
            )
        ]
        if batchnorm:
            layers.append(k.layers.BatchNormalization(name="bn"))
        layers.append(q.QActivation(activation=activation(q)))
        return k.Sequential(layers)

    return build


def _kwarg(weights, activation):
    """test_qactivation_kwarg: QDense with the activation quantizer as its activation."""

    def build(q, k):
        x = k.layers.Input(shape=(10,))
        y = q.QDense(
            10,
            activation=activation,
            name="qdense",
            kernel_quantizer=weights,
            bias_quantizer=weights,
            kernel_initializer="lecun_uniform",
        )(x)
        return k.Model(x, y)

    return build


def _parsing(q, k):
    """test_quantizer_parsing: no weight quantizers at all, a quantized_relu activation."""
    return k.Sequential(
        [
            q.QDense(
                8,
                input_shape=(10,),
                kernel_quantizer=None,
                kernel_initializer="ones",
                bias_quantizer=None,
                bias_initializer="zeros",
                activation="quantized_relu(8, 0)",
            )
        ]
    )


def _qconv2dbn(q, k):
    return k.Sequential(
        [
            q.QConv2DBatchnorm(
                4,
                kernel_size=(3, 3),
                input_shape=(8, 8, 1),
                kernel_quantizer=Q8,
                kernel_initializer="ones",
                bias_quantizer=Q8,
                bias_initializer="zeros",
                activation="quantized_relu(8, 0)",
            )
        ]
    )


def _qdepthwise(q, k):
    return k.Sequential(
        [
            q.QDepthwiseConv2D(
                kernel_size=(3, 3),
                input_shape=(32, 32, 3),
                depthwise_quantizer="quantized_bits(6, 0, alpha=1)",
                bias_quantizer="quantized_bits(4, 0, alpha=1)",
                bias_initializer="he_normal",
                activation="quantized_relu(3, 0)",
            )
        ]
    )


def _po2(q, k):
    """test_quantised_po2_bit_width: an 18-bit po2 kernel set to large random values."""
    model = k.Sequential(
        [
            q.QDense(
                6,
                input_shape=(26,),
                name="dense",
                kernel_quantizer=q.quantized_po2(18, max_value=2**20),
            )
        ]
    )
    weights = model.layers[0].get_weights()
    weights[0] = 2**18 * np.random.default_rng(26).random((26, 6))
    model.layers[0].set_weights(weights)
    return model


def _recurrent(layer, bits, **kwargs):
    def build(q, k):
        quantizer = f"quantized_bits({bits}, 0, alpha=1)"
        roles = ("kernel", "recurrent", "bias", "state")
        quantizers = {f"{role}_quantizer": quantizer for role in roles}
        cell = getattr(q, layer)(4, input_shape=(5, 2), **quantizers, **kwargs)
        return k.Sequential([cell])

    return build


def _separable(layer, shape):
    def build(q, k):
        x = k.layers.Input(shape, name="input_layer")
        w = q.quantized_bits(8, 3, alpha=1)
        y = getattr(q, layer)(
            5,
            3,
            depthwise_quantizer=w,
            pointwise_quantizer=w,
            bias_quantizer=w,
            name="qsepconv_1",
        )(x)
        return k.Model(x, y)

    return build


def _jet_tagger(q, k):
    from qkeras2qonnx.environment.load import load_model

    return load_model(CORPUS / "qkeras_3layer.json", weights=CORPUS / "qkeras_3layer_weights.h5")


_RNN = {"activation": "tanh", "recurrent_activation": "sigmoid"}

# name: (builder, input recipe); the names say which hls4ml test builds the model.
MODELS = {
    "accuracy-jet_tagger": (_jet_tagger, "normal"),
    "single_dense_activation_exact-alpha1": (_dense_act(1), "rand"),
    "single_dense_activation_exact-auto_po2": (_dense_act("auto_po2"), "rand"),
    "quantizer_special-tanh8": (_activation(lambda q: q.quantized_tanh(8)), "fixed"),
    "quantizer_special-sigmoid5": (_activation(lambda q: q.quantized_sigmoid(5)), "fixed"),
    "quantizer_special-real_sigmoid7": (
        _activation(lambda q: q.quantized_sigmoid(7, use_real_sigmoid=True)),
        "fixed",
    ),
    "btnn-1": (_btnn(lambda q: q.ternary(alpha=1), lambda q: "binary_tanh", False), "rand"),
    "btnn-2": (_btnn(lambda q: q.binary(), lambda q: "binary_tanh", False), "rand"),
    "btnn-3": (_btnn(lambda q: q.ternary(alpha="auto"), lambda q: q.binary(), True), "rand"),
    "btnn-4": (_btnn(lambda q: q.ternary(alpha="auto"), lambda q: "ternary", True), "rand"),
    "btnn-5": (
        _btnn(lambda q: q.ternary(alpha="auto"), lambda q: q.ternary(threshold=0.2), True),
        "rand",
    ),
    "btnn-6": (
        _btnn(lambda q: q.ternary(alpha="auto"), lambda q: q.ternary(threshold=0.8), True),
        "rand",
    ),
    "btnn-7": (_btnn(lambda q: q.binary(), lambda q: q.binary(), False), "rand"),
    **{
        f"quantizer-{kind}{'_'.join(map(str, args))}": (
            _activation(lambda q, kind=kind, args=args: getattr(q, f"quantized_{kind}")(*args)),
            "fixed",
        )
        for kind, args in [
            ("bits", (8, 0)),
            ("bits", (8, 4)),
            ("bits", (4, 2)),
            ("bits", (4, 0)),
            ("bits", (10, 0)),
            ("relu", (4,)),
            ("relu", (4, 2)),
            ("relu", (8,)),
            ("relu", (8, 4)),
            ("relu", (10,)),
            ("relu", (10, 5)),
        ]
    },
    **{
        f"relu_negative_slope-{bits}_{integer}_{slope}": (
            _activation(
                lambda q, b=bits, i=integer, s=slope: q.quantized_relu(b, i, negative_slope=s)
            ),
            "negative",
        )
        for bits, integer, slope in [(4, 0, 0.5), (8, 4, 1.0), (10, 2, 0.25)]
    },
    "qactivation_kwarg-binary": (_kwarg("binary", "binary"), "fixed"),
    "qactivation_kwarg-ternary": (_kwarg("ternary", "ternary"), "fixed"),
    **{
        f"qactivation_kwarg-relu{bits}": (
            _kwarg("quantized_bits(4, 0, alpha=1)", f"quantized_relu({bits}, 0)"),
            "fixed",
        )
        for bits in (2, 4, 8)
    },
    "quantizer_parsing": (_parsing, "fixed"),
    "qconv2dbn": (_qconv2dbn, "fixed"),
    "qdepthwiseconv2d": (_qdepthwise, "fixed"),
    "quantised_po2_bit_width": (_po2, "rand"),
    "qsimplernn": (_recurrent("QSimpleRNN", 16, activation="relu"), "sequence"),
    "qlstm": (_recurrent("QLSTM", 8, **_RNN), "sequence"),
    # reset_after='False' as hls4ml writes it: a non-empty string, so Keras's reset_after form
    "qgru": (_recurrent("QGRU", 8, **_RNN, reset_after="False"), "sequence"),
    "qseparableconv1d": (_separable("QSeparableConv1D", (13, 20)), "q8"),
    "qseparableconv2d": (_separable("QSeparableConv2D", (13, 21, 20)), "q8"),
}

# What the converter refuses, and the reason it gives (qkeras2qonnx/qkeras_recurrent/recurrent.py).


def _inputs(recipe: str, shape: tuple[int, ...], batch: int, seed: int) -> np.ndarray:
    """A batch drawn as hls4ml's test draws it (seeded)."""
    rng = np.random.default_rng(seed)
    if recipe == "sequence":  # hls4ml's one sequence, then seeded ones in its range
        x = np.linspace(-0.5, 0.5, 5)
        first = np.stack([x, x], axis=1)[None]
        more = np.round(rng.uniform(-0.5, 0.5, (batch - 1, *shape)) * 2**10) * 2**-10
        return np.concatenate([first, more]).astype(np.float32)
    x = rng.random((batch, *shape))
    if recipe == "normal":
        x = rng.standard_normal((batch, *shape))
    elif recipe in ("fixed", "negative"):
        x = np.round(x * 2**10) * 2**-10 * (-1 if recipe == "negative" else 1)
    elif recipe == "q8":  # quantized_bits(8, 0, alpha=1) on [0, 1)
        x = np.minimum(np.round(x * 2**7), 2**7 - 1) * 2**-7
    return x.astype(np.float32)


@pytest.mark.parametrize("name", list(MODELS))
def test_hls4ml_test_model_converts_exactly(name):
    import qkeras

    from qkeras2qonnx import convert
    from qkeras2qonnx.environment.backend import keras as backend_keras

    backend_keras()  # restores the TensorFlow names QKeras's recurrent cells call
    if name.startswith("accuracy") and not CORPUS.is_dir():
        pytest.skip(requires_corpus.kwargs["reason"])
    build, recipe = MODELS[name]
    k = keras()
    k.utils.set_random_seed(sorted(MODELS).index(name))
    model = build(qkeras, k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        converted = convert(model)
    onnx.checker.check_model(converted)
    shape = tuple(model.inputs[0].shape[1:])
    batches = (1, 8, 1000) if shape == (1,) else (1, 8)  # 1000: all of hls4ml's inputs
    for batch in batches:
        x = _inputs(recipe, shape, batch, seed=batch)
        expected = np.asarray(model(x, training=False))
        got = execute_qonnx(converted, {converted.graph.input[0].name: x})
        got = got[converted.graph.output[0].name]
        assert got.shape == expected.shape
        atol = 1e-6 * max(1.0, float(np.abs(expected).max()))
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=atol, err_msg=f"batch {batch}")


def test_all_41_models_of_hls4ml_tests_are_listed():
    """hls4ml's test_qkeras.py builds 41 models; none is left out of the test above."""
    assert len(MODELS) == 41
