"""TFLite models through hls4ml 1.3.0's QONNX frontend (issue 17): what works and the
documented limits (docs/hls4ml.md).

Our channels-last output is the graph hls4ml's QONNX recipe asks for: the recipe's qonnx
preparation (cleanup, ConvertToChannelsLastAndClean, GemmToMatMul) leaves its channels-last
ops and computation as they are. hls4ml itself cannot take an exact TFLite-born graph:

* TFLite rounds half away from zero, our Quant nodes say ``HALF_UP``, and hls4ml's
  ``_calculate_precision_quantizer`` (hls4ml/model/optimizer/passes/quant_opt.py) raises
  NotImplementedError for any rounding mode but ROUND and FLOOR.
* TFLite scales are not powers of two. hls4ml turns a Quant of a constant with such a scale
  into Constant + ApplyAlpha (``ConstQuantToConstAlpha``); a bias so rescaled is never folded
  into its Dense (``FuseBiasAdd`` wants the Constant itself), and ``InferPrecisionTypes.match``
  then asks the leftover Constant for its input variable: ``Layer.get_input_variable``
  (hls4ml/model/layers.py) indexes ``inputs[0]`` of a layer whose ``inputs`` are ``[]``:
  IndexError. That is where the hello_world MLP stops even with ROUND forced in.

``tflite2qonnx.hls4ml_form.hls4ml_compatible`` (explicit opt-in) writes the hls4ml form
(``--format hls4ml``): every constant Quant as its values on one power-of-two grid, and each
HALF_UP requantization as ROUND / FLOOR where proven the same function
(qonnx_ingest/targets/hls4ml_rounding.py), any other as ROUND, named (a deviation at ties).
The hello_world MLP, all four of its requantizations proven, then goes through hls4ml and its
``predict`` gives the interpreter's outputs on all 256 inputs of its int8 input grid; a small
int8 CNN with per-channel weight scales (which stopped at hls4ml's ``ScaleDownConv`` while its
weights were Quants of TFLite's scales) compiles and predicts qonnx's outputs too. The uint8
corpus convolutions are in test_tflite_hls4ml_exact.py.

Each limit is asserted as it stands, so a fixed hls4ml fails a test here and asks for the
docs/hls4ml.md entry to go.
"""

from __future__ import annotations

import copy
import json
import warnings

import numpy as np
import onnx
import pytest

import tflite2qonnx
from layout.channels_last import CHANNELS_LAST_DOMAIN
from qonnx_ingest.execute import execute_qonnx
from support import CORPUS, requires_corpus

hls4ml = pytest.importorskip(
    "hls4ml", reason="hls4ml is not installed: pip install -c constraints.txt -e '.[hls4ml]'"
)

pytestmark = [
    pytest.mark.hls4ml,
    requires_corpus,
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::qonnx_ingest.errors.ConversionWarning"),
]

HELLO_WORLD = CORPUS / "tflite" / "tflm__hello_world_int8.tflite"


@pytest.fixture(scope="module")
def mlp() -> onnx.ModelProto:
    return tflite2qonnx.convert(HELLO_WORLD, channels_last=True)


@pytest.fixture(scope="module")
def cnn() -> onnx.ModelProto:
    pytest.importorskip("tensorflow", reason="needs the keras extra (TensorFlow)")
    from small_tflite import small_cnn

    return tflite2qonnx.convert(small_cnn(), channels_last=True)


