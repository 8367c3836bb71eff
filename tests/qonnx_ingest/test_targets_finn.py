"""``--format finn``: activation quantizers as MultiThresholds that round every tie the way the
source does, and QKeras models that FINN takes through its steps computing what QKeras does."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from finn_support import run_finn
from onnx import TensorProto, helper, numpy_helper

import support
from qonnx_ingest.errors import ConversionError
from qonnx_ingest.execute import execute_qonnx
from qonnx_ingest.targets.finn import to_finn


def _quant_model(bits: int, signed: bool, rounding: str, scale, relu: bool = False):
    """x -> [Relu] -> Quant(scale, 0, bits) on a (1, C) input; scale scalar or per channel."""
    scale = np.asarray(scale, np.float32)
    channels = scale.size if scale.ndim else 4
    nodes = []
    x = "x"
    if relu:
        nodes.append(helper.make_node("Relu", ["x"], ["r"]))
        x = "r"
    nodes.append(
        helper.make_node(
            "Quant",
            [x, "s", "z", "b"],
            ["y"],
            domain="qonnx.custom_op.general",
            signed=int(signed),
            narrow=0,
            rounding_mode=rounding,
        )
    )
    graph = helper.make_graph(
        nodes,
        "q",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels])],
        [
            numpy_helper.from_array(scale.reshape((1, channels) if scale.ndim else ()), "s"),
            numpy_helper.from_array(np.float32(0), "z"),
            numpy_helper.from_array(np.float32(bits), "b"),
        ],
    )
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid("qonnx.custom_op.general", 1)]
    return helper.make_model(graph, opset_imports=opsets)


def _by_hand(x: np.ndarray, scale, bits: int, signed: bool, rounding: str) -> np.ndarray:
    """The quantizer's value from QONNX's definition, in float32 as qonnx computes it:
    ROUND is half to even (numpy's round), HALF_UP half away from zero as
    ``sign(v) * floor(|v| + 0.5)`` (so just below a tie, ``|v| + 0.5`` can round up to it)."""
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    v = np.clip(x.astype(np.float32) / np.float32(scale), lo, hi)
    if rounding == "HALF_UP":
        levels = np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))
    else:
        levels = np.round(v)
    return (levels * np.float32(scale)).astype(np.float32)


def _run_columns(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """Each value of ``x`` through the 1-channel-per-value model, in one executor call per
    block of ``channels`` values."""
    channels = model.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    rows = x.reshape(-1, channels)
    return np.concatenate([execute_qonnx(model, {"x": r[None]})["y"] for r in rows]).ravel()


# every tie k + 1/2 of a 4-bit grid, its float32 neighbours, and values beyond the range
_STEP = 2.0**-3
_TIES = (np.arange(-10, 20) + 0.5) * _STEP


def _probe() -> np.ndarray:
    ties = _TIES.astype(np.float32)
    near = [ties, np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf))]
    return np.concatenate([*near, np.float32([-5.0, 0.0, 5.0, 1.1])]).astype(np.float32)


@pytest.mark.parametrize("signed", [True, False])
@pytest.mark.parametrize("rounding", ["ROUND", "HALF_UP"])
def test_thresholds_round_every_tie_as_the_quantizer_does(signed: bool, rounding: str) -> None:
    x = _probe()
    model = to_finn(_quant_model(4, signed, rounding, [_STEP] * 2))
    assert [n.op_type for n in model.graph.node] == ["MultiThreshold", "Mul"]
    got = _run_columns(model, np.resize(x, (x.size + 1) // 2 * 2))[: x.size]
    np.testing.assert_array_equal(got, _by_hand(x, _STEP, 4, signed, rounding))


def test_a_relu_in_front_of_signed_thresholds_is_folded_into_them_exactly() -> None:
    x = _probe()
    model = to_finn(_quant_model(4, True, "ROUND", [_STEP] * 2, relu=True))
    assert [n.op_type for n in model.graph.node] == ["MultiThreshold", "Mul"]
    got = _run_columns(model, np.resize(x, (x.size + 1) // 2 * 2))[: x.size]
    np.testing.assert_array_equal(got, _by_hand(np.maximum(x, 0), _STEP, 4, True, "ROUND"))


def test_per_channel_scales_give_per_channel_thresholds() -> None:
    scales = np.float32([2.0**-2, 2.0**-4, 0.3, 1.0])
    model = to_finn(_quant_model(3, True, "ROUND", scales))
    x = np.float32([[0.375, 0.09375, 0.45, -2.5]])  # ties on the first, second and last
    got = execute_qonnx(model, {"x": x})["y"]
    want = np.stack([_by_hand(x[:, c], scales[c], 3, True, "ROUND") for c in range(4)], axis=1)
    np.testing.assert_array_equal(got, want)


def test_an_activation_wider_than_finn_thresholds_is_refused_naming_the_quant() -> None:
    with pytest.raises(ConversionError, match=r"Quant .*16-bit activation.*FINN"):
        to_finn(_quant_model(16, True, "ROUND", 2.0**-8))


# QKeras corpus models whose layers FINN maps: (model, weights, input range)
MAPPED = {
    "qkeras_3layer": ("qkeras_3layer.json", "qkeras_3layer_weights.h5", (-2.0, 2.0)),
    "part4_jettagger": ("part4_jettagger_KERAS_check_best_model.h5", None, (-2.0, 2.0)),
    "qkeras_mnist_cnn": ("qkeras_mnist_cnn.json", "qkeras_mnist_cnn_weights.h5", (0.0, 1.0)),
    # through the QKeras rewrites (qonnx_ingest.targets.finn_qkeras; test_targets_finn_qkeras)
    "AD03": ("AD03_autoqkeras_qbestModel.h5", None, (-2.0, 2.0)),
    "neutdet_w1a2": ("neutdet_quant_w1_a2_Vplane_nu.h5", None, (-2.0, 2.0)),
}


@pytest.fixture(scope="module", params=sorted(MAPPED))
def through_finn(request):
    """QKeras predict and FINN's run of the model's FINN form, on the same seeded inputs."""
    import qkeras2qonnx
    from qkeras2qonnx.environment.load import load_model

    corpus = support.CORPUS / "qkeras"
    source, weights, (low, high) = MAPPED[request.param]
    weights = corpus / weights if weights else None
    keras_model = load_model(corpus / source, weights=weights)
    proto = qkeras2qonnx.convert(keras_model, batch_size=1, format="finn")
    shape = [d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim]
    rng = np.random.default_rng(7)
    # inputs on a 2^-8 grid: the layers' sums stay exact in float32, in TF and in FINN alike
    x = np.round(rng.uniform(low, high, shape) * 256).astype(np.float32) / 256
    reference = keras_model.predict(x, verbose=0)
    return reference, run_finn(proto, {proto.graph.input[0].name: x})


@pytest.mark.keras
@support.requires_corpus
def test_qkeras_models_finn_maps_reach_specialize_layers(through_finn) -> None:
    _, run = through_finn
    assert run.stopped is None, run.stopped
    assert run.reached == "specialize_layers"
    assert all(op.endswith(("_hls", "_rtl")) for op in run.ops["specialize_layers"])


@pytest.mark.keras
@support.requires_corpus
def test_finn_executor_computes_what_qkeras_predicts_after_every_step(through_finn) -> None:
    reference, run = through_finn
    assert set(run.outputs) == {"qonnx_to_finn", "tidy_up", "streamline", "convert_to_hw"}
    for step, (output,) in run.outputs.items():
        np.testing.assert_allclose(output, reference, rtol=1e-6, atol=1e-6, err_msg=step)


# int8 / uint8 TFLite models: (file, keep_io_layout) -> the last step FINN reaches. The uint8
# CNN's input thresholds and output scale sit between Transposes that FINN's conv lowering
# cancels (qonnx_ingest/targets/finn_layout.py), with NCHW I/O and with TFLite's NHWC I/O.
TFLITE = {
    ("tflm__hello_world_int8.tflite", False): "specialize_layers",
    ("t2o__conv.uint8.tflite", False): "specialize_layers",
    ("t2o__conv.uint8.tflite", True): "specialize_layers",
    ("t2o__depthwise-conv.uint8.tflite", False): "specialize_layers",
    # its Convs on integers (finn_integer_conv): FINN's own float re-association was 1-3 off
    ("t2o__mobilenet_v1_0.25_128_quant.tflite", False): "specialize_layers",
}


@pytest.fixture(scope="module", params=sorted(TFLITE), ids=lambda p: f"{p[0]}-keep{int(p[1])}")
def tflite_through_finn(request):
    """The TFLite interpreter's dequantized integer outputs and FINN's run of the model's FINN
    form, on the same seeded inputs (on the input's grid)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    import tflite2qonnx

    name, keep = request.param
    path = support.CORPUS / "tflite" / name
    proto = tflite2qonnx.convert(path, batch_size=1, keep_io_layout=keep, format="finn")
    interpreter = Interpreter(
        model_path=str(path),
        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    interpreter.allocate_tensors()
    (inp,), (out,) = interpreter.get_input_details(), interpreter.get_output_details()
    info = np.iinfo(inp["dtype"])
    rng = np.random.default_rng(3)
    q = rng.integers(info.min, info.max + 1, inp["shape"]).astype(inp["dtype"])
    interpreter.set_tensor(inp["index"], q)
    interpreter.invoke()
    (s_in, z_in), (s_out, z_out) = inp["quantization"], out["quantization"]
    reference = (interpreter.get_tensor(out["index"]).astype(np.float32) - z_out) * np.float32(
        s_out
    )
    x = (q.astype(np.float32) - z_in) * np.float32(s_in)
    if not keep:  # the converted graph takes (and gives) images NCHW
        x = x.transpose(0, 3, 1, 2) if x.ndim == 4 else x
        reference = reference.transpose(0, 3, 1, 2) if reference.ndim == 4 else reference
    run = run_finn(proto, {proto.graph.input[0].name: np.ascontiguousarray(x)})
    return request.param, reference, run


@support.requires_corpus
def test_tflite_integer_models_reach_the_step_finn_has_layers_for(tflite_through_finn) -> None:
    name, _, run = tflite_through_finn
    assert run.reached == TFLITE[name], run.stopped
    if run.reached == "specialize_layers":  # every layer of the partition is FINN's
        assert all(op.endswith(("_hls", "_rtl")) for op in run.ops["specialize_layers"])


@support.requires_corpus
def test_finn_executor_equals_the_tflite_interpreter_after_every_step(tflite_through_finn):
    _, reference, run = tflite_through_finn
    assert {"qonnx_to_finn", "tidy_up", "streamline", "convert_to_hw"} <= set(run.outputs)
    for step, (output,) in run.outputs.items():
        np.testing.assert_array_equal(output, reference, err_msg=step)


def test_cli_format_finn_writes_the_thresholds(tmp_path) -> None:
    """The command line applies the form (it once wrote plain QONNX for --format finn)."""
    from qonnx_ingest.cli.command import make_parser, run

    source = tmp_path / "model.h5"
    source.write_bytes(b"input")
    model = _quant_model(4, True, "ROUND", [_STEP] * 2)
    parser = make_parser("tool", "test tool", "the model")
    assert run(parser, lambda args: model, [str(source), "--format", "finn"]) == 0
    written = onnx.load(source.with_suffix(".onnx"))
    assert [n.op_type for n in written.graph.node] == ["MultiThreshold", "Mul"]


def test_the_finn_form_is_the_same_bytes_on_every_run() -> None:
    """qonnx's shape inference names the copies of shared constants at random; the saved form
    must not change from one run to the next (reviews diff it, caches hash it)."""
    import tflite2qonnx

    source = support.CORPUS / "tflite" / "tflm__hello_world_int8.tflite"
    first, second = (tflite2qonnx.convert(source, format="finn") for _ in range(2))
    assert first.SerializeToString() == second.SerializeToString()
