"""quantized_po2, quantized_relu_po2 and quantized_ulaw as activations: composites that look
QKeras's own float32 levels up (thresholds on |x| read from QKeras at conversion, no run-time
log), then a Quant that is the identity on every level. The converted model must give QKeras
predict's bits on inputs at and next to every power of two and log2 midpoint 2**(k + 0.5),
zero, negatives and values beyond max_value, both through qonnx's executor and through
onnxruntime with the Quant lowered to standard ops."""

import warnings

import numpy as np
import onnxruntime as ort
import pytest
from onnx import numpy_helper
from qkeras_helpers import float32_neighbours, keras, quant_nodes

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.execute import execute_qonnx
from qonnx_ingest.quant_lowering import lower_quants

pytestmark = pytest.mark.keras

F32 = np.float32
WIDTH = 512  # a multiple of 16: TensorFlow computes every element on its vectorised path


def _cases():
    from qkeras import quantized_po2, quantized_relu_po2, quantized_ulaw

    # name: (quantizer, Quant (bit width, signed) derived by hand from the exponent range)
    return {
        # bits 4: exponents -4..3 (one exponent sign bit): 2**-4..2**3, signed -> 3+4+2 bits
        "po2_4_round": (lambda: quantized_po2(4), (9, 1)),
        # max_value 4 > 1: exponents -8..7, but 4 rounds to 2**2: 2**-8..2**2 signed
        "po2_5_max_value_4": (lambda: quantized_po2(5, max_value=4), (12, 1)),
        "po2_4_floor": (lambda: quantized_po2(4, log2_rounding="floor"), (9, 1)),
        # even exponents 2 * (-8..6); below eps QKeras gives 2**-8, not 2**-16
        "po2_5_quadratic": (lambda: quantized_po2(5, quadratic_approximation=True), (30, 1)),
        # stochastic rounding only acts in training: predict rounds
        "po2_4_stochastic_at_inference": (
            lambda: quantized_po2(4, max_value=8, use_stochastic_rounding=True),
            (9, 1),
        ),
        # exponents -8..7, unsigned; negative inputs give 2**-8
        "relu_po2_4": (lambda: quantized_relu_po2(4), (16, 0)),
        # max_value 6 rounds to 2**3; below 0: -(|x| / 4) on the same exponents
        "relu_po2_5_max_value_slope": (
            lambda: quantized_relu_po2(5, max_value=6, negative_slope=0.25),
            (21, 1),
        ),
        "relu_po2_4_floor_slope": (
            lambda: quantized_relu_po2(4, log2_rounding="floor", negative_slope=0.5),
            (17, 1),
        ),
        # u-law levels are arbitrary float32 values: the grid of their smallest ulp
        "ulaw_8": (lambda: quantized_ulaw(8, 0), (27, 1)),
        "ulaw_4_2_symmetric_u15": (lambda: quantized_ulaw(4, 2, 1, u=15.0), (25, 1)),
    }


CASES = sorted(_cases())


def _inputs(seed: int) -> np.ndarray:
    """Powers of two, log2 midpoints 2**(k + 0.5) (rounded to float32), u-law rounding ties,
    their neighbours, zeros, eps, values beyond max_value, and seeded random values, as 8 rows.
    Nothing beyond 1e5: there QKeras's ``x + (q - x)`` cancels q (see ``exact_po2``)."""
    k = np.arange(-24, 12, dtype=np.float64)
    ties = np.arange(-16, 17) / 8 + 1 / 16  # hard-sigmoid u-law ties for m = 8 and m_i <= 4
    points = np.concatenate(
        [2**k, 2 ** (k + 0.5), -(2**k), -(2 ** (k + 0.5)), ties, 4 * ties, [0, 1e-7, -1e-7]]
    )
    rng = np.random.default_rng(seed)
    x = np.concatenate(
        [
            float32_neighbours(points),
            [0.0, -0.0, 6.0, 7.0, 100.0, -100.0, 1e4, -1e4],
            rng.uniform(-10, 10, 1024),
            rng.standard_normal(1024) * 1e-3,
        ]
    ).astype(F32)
    x = np.concatenate([x, np.zeros((-x.size) % (8 * WIDTH), F32)])[: 8 * WIDTH * 2]
    return x.reshape(-1, WIDTH)


def _model(quantizer):
    from qkeras import QActivation

    k = keras()
    inp = k.Input((WIDTH,), name="x")
    return k.Model(inp, QActivation(quantizer, name="qact")(inp))


