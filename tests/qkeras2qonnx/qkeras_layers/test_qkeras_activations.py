"""Activation quantizers that take the composite form (exact standard ONNX ops, then a Quant that
is the identity on the result's grid): the converted model must compute what QKeras's predict
computes, on inputs built by hand to sit on every rounding tie and threshold (and their float32
neighbours) plus seeded random inputs, at batch 1 and 8."""

import json
import warnings

import numpy as np
import pytest
from qkeras_helpers import (
    assert_matches_qkeras,
    float32_neighbours,
    keras,
    quant_nodes,
    set_seeded_weights,
)

from qonnx_ingest.execute import execute_qonnx

pytestmark = pytest.mark.keras

F32 = np.float32


def _hard_sigmoid_ties(m: float) -> list[float]:
    """x where (0.5 x + 0.5) * m = k + 0.5: quantized_sigmoid's rounding ties."""
    return [(2 * k + 1) / m - 1 for k in range(int(m))]


def _hard_tanh_ties(m: float) -> list[float]:
    """x where (2 hard_sigmoid(x) - 1) * m = k + 0.5: quantized_tanh's rounding ties."""
    return [(k + 0.5) / m for k in range(-int(m), int(m))]


def _relu_ties(bits: int, integer: int, slope: float) -> list[float]:
    """The ties of both grids of quantized_relu(bits, integer, negative_slope=slope)."""
    m, m_i = 2.0 ** (bits - 1), 2.0**integer
    pos = [(k + 0.5) * m_i / m for k in range(int(m) + 1)]
    neg = [-(k + 0.5) * m_i / (m * slope) for k in range(int(slope * m) + 2)]
    return pos + neg


_TINY = [0.0, -0.0, 2.0**-24, -(2.0**-24), 2.0**-25, -(2.0**-25), 1e-7, -1e-7]


def _cases():
    from qkeras import quantized_hswish, quantized_relu, quantized_sigmoid, quantized_tanh, ternary

    return {
        "sigmoid_2": (lambda: quantized_sigmoid(2), _hard_sigmoid_ties(4)),
        "sigmoid_4_symmetric": (
            lambda: quantized_sigmoid(4, symmetric=True),
            _hard_sigmoid_ties(16),
        ),
        "sigmoid_8": (lambda: quantized_sigmoid(8), _hard_sigmoid_ties(256)),
        # symmetric is a step count, not a flag: the floor is 6/2**16 (neutdet w16's output)
        "sigmoid_16_symmetric_6": (
            lambda: quantized_sigmoid(16, symmetric=6),
            _hard_sigmoid_ties(2**16)[:16] + _hard_sigmoid_ties(2**16)[-4:],
        ),
        "tanh_3": (lambda: quantized_tanh(3), _hard_tanh_ties(4)),
        "tanh_4_symmetric": (lambda: quantized_tanh(4, symmetric=True), _hard_tanh_ties(8)),
        "tanh_8": (lambda: quantized_tanh(8), _hard_tanh_ties(128)),
        "tanh_5_symmetric_3": (lambda: quantized_tanh(5, symmetric=3), _hard_tanh_ties(16)),
        "hswish_6_2": (lambda: quantized_hswish(6, 2), np.linspace(-4, 7, 4001)),
        "hswish_8_3_symmetric": (lambda: quantized_hswish(8, 3, symmetric=1), [-3, -1.5, 0, 3]),
        "ternary_default": (lambda: ternary(), [0.33, -0.33, *_TINY]),
        "ternary_threshold": (lambda: ternary(threshold=0.8), [0.8, -0.8, *_TINY]),
        "ternary_alpha_threshold": (lambda: ternary(alpha=0.5, threshold=0.2), [0.2, -0.2]),
        "relu_negative_slope": (
            lambda: quantized_relu(4, 0, negative_slope=0.25),
            _relu_ties(4, 0, 0.25),
        ),
        "relu_negative_slope_integer": (
            lambda: quantized_relu(4, 2, negative_slope=0.5),
            _relu_ties(4, 2, 0.5),
        ),
        "relu_negative_slope_below_step": (
            lambda: quantized_relu(3, 0, negative_slope=1 / 16),
            _relu_ties(3, 0, 1 / 16),
        ),
        # m_i clip(2 round(hard_sigmoid(x / m_i) * 16) / 16 - 1, ...), m_i = 2: ties below
        "relu_use_sigmoid": (
            lambda: quantized_relu(4, 1, use_sigmoid=1),
            [2 * (2 * (k + 0.5) / 16 - 1) for k in range(16)],
        ),
        # 1 bit: the grid {0, 2**(integer - 1)}, ties (0.5 steps) rounded to even, i.e. to 0
        # (google/qkeras examples/example_mnist_b2t.py's input quantizer)
        "relu_1bit": (lambda: quantized_relu(1, 1), [0.5, 1.0, 1.5, -0.5, *_TINY]),
        "relu_1bit_integer0": (lambda: quantized_relu(1, 0), [0.25, 0.5, 0.75]),
        "relu_1bit_integer2": (lambda: quantized_relu(1, 2), [1.0, 2.0, 3.0]),
        "binary_tanh": (lambda: "binary_tanh", _TINY),
        "binary_sigmoid": (lambda: "binary_sigmoid", _TINY),
        "binary": (lambda: "binary()", _TINY),
        "binary_01": (lambda: "binary(use_01=True)", _TINY),
        "binary_01_alpha": (lambda: "binary(use_01=True, alpha=0.5)", _TINY),
    }