def _prepare(model: onnx.ModelProto):
    """hls4ml's documented QONNX preparation (as tests/qkeras2qonnx/test_hls4ml_acceptance)."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean
    from qonnx.transformation.gemm_to_matmul import GemmToMatMul
    from qonnx.util.cleanup import cleanup_model

    wrapper = cleanup_model(ModelWrapper(copy.deepcopy(model)))
    wrapper = wrapper.transform(ConvertToChannelsLastAndClean())
    wrapper = wrapper.transform(GemmToMatMul())
    return cleanup_model(wrapper)


def _hls4ml(prepared, tmp_path, default_precision: str = "fixed<32,16>"):
    config = hls4ml.utils.config.config_from_onnx_model(
        prepared, granularity="name", backend="Vivado", default_precision=default_precision
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return hls4ml.converters.convert_from_onnx_model(
            prepared,
            output_dir=str(tmp_path / "hls_prj"),
            io_type="io_parallel",
            backend="Vivado",
            hls_config=config,
        )


def _grid_inputs(model: onnx.ModelProto, count: int = 8) -> list[np.ndarray]:
    """Inputs on the model's int8 input grid, scale * (q - zero_point)."""
    props = {p.key: p.value for p in model.metadata_props}
    vi = model.graph.input[0]
    info = json.loads(props["tflite2qonnx.io_quantization"])[vi.name]
    shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    q = np.random.default_rng(5).integers(-128, 128, (count, *shape))
    return [(info["scale"][0] * (x - info["zero_point"][0])).astype(np.float32) for x in q]


def _rounding_modes(model) -> set[str]:
    return {
        onnx.helper.get_attribute_value(a).decode()
        for n in model.graph.node
        for a in n.attribute
        if a.name == "rounding_mode"
    }


@pytest.mark.parametrize("name", ["mlp", pytest.param("cnn", marks=pytest.mark.keras)])
def test_hls4ml_preparation_keeps_channels_last_graph_and_values(name, request):
    model = request.getfixturevalue(name)
    prepared = _prepare(model)
    ops = sorted((n.domain, n.op_type) for n in prepared.graph.node)
    assert ops == sorted((n.domain, n.op_type) for n in model.graph.node)
    assert ("", "Transpose") not in ops
    if name == "cnn":
        assert (CHANNELS_LAST_DOMAIN, "Conv") in ops and (CHANNELS_LAST_DOMAIN, "MaxPool") in ops
    ours_in, ours_out = model.graph.input[0].name, model.graph.output[0].name
    theirs_in, theirs_out = prepared.graph.input[0].name, prepared.graph.output[0].name
    for x in _grid_inputs(model):
        np.testing.assert_array_equal(
            execute_qonnx(prepared.model, {theirs_in: x})[theirs_out],
            execute_qonnx(model, {ours_in: x})[ours_out],
        )


@pytest.mark.parametrize("name", ["mlp", pytest.param("cnn", marks=pytest.mark.keras)])
def test_hls4ml_refuses_tflite_half_up_rounding(name, request, tmp_path):
    model = request.getfixturevalue(name)
    assert _rounding_modes(model) == {"HALF_UP"}
    with pytest.raises(NotImplementedError, match="Only ROUND and FLOOR supported"):
        _hls4ml(_prepare(model), tmp_path)


def test_hls4ml_fails_on_rescaled_bias_constant_even_with_round(mlp, tmp_path):
    """With every HALF_UP replaced by ROUND (a test-only edit: it changes exact ties), hls4ml
    stops in InferPrecisionTypes on a Constant left over from a bias Quant with TFLite's
    (not power-of-two) scale."""
    model = copy.deepcopy(mlp)
    for node in model.graph.node:
        for attr in node.attribute:
            if attr.name == "rounding_mode":
                attr.s = b"ROUND"
    with pytest.raises(IndexError) as failure:
        _hls4ml(_prepare(model), tmp_path)
    frame = failure.traceback[-1]
    assert frame.name == "get_input_variable"
    layer = frame.locals["self"]
    assert layer.class_name == "Constant" and layer.inputs == []
    # hls4ml divided the bias Quant's input by its scale: TFLite's int32 bias of the first Dense
    from tflite2qonnx.flatbuffer import read_model

    tensors = read_model(HELLO_WORLD).subgraphs[0].tensors
    (bias,) = [t for t in tensors if t.name == "sequential/dense/BiasAdd/ReadVariableOp"]
    np.testing.assert_allclose(layer.get_attr("value"), bias.data, atol=0.01)


