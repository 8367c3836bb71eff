"""Downstream acceptance with hls4ml (issue 7): the public dense jet tagger and the MNIST CNN,
converted by qkeras2qonnx, go through hls4ml 1.3.0's QONNX frontend and its g++ emulation, and
hls4ml's ``predict`` equals qonnx's execution of our graph, on the logits, bit for bit. So do
three qkeras-v3 models converted through the Keras 3 path (dense, folded QConv2DBatchnorm,
QDenseBatchnorm; first checked against qkeras-v3's predict).

Issue 16 adds every other corpus QKeras model and all 41 models hls4ml's own QKeras tests
build (``hls4ml_acceptance_cases``): RN06 and the 21 of hls4ml's test models hls4ml accepts
are equal bit for bit too (its jet tagger is the corpus qkeras_3layer; the other 19 are
refused by hls4ml); quantized_cnn is, up to its last quantizer, at a wide default precision
(``FLOAT_BETWEEN``); the others are refused by hls4ml or qonnx, and the case asserts the exact
message and the file:line that raises it before skipping.

Forms hls4ml 1.3.0 cannot take are cases too: the test asserts hls4ml's refusal is the known
one (so a fixed hls4ml, or a new failure, shows) and skips naming its cause in hls4ml's
source: composite activations and unrolled recurrent layers (``hls4ml_acceptance_models``),
alpha='auto'/'auto_po2' kernels (``KERAS3_REFUSED``).

The flow is hls4ml's documented one: ``qkeras2qonnx.convert(..., channels_last=True)``, then
qonnx's ``cleanup_model``, ``ConvertToChannelsLastAndClean``, ``GemmToMatMul`` (hls4ml has no
Gemm) and ``cleanup_model`` again; ``config_from_onnx_model(granularity="name")``,
``convert_from_onnx_model``, ``compile()`` (a C++ emulation built with g++; no FPGA tools).

Precisions come from the Quant nodes: hls4ml turns each power-of-two-scale Quant into a
fixed-point type (a weight or bias Quant becomes the constant's type, an activation Quant a
linear activation with the Quant's type; ROUND becomes AP_RND_CONV, half to even, as in
QONNX). Dense/Conv accumulators and results are left 'auto', and hls4ml's precision inference
sizes them to hold every sum exactly. What no Quant node fixes takes the default, chosen wide
(fixed<32,16>): only the plain ReLU of QConv2D(activation='relu') ahead of the QActivation's
quantizer, whose values have at most 13 fractional bits here.

Neither model quantizes its input (their first QDense/QConv2D takes floats), so there is no
input Quant to take a grid from: each model gets an input grid (``InputGrid``), hls4ml's input
type is set to exactly that grid, and the inputs are drawn from it. Every value in the
emulation is then exact, and so is qonnx's float32 execution (no value needs more than 24
significant bits), so the assertion is equality. Off-grid inputs would be truncated by
hls4ml's input type, which is a choice of the hls4ml config, not a property of our graph.

Logits, not probabilities: hls4ml's softmax is a lookup table, so the final Softmax is cut off
before either side runs. Each case is built once per session (module-scoped fixture), shared by
both tests: hls4ml's conversion and g++ compile take about 5-15 s for the jet tagger, 35-75 s
for the MNIST CNN and RN06, 20-40 s for each small model of hls4ml's tests on a 2-core
machine (issue 16's 17 more builds of hls4ml test models add ~11 min, its 13 more refusals
~2.5 min, of which qonnx's preparation of the unrolled QLSTM/QGRU is ~1 min each on a busy
machine); the CNNs of issue 16 use io_stream, whose build is the shorter.
"""

from __future__ import annotations

import copy
import time
import warnings
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import pytest
from hls4ml_acceptance_cases import (
    CORPUS_REFUSED,
    HLS4ML_AS_CORPUS,
    HLS4ML_COMPILED,
    HLS4ML_DEFAULT_PRECISION,
    HLS4ML_REFUSED,
)
from hls4ml_acceptance_graphs import InputGrid, cut, expose, logits, prepare_for_hls4ml
from hls4ml_acceptance_models import BUILT, build, refusal
from qkeras3_support import made_models
from qkeras_helpers import CORPUS, SAMPLES, quant_nodes