def _ort(onnx_model, x):
    session = ort.InferenceSession(
        lower_quants(onnx_model).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return session.run(None, {"x": x})[0]


def _assert_bits(got, ref, x, what):
    bad = got.view(np.uint32) != ref.view(np.uint32)
    assert not bad.any(), (
        f"{what}: {bad.sum()} of {x.size} differ, e.g. x={x[bad][:4]} QKeras {ref[bad][:4]} "
        f"got {got[bad][:4]}"
    )


@pytest.fixture(scope="module")
def converted():
    import qkeras2qonnx

    made = {}
    for name in CASES:
        make, _ = _cases()[name]
        model = _model(make())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # po2: InexactAtTies, tested below
            made[name] = (model, qkeras2qonnx.convert(model))
    return made


@pytest.mark.parametrize("name", CASES)
def test_activation_matches_qkeras_predict_bit_for_bit(converted, name):
    model, onnx_model = converted[name]
    x = _inputs(seed=CASES.index(name))
    ref = model.predict(x, verbose=0)
    for batch in (1, 8):
        rows = slice(0, batch)
        got = execute_qonnx(onnx_model, {"x": x[rows]})[onnx_model.graph.output[0].name]
        _assert_bits(got, ref[rows], x[rows], "qonnx executor")
    _assert_bits(_ort(onnx_model, x), ref, x, "onnxruntime, Quant lowered")


@pytest.mark.parametrize("name", CASES)
def test_quant_carries_the_bit_width_of_the_level_grid(converted, name):
    _, onnx_model = converted[name]
    (node,) = quant_nodes(onnx_model)
    inits = {i.name: numpy_helper.to_array(i) for i in onnx_model.graph.initializer}
    width, signed = _cases()[name][1]
    assert float(inits[node.input[3]]) == width
    assert {a.name: a.i for a in node.attribute}["signed"] == signed
    ops = {n.op_type for n in onnx_model.graph.node}
    assert "Log" not in ops and "Gather" in ops  # levels looked up, no run-time log


def test_negative_inputs_of_relu_po2_give_its_smallest_level(converted):
    """quantized_relu_po2 without negative_slope maps every x < 0 to 2**min_exp (QKeras 0.9:
    relu gives 0 < eps, whose exponent is min_exp = -8 for 4 bits), not to 0."""
    model, onnx_model = converted["relu_po2_4"]
    x = np.zeros((1, WIDTH), F32)
    x[0, :4] = [-3.0, -1e-9, -0.0, 0.0]
    got = execute_qonnx(onnx_model, {"x": x})[onnx_model.graph.output[0].name]
    np.testing.assert_array_equal(got[0, :4], [2.0**-8] * 4)
    np.testing.assert_array_equal(model.predict(x, verbose=0)[0, :4], [2.0**-8] * 4)


def test_po2_warns_that_tf_log_is_position_dependent_next_to_thresholds():
    from qkeras import quantized_po2

    import qkeras2qonnx
    from qkeras2qonnx.qkeras_layers.exact_activations import InexactAtTies

    with pytest.warns(InexactAtTies, match="position in the tensor"):
        qkeras2qonnx.convert(_model(quantized_po2(4)))


def test_po2_grid_beyond_float32_is_refused_saying_why():
    """quantized_po2(8): levels 2**-64 (below eps) .. 2**63 need a 128-bit grid of step
    2**-64, which a float32 Quant cannot compute (|x| / scale overflows)."""
    from qkeras import quantized_po2

    import qkeras2qonnx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ConversionError, match=r"qact activation: quantized_po2\(8\).*128 bits"):
            qkeras2qonnx.convert(_model(quantized_po2(8)))


def test_qkeras3_po2_and_ulaw_activations_match_its_predict_bit_for_bit():
    """The same forms under qkeras-v3 (Keras 3), in a subprocess (qkeras3_po2_check.py)."""
    from qkeras3_support import run_qkeras3

    run_qkeras3("qkeras3_po2_check.py")


def test_as_dense_activations_match_qkeras_and_are_named_in_metadata():
    """QDense(activation=...) with a relu_po2 (its composite reads the layer's raw output:
    negatives give 2**min_exp) and a ulaw after it; the metadata names both forms."""
    import json

    from qkeras import QDense, quantized_bits
    from qkeras_helpers import assert_matches_qkeras, set_seeded_weights

    import qkeras2qonnx
    from qonnx_ingest.report import COMPOSITE_QUANTIZERS

    k = keras()
    inp = k.Input((10,), name="x")
    kernel = quantized_bits(6, 0, alpha=1)
    h = QDense(8, kernel_quantizer=kernel, activation="quantized_relu_po2(4,4)", name="a")(inp)
    h = QDense(8, kernel_quantizer=kernel, activation="quantized_ulaw(6,1)", name="b")(h)
    model = k.Model(inp, k.layers.Dense(3)(h))
    set_seeded_weights(model, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        onnx_model = qkeras2qonnx.convert(model)
    props = {p.key: p.value for p in onnx_model.metadata_props}
    forms = json.loads(props[COMPOSITE_QUANTIZERS])
    assert sorted(forms) == ["a/activation_quantizer", "b/activation_quantizer"]
    assert "relu po2" in forms["a/activation_quantizer"]
    assert "u-law" in forms["b/activation_quantizer"]
    # (qonnx's executor runs node by node: few calls keep this test short)
    assert_matches_qkeras(model, onnx_model, batch=1, samples=4)
    assert_matches_qkeras(model, onnx_model, batch=8)