# hls4ml applies TFLite's (not power-of-two) scales as fixed-point ApplyAlpha multiplications
# of the default precision: fixed<32,16> keeps 16 fractional bits, too few for a 1e-4 scale
# (hello_world is then 5 output steps off); 40 fractional bits leave float32 rounding only.
WIDE = "fixed<64,24>"


def test_hls4ml_compatible_passes_interpreter_check(mlp):
    from tflite2qonnx.hls4ml_form import HLS4ML_KEY, hls4ml_compatible
    from tflite2qonnx.reference import verify

    compatible = hls4ml_compatible(mlp)
    assert _rounding_modes(compatible) == {"ROUND"}
    props = {p.key: p.value for p in compatible.metadata_props}
    # 4 activation Quants (input, two ReLU layers, output), each proven tie-free, so no
    # deviation; 3 weights and 3 biases regridded
    record = json.loads(props[HLS4ML_KEY])
    assert len(record["HALF_UP proven exact"]) == 4
    assert record["HALF_UP to ROUND, ties may differ"] == []
    assert record["constant Quant on a power-of-two grid"] == 6
    verify(HELLO_WORLD, compatible, inputs=256).require_pass()


def test_hls4ml_predicts_qonnx_outputs_on_whole_input_grid(mlp, tmp_path):
    """All 256 int8 inputs of hello_world: hls4ml's outputs, on the int8 output grid, equal
    qonnx's execution of the hls4ml-compatible graph and the interpreter's outputs."""
    from tflite2qonnx.hls4ml_form import hls4ml_compatible

    compatible = hls4ml_compatible(mlp)
    hls_model = _hls4ml(_prepare(compatible), tmp_path, WIDE)
    hls_model.compile()
    io = json.loads({p.key: p.value for p in mlp.metadata_props}["tflite2qonnx.io_quantization"])
    (i_name,), (o_name,) = [vi.name for vi in mlp.graph.input], [vi.name for vi in mlp.graph.output]
    x = io[i_name]["scale"][0] * (np.arange(-128, 128) - io[i_name]["zero_point"][0])
    x = x.astype(np.float32).reshape(-1, 1)
    expected = np.concatenate([execute_qonnx(compatible, {i_name: v[None]})[o_name] for v in x])
    actual = np.asarray(hls_model.predict(np.ascontiguousarray(x))).reshape(expected.shape)
    scale, zero_point = io[o_name]["scale"][0], io[o_name]["zero_point"][0]
    q_expected = np.round(expected / scale) + zero_point
    q_actual = np.round(actual / scale) + zero_point
    assert len(np.unique(q_expected)) > 50  # a sine, not a constant
    np.testing.assert_array_equal(q_actual, q_expected)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=scale * 1e-3)
    # and the interpreter's int8 outputs, on the model's whole input domain (the form's ROUND
    # is proven equal to TFLite's rounding on hello_world: no tie is reachable)
    from tflite2qonnx.reference_paths import BUILTIN_REF, open_path

    interpreter = open_path(HELLO_WORLD, BUILTIN_REF)
    (inp,), (out,) = interpreter.get_input_details(), interpreter.get_output_details()
    stored = []
    for q in np.arange(-128, 128, dtype=np.int8):
        interpreter.set_tensor(inp["index"], q.reshape(inp["shape"]))
        interpreter.invoke()
        stored.append(interpreter.get_tensor(out["index"]).astype(np.float64))
    np.testing.assert_array_equal(q_actual, np.concatenate(stored).reshape(q_actual.shape))