from qonnx_ingest.execute import execute_qonnx
from support import requires_corpus

hls4ml = pytest.importorskip(
    "hls4ml", reason="hls4ml is not installed: pip install -c constraints.txt -e '.[hls4ml]'"
)

pytestmark = [
    pytest.mark.hls4ml,
    pytest.mark.keras,
    requires_corpus,
    pytest.mark.filterwarnings("ignore:The GemmToMatMul transformation only offers:UserWarning"),
]

DEFAULT_PRECISION = "fixed<32,16>"
SEED = 7


# name: (model or architecture, weights file or None, input grid)
MODELS = {
    # the corpus README's "model hls4ml's own tests load": 16-64-32-32-5, features in [-2, 2)
    "qkeras_3layer": ("qkeras_3layer.json", "qkeras_3layer_weights.h5", InputGrid(10, 2, True)),
    # 28x28x1 pixels in [0, 1)
    "qkeras_mnist_cnn": (
        "qkeras_mnist_cnn.json",
        "qkeras_mnist_cnn_weights.h5",
        InputGrid(8, 0, False),
    ),
    # the hls4ml tutorial's part 4 jet tagger (a single .h5), same features
    "part4_jettagger": ("part4_jettagger_KERAS_check_best_model.h5", None, InputGrid(10, 2, True)),
    # MLPerf Tiny ResNet (32x32x3 pixels in [0, 1), 8 bits)
    "rn06": ("RN06_resnet_v1_eembc_quantized_tiny_model_best.h5", None, InputGrid(8, 0, False)),
    # 28x28x1 pixels; Keras BatchNormalization after QDense x2 and a float output Dense
    "quantized_cnn": ("quantized_cnn.h5", None, InputGrid(8, 0, False)),
}
# Cases with float arithmetic between quantizers: (default precision, last tensor compared).
# quantized_cnn's two Keras BatchNormalization layers are float Mul/Add (hls4ml: ApplyAlpha)
# ahead of a Relu and a Quant: at the default fixed<32,16> their float32 scales lose bits and
# move activations across a rounding boundary (logits off by up to 0.014). At fixed<64,24>
# every scale, bias and product is held exactly, and the last quantized activation (ahead of
# the float output Dense, which fixed point cannot reproduce bit for bit) is compared.
FLOAT_BETWEEN = {"quantized_cnn": ("fixed<64,24>", "dense_act_1/activation_quantizer_out0")}
# ... and hls4ml's test models with float weights (compared whole)
FLOAT_BETWEEN.update({f"hls4ml_{n}": (p, None) for n, p in HLS4ML_DEFAULT_PRECISION.items()})
# qkeras-v3 models of qkeras3_models.py, converted in memory under qkeras-v3 (the Keras 3
# path); their inputs sit on a 1/16 grid in [-2, 2). The hls_* ones quantize every weight and
# bias on a power-of-two grid; dense and conv_bn have alpha='auto' / 'auto_po2' kernels.
KERAS3 = ("hls_dense", "hls_conv_bn", "hls_dense_bn", "dense", "conv_bn")
KERAS3_GRID = InputGrid(6, 2, True)
# alpha='auto'/'auto_po2' kernels round half away from zero (HALF_UP, QKeras's formula)
KERAS3_REFUSED = {
    name: (
        "Rounding mode HALF_UP not supported",
        f"{name}'s alpha='{alpha}' kernel rounds half away from zero (a HALF_UP Quant, as QKeras "
        "computes it); hls4ml 1.3.0's _calculate_precision_quantizer "
        "(hls4ml/model/optimizer/passes/quant_opt.py:364) takes only ROUND and FLOOR. With "
        "ROUND forced in, its per-channel scale is left as a Constant that "
        "InferPrecisionTypes (passes/infer_precision.py:26) asks for an input: IndexError in "
        "Layer.get_input_variable (hls4ml/model/layers.py:223)",
    )
    for name, alpha in (("dense", "auto"), ("conv_bn", "auto_po2"))
}
# composite activations and unrolled cells built here (hls4ml_acceptance_models)
BUILT_GRID = InputGrid(8, 2, True)