CASES = sorted(_cases())


def _activation_model(quantizer, width: int):
    from qkeras import QActivation

    k = keras()
    inp = k.Input((width,), name="x")
    return k.Model(inp, QActivation(quantizer, name="qact")(inp))


def _inputs(critical, seed: int, batch: int) -> np.ndarray:
    """The critical inputs and neighbours, then seeded random ones, as ``batch`` rows."""
    rng = np.random.default_rng(seed)
    x = np.concatenate([float32_neighbours(critical), rng.uniform(-8, 8, 512).astype(F32)])
    x = np.concatenate([x, np.zeros((-x.size) % batch, F32)])
    return x.reshape(batch, -1)


def _assert_same(got: np.ndarray, ref: np.ndarray, x: np.ndarray) -> None:
    """Equal, up to the float32 residue of QKeras's ``x + (q - x)`` (2 ulps): the quantization
    decision is the same everywhere."""
    tol = 2 * np.spacing(np.maximum(np.abs(got), np.abs(ref)).astype(F32))
    bad = np.abs(got - ref) > tol
    assert not bad.any(), (
        f"{bad.sum()} of {x.size} differ, e.g. x={x[bad][:4]} QKeras {ref[bad][:4]} "
        f"QONNX {got[bad][:4]}"
    )


@pytest.mark.parametrize("batch", [1, 8])
@pytest.mark.parametrize("name", CASES)
def test_activation_matches_qkeras_predict_on_ties_and_thresholds(name, batch):
    import qkeras2qonnx

    make, critical = _cases()[name]
    x = _inputs(critical, seed=CASES.index(name), batch=8).reshape(batch, -1)
    model = _activation_model(make(), x.shape[1])
    onnx_model = qkeras2qonnx.convert(model)
    assert len(quant_nodes(onnx_model)) == 1  # one quantizer, one QONNX node
    ref = model.predict(x, verbose=0)
    got = execute_qonnx(onnx_model, {"x": x})[onnx_model.graph.output[0].name]
    _assert_same(got, ref, x)


def test_binary_tanh_gives_minus_one_at_zero_and_binary_plus_one():
    """binary_tanh rounds hard_sigmoid(x) = 0.5 half-to-even to 0, so 0 (and 2**-26, whose
    0.5 x + 0.5 rounds to 0.5 in float32) give -1, while 1e-7 gives +1; binary() maps sign 0 to
    +1 (values derived by hand from QKeras 0.9's formulas)."""
    import qkeras2qonnx

    x = np.array([[0.0, -0.0, 2.0**-26, 1e-7, -1e-7]], F32)
    cases = (("binary_tanh", [-1, -1, -1, 1, -1]), ("binary()", [1, 1, 1, 1, -1]))
    for quantizer, expected in cases:
        model = _activation_model(quantizer, x.shape[1])
        onnx_model = qkeras2qonnx.convert(model)
        got = execute_qonnx(onnx_model, {"x": x})[onnx_model.graph.output[0].name]
        np.testing.assert_array_equal(model.predict(x, verbose=0)[0], expected)
        np.testing.assert_array_equal(got[0], expected)