@pytest.mark.keras
def test_hls4ml_cnn_with_per_channel_weights_predicts_qonnx_outputs(cnn, tmp_path):
    """The small int8 CNN (Conv, MaxPool, Conv, Dense; per-channel weight scales), which
    stopped at hls4ml's ``ScaleDownConv`` while its weights were Quants of TFLite's scales:
    with them on one power-of-two grid each, hls4ml compiles it and its ``predict`` gives
    qonnx's outputs on the output grid."""
    from tflite2qonnx.hls4ml_form import hls4ml_compatible

    compatible = hls4ml_compatible(cnn)
    hls_model = _hls4ml(_prepare(compatible), tmp_path, WIDE)
    hls_model.compile()
    io = json.loads({p.key: p.value for p in cnn.metadata_props}["tflite2qonnx.io_quantization"])
    i_name, o_name = cnn.graph.input[0].name, cnn.graph.output[0].name
    inputs = _grid_inputs(cnn)
    expected = np.concatenate([execute_qonnx(compatible, {i_name: x})[o_name] for x in inputs])
    batch = np.ascontiguousarray(np.concatenate(inputs))
    actual = np.asarray(hls_model.predict(batch)).reshape(expected.shape)
    scale, zero_point = io[o_name]["scale"][0], io[o_name]["zero_point"][0]
    assert len(np.unique(np.round(expected / scale))) > 4  # not a constant
    np.testing.assert_array_equal(
        np.round(actual / scale) + zero_point, np.round(expected / scale) + zero_point
    )


def test_hls4ml_compatible_refuses_channels_first_conversion():
    from qonnx_ingest.errors import InputError
    from tflite2qonnx.hls4ml_form import hls4ml_compatible

    default = tflite2qonnx.convert(CORPUS / "tflite" / "t2o__conv.uint8.tflite")
    with pytest.raises(InputError, match="channels_last=True"):
        hls4ml_compatible(default)


def test_hls4ml_compatible_writes_a_bias_off_its_grid_as_its_quantized_values(mlp):
    """A bias value off its int32 grid is quantized by its Quant; the form writes the
    quantized values (on a power-of-two grid), so qonnx's execution is unchanged."""
    from tflite2qonnx.hls4ml_form import hls4ml_compatible

    model = copy.deepcopy(mlp)
    inits = {t.name: t for t in model.graph.initializer}
    bias = next(
        n
        for n in model.graph.node
        if n.op_type == "Quant"
        and n.input[0] in inits
        and onnx.numpy_helper.to_array(inits[n.input[3]]) == 32  # int32: a bias
    )
    value = onnx.numpy_helper.to_array(inits[bias.input[0]]).copy()
    value.flat[0] += 0.25 * float(onnx.numpy_helper.to_array(inits[bias.input[1]]))
    inits[bias.input[0]].CopyFrom(onnx.numpy_helper.from_array(value, bias.input[0]))
    compatible = hls4ml_compatible(model)
    name, out = model.graph.input[0].name, model.graph.output[0].name
    for x in _grid_inputs(model):
        np.testing.assert_array_equal(
            execute_qonnx(compatible, {name: x})[out], execute_qonnx(model, {name: x})[out]
        )


# corpus models and the first thing hls4ml 1.3.0's QONNX frontend refuses in each (docs/hls4ml.md)
HLS4ML_REFUSALS = {
    "tfexamples__recommendation_history10_top100": "ERROR: Unsupported operation type: Equal",
    "armzoo__ds_cnn_small_int16": "ERROR: Unsupported operation type: Floor",
    "tflm__dtln_noise_suppression": "ERROR: Merging more than two tensors is not yet supported.",
}


def test_hls4ml_refuses_corpus_models_for_its_own_reasons(tmp_path):
    """The recipe's qonnx preparation takes each channels-last file; hls4ml's parser then stops
    at an op or form it has no handler for (hls4ml/converters/onnx_to_hls.py, line 239;
    onnx/merge.py, line 40): the messages docs/hls4ml.md lists, asserted as they stand."""
    for name, message in HLS4ML_REFUSALS.items():
        model = tflite2qonnx.convert(CORPUS / "tflite" / f"{name}.tflite", channels_last=True)
        prepared = _prepare(model)
        with pytest.raises(Exception) as failure:
            _hls4ml(prepared, tmp_path / name)
        assert str(failure.value) == message, name