CASES = [
    pytest.param(case, id="-".join(case), marks=marks)
    for case, marks in [
        (("qkeras_3layer", "io_parallel"), ()),
        (("qkeras_3layer", "io_stream"), ()),
        (("qkeras_mnist_cnn", "io_parallel"), ()),
        (("qkeras_mnist_cnn", "io_stream"), ()),
        (("part4_jettagger", "io_parallel"), ()),
        # io_stream: the CNNs' g++ build is shorter than io_parallel's unrolled one
        (("rn06", "io_stream"), ()),
        (("quantized_cnn", "io_stream"), ()),
        *[((name, "io_parallel"), ()) for name in CORPUS_REFUSED],
        *[((f"hls4ml_{name}", io), ()) for name, (_, io) in HLS4ML_COMPILED.items()],
        *[((f"hls4ml_{name}", "io_parallel"), ()) for name in HLS4ML_REFUSED],
        *[((f"keras3_{name}", "io_parallel"), ()) for name in KERAS3],
        *[((name, "io_parallel"), ()) for name in BUILT],
    ]
]


@dataclass
class Emulated:
    name: str
    qonnx_model: onnx.ModelProto  # our output, Softmax cut off
    hls_model: Any
    grid: InputGrid
    seconds: float  # hls4ml conversion + g++ compile


@pytest.fixture(scope="module", params=CASES)
def emulated(request, tmp_path_factory) -> Emulated:
    name, io_type = request.param
    converted, grid = _hls4ml_step(name, _converted, name, tmp_path_factory)
    model = logits(converted)
    default_precision, last = FLOAT_BETWEEN.get(name, (DEFAULT_PRECISION, None))
    if last is not None:
        model = cut(model, last)
    prepared = _hls4ml_step(name, prepare_for_hls4ml, model)
    start = time.perf_counter()
    config = _hls4ml_step(
        name,
        hls4ml.utils.config.config_from_onnx_model,
        prepared,
        granularity="name",
        backend="Vivado",
        default_precision=default_precision,
    )
    config["LayerName"][prepared.graph.input[0].name]["Precision"]["result"] = grid.hls_type
    hls_model = _hls4ml_step(
        name,
        hls4ml.converters.convert_from_onnx_model,
        prepared,
        output_dir=str(tmp_path_factory.mktemp(f"{name}-{io_type}")),
        io_type=io_type,
        backend="Vivado",
        hls_config=config,
    )
    hls_model.compile()
    return Emulated(name, model, hls_model, grid, time.perf_counter() - start)


def test_logits_equal_qonnx(emulated):
    model = emulated.qonnx_model
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = emulated.grid.sample(np.random.default_rng(SEED), (SAMPLES, *dims[1:]))
    expected, ties, rounding = _qonnx_logits(model, x)
    actual = np.asarray(emulated.hls_model.predict(np.ascontiguousarray(x)))
    actual = actual.reshape(expected.shape)
    diff = np.abs(actual.astype(np.float64) - expected)
    summary = (
        f"{SAMPLES} inputs: max |hls4ml - qonnx| {diff.max():g}, {np.mean(diff == 0):.1%} "
        f"equal, {ties} rounding ties at activation Quants, hls4ml build "
        f"{emulated.seconds:.0f} s"
    )
    print(summary)
    # the equality covers round-half-to-even (QONNX ROUND vs AP_RND_CONV) only if ties occurred
    # (quantised_po2_bit_width and both qseparableconv have no activation quantizer to round)
    assert ties > 0 or not rounding, summary
    np.testing.assert_array_equal(actual, expected, err_msg=summary)