def test_real_sigmoid_and_tanh_differ_only_next_to_a_tie_and_warn():
    """use_real_sigmoid / use_real_tanh: ONNX Sigmoid/Tanh then QKeras's rounding, with a
    warning: TF's own float sigmoid/tanh depends on the element's position in the tensor, so
    near a rounding tie no conversion can match it. Any difference must be one step, at an
    input next to a tie (ties derived by hand: logit / atanh of (k + 0.5) / m)."""
    from qkeras import quantized_sigmoid, quantized_tanh

    import qkeras2qonnx
    from qkeras2qonnx.qkeras_layers.exact_activations import InexactAtTies

    rng = np.random.default_rng(7)
    x = rng.uniform(-6, 6, (8, 2048)).astype(F32)
    sig_p = (np.arange(64) + 0.5) / 64
    real = (
        (quantized_sigmoid(6, use_real_sigmoid=True), np.log(sig_p / (1 - sig_p)), 1 / 64),
        (
            quantized_tanh(8, use_real_tanh=True),
            np.arctanh((np.arange(-128, 128) + 0.5) / 128),
            1 / 128,
        ),
    )
    for quantizer, ties, step in real:
        model = _activation_model(quantizer, x.shape[1])
        with pytest.warns(InexactAtTies):
            onnx_model = qkeras2qonnx.convert(model)
        assert {"Sigmoid", "Tanh"} & {n.op_type for n in onnx_model.graph.node}
        got = execute_qonnx(onnx_model, {"x": x})[onnx_model.graph.output[0].name]
        ref = model.predict(x, verbose=0)
        differ = got != ref
        assert differ.mean() < 1e-3
        assert np.all(np.abs(got - ref)[differ] <= step)
        distance = np.min(np.abs(x[differ][:, None] - ties[None, :]), axis=1)
        assert np.all(distance < 1e-5), distance


def test_metadata_and_report_name_the_composite_quantizers():
    from qkeras import QDense, quantized_bits, quantized_sigmoid

    import qkeras2qonnx
    from qonnx_ingest.report import COMPOSITE_QUANTIZERS, report

    k = keras()
    inp = k.Input((6,), name="x")
    h = QDense(4, kernel_quantizer=quantized_bits(4, 0, alpha=1), activation="quantized_relu(4)")(
        inp
    )
    kernel = quantized_bits(4, 0, alpha=1)
    out = QDense(2, kernel_quantizer=kernel, activation=quantized_sigmoid(3), name="out")(h)
    model = k.Model(inp, out)
    set_seeded_weights(model, 3)
    onnx_model = qkeras2qonnx.convert(model)
    props = {p.key: p.value for p in onnx_model.metadata_props}
    composite = json.loads(props[COMPOSITE_QUANTIZERS])
    assert list(composite) == ["out/activation_quantizer"]
    assert "hard sigmoid" in composite["out/activation_quantizer"]
    text = report(onnx_model, cost=False).as_text()
    assert "composite quantizers" in text and "out/activation_quantizer" in text
    rows = report(onnx_model, cost=False).as_dict()["quantized_tensors"]
    assert sum(r["composite"] is not None for r in rows) == 1
    for batch in (1, 8):
        assert_matches_qkeras(model, onnx_model, batch=batch)


@pytest.mark.parametrize(
    "activation",
    ["quantized_tanh(4)", "ternary(threshold=0.5)", "quantized_relu(4,1,negative_slope=0.5)"],
)
def test_composite_as_dense_activation_matches_qkeras(activation):
    from qkeras import QDense, quantized_bits

    import qkeras2qonnx

    k = keras()
    inp = k.Input((10,), name="x")
    h = QDense(8, kernel_quantizer=quantized_bits(6, 0, alpha=1), activation=activation)(inp)
    model = k.Model(inp, k.layers.Dense(3)(h))
    set_seeded_weights(model, 5)
    from qkeras2qonnx.qkeras_layers.exact_activations import InexactAtTies

    with warnings.catch_warnings():
        warnings.simplefilter("error", InexactAtTies)  # exact forms: no such warning
        onnx_model = qkeras2qonnx.convert(model)
    for batch in (1, 8):
        assert_matches_qkeras(model, onnx_model, batch=batch)


@pytest.mark.parametrize("symmetric", [0.5, 16])
def test_sigmoid_floor_off_the_grid_or_above_the_top_is_refused(symmetric):
    """QKeras clips at ``symmetric / 2**bits``: 0.5 puts the floor between grid values, 16
    puts it above the top (15/16); no identity Quant on the grid holds such a result."""
    from qkeras import quantized_sigmoid

    import qkeras2qonnx
    from qonnx_ingest.errors import ConversionError

    model = _activation_model(quantized_sigmoid(4, symmetric=symmetric), 4)
    with pytest.raises(ConversionError, match=f"symmetric={symmetric!r}"):
        qkeras2qonnx.convert(model)