def test_precisions_come_from_quant_nodes(emulated):
    """Every Quant node is one hls4ml type: each weight and bias, and each activation that
    carries a quantizer, has exactly the fixed-point type its Quant node describes. (An
    activation Quant right after a Dense or Conv whose result type is unset becomes that
    layer's result type and quantizer: MergeLinearActivation, hls4ml/model/optimizer/passes/
    linear.py:37-44.)"""
    model = emulated.qonnx_model
    expected = Counter(_fixed_type(model, node) for node in quant_nodes(model))
    actual = Counter()
    for layer in emulated.hls_model.get_layers():
        actual.update(_precision(w.type.precision) for w in layer.get_weights())
        if layer.get_attr("quantizer") is not None:
            actual[_precision(layer.get_output_variable().type.precision)] += 1
    if emulated.name not in FLOAT_BETWEEN:
        assert actual == expected
        return
    # float constants (the Keras BatchNormalization's scale and shift, the zero bias hls4ml
    # gives a bias-less Dense) take the wide default precision, as configured
    default = FLOAT_BETWEEN[emulated.name][0]
    width, integer = map(int, default.removeprefix("fixed<").removesuffix(">").split(","))
    assert expected <= actual
    assert set(actual - expected) == {(width, integer, True, "TRN", "WRAP")}


def test_every_model_of_hls4ml_tests_is_compiled_or_refused():
    """Each of the 41 models hls4ml's QKeras tests build is a case above: compiled and
    compared, a corpus case, or hls4ml's exact refusal asserted; none is left out or twice."""
    from test_hls4ml_qkeras_models import MODELS as HLS4ML_TEST_MODELS

    groups = [set(HLS4ML_COMPILED), set(HLS4ML_REFUSED), set(HLS4ML_AS_CORPUS)]
    assert sum(map(len, groups)) == len(set().union(*groups)) == 41
    assert set().union(*groups) == set(HLS4ML_TEST_MODELS)
    assert set(HLS4ML_AS_CORPUS.values()) <= set(MODELS)


def _converted(name: str, tmp_path_factory) -> tuple[onnx.ModelProto, InputGrid]:
    """Our channels-last QONNX for case ``name`` and the grid of its inputs."""
    import qkeras2qonnx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name in MODELS:
            source, weights, grid = MODELS[name]
            return (
                qkeras2qonnx.convert(
                    CORPUS / source,
                    weights=CORPUS / weights if weights else None,
                    channels_last=True,
                ),
                grid,
            )
        if name in CORPUS_REFUSED:
            source = CORPUS / CORPUS_REFUSED[name][0]
            return qkeras2qonnx.convert(source, channels_last=True), InputGrid(8, 2, True)
        if name.startswith("hls4ml_"):
            return _hls4ml_test_model(name.removeprefix("hls4ml_"))
        if name.startswith("keras3_"):
            made = made_models(tmp_path_factory)
            keras3 = name.removeprefix("keras3_")
            converted = onnx.load(made / f"{keras3}.channels_last.onnx")
            _assert_matches_qkeras3(converted, dict(np.load(made / f"{keras3}.npz")))
            return converted, KERAS3_GRID
        return qkeras2qonnx.convert(build(name), channels_last=True), BUILT_GRID


def _assert_matches_qkeras3(converted: onnx.ModelProto, reference: dict) -> None:
    """The channels-last graph (batch 1) equals qkeras-v3's predict on its 8 inputs."""
    x, y = reference["x8"], reference["y8"]
    name, out = converted.graph.input[0].name, converted.graph.output[0].name
    got = np.concatenate([execute_qonnx(converted, {name: row[None]})[out] for row in x])
    np.testing.assert_allclose(got, y, rtol=1e-6, atol=1e-6 * max(1.0, float(np.abs(y).max())))


def _hls4ml_step(name: str, step, *args, **kwargs):
    """``step(*args, **kwargs)``; for a case whose form hls4ml 1.3.0 cannot take, the refusal
    must be exactly the known one, and the case is skipped with its cause."""
    keras3 = name.removeprefix("keras3_")
    known = CORPUS_REFUSED.get(name, (None, None))[1] or HLS4ML_REFUSED.get(
        name.removeprefix("hls4ml_")
    )
    if known is not None:
        try:
            return step(*args, **kwargs)
        except Exception as exc:
            known.check(exc)
            pytest.skip(known.reason)
    if name in BUILT:
        message, reason = refusal(name)
    elif name.startswith("keras3_") and keras3 in KERAS3_REFUSED:
        message, reason = KERAS3_REFUSED[keras3]
    else:
        return step(*args, **kwargs)
    try:
        return step(*args, **kwargs)
    except Exception as exc:  # hls4ml raises a bare Exception
        assert message in str(exc), f"hls4ml refused {name} otherwise: {exc}"
        pytest.skip(reason)


def _hls4ml_test_model(name: str) -> tuple[onnx.ModelProto, InputGrid]:
    """hls4ml's test model ``name`` as test_hls4ml_qkeras_models builds it (same seed),
    converted channels-last, after checking it against QKeras on its input grid."""
    import qkeras
    from qkeras_helpers import assert_matches_qkeras, keras
    from test_hls4ml_qkeras_models import MODELS as HLS4ML_TEST_MODELS

    import qkeras2qonnx
    from qkeras2qonnx.environment.backend import keras as backend_keras

    backend_keras()
    k = keras()
    k.utils.set_random_seed(sorted(HLS4ML_TEST_MODELS).index(name))
    model = HLS4ML_TEST_MODELS[name][0](qkeras, k)
    converted = qkeras2qonnx.convert(model, channels_last=True)
    bits, integer, signed = HLS4ML_COMPILED.get(name, ((8, 2, True), None))[0]
    grid = InputGrid(bits, integer, signed)
    if name in HLS4ML_COMPILED:
        high = 2.0**integer / (2 if signed else 1)
        step = 2.0 ** (integer - bits)
        assert_matches_qkeras(  # batch 1: qonnx runs a channels-last Conv at batch 1 only
            model, converted, batch=1, low=-high if signed else 0.0, high=high - step, step=step
        )
    return converted, grid


def _qonnx_logits(model: onnx.ModelProto, x: np.ndarray) -> tuple[np.ndarray, int, int]:
    """qonnx's logits for each sample (the graph has batch 1), how many inputs of the
    activation Quant nodes lay exactly halfway between two steps of their grid, and how many
    activation Quant nodes there are."""
    probe = copy.deepcopy(model)
    scales = {}
    for node in quant_nodes(probe):
        if _initializer(probe, node.input[0]) is None:  # an activation, not a weight
            scales[node.input[0]] = float(_initializer(probe, node.input[1]))
            if node.input[0] != model.graph.input[0].name:  # a graph input is not exposed
                expose(probe.graph, node.input[0])
    logits_name, input_name = model.graph.output[0].name, model.graph.input[0].name
    logits, ties = [], 0
    for sample in x:
        out = {input_name: sample[None], **execute_qonnx(probe, {input_name: sample[None]})}
        logits.append(out[logits_name])
        for name, scale in scales.items():
            steps = out[name].astype(np.float64) / scale
            ties += int(np.sum(steps - np.floor(steps) == 0.5))
    return np.concatenate(logits).astype(np.float64), ties, len(scales)


def _fixed_type(model: onnx.ModelProto, node: onnx.NodeProto) -> tuple:
    """The fixed-point type a Quant node describes, as hls4ml spells it."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    scale = np.asarray(_initializer(model, node.input[1]), dtype=np.float64)
    bits = int(_initializer(model, node.input[3]))
    exponent = np.log2(scale.flat[0])
    assert np.all(scale == scale.flat[0]) and exponent == int(exponent), "not a po2 scale"
    rounding = {b"ROUND": "RND_CONV", b"FLOOR": "TRN"}[attrs.get("rounding_mode", b"ROUND")]
    saturation = "SAT_SYM" if attrs.get("narrow", 0) else "SAT"
    return (bits, bits + int(exponent), bool(attrs.get("signed", 1)), rounding, saturation)


def _precision(precision) -> tuple:
    return (
        precision.width,
        precision.integer,
        precision.signed,
        precision.rounding_mode.name,
        precision.saturation_mode.name,
    )


def _initializer(model: onnx.ModelProto, name: str) -> np.ndarray | None:
    for init in model.graph.initializer:
        if init.name == name:
            return onnx.numpy_helper.to_array(init)
    return None
