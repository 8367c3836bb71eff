"""``--format hls4ml`` (qonnx_ingest.targets.hls4ml): constant quantizers rewritten as their
values on an exact power-of-two grid, activation quantizers hls4ml cannot round refused; and
the QKeras corpus models this lets through hls4ml 1.3.0 (Vivado, io_parallel, g++), compared
with QKeras's predict."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.execute import execute_qonnx
from qonnx_ingest.targets.hls4ml import to_hls4ml
from support import CORPUS, requires_corpus

DOMAIN = "qonnx.custom_op.general"


def _quant_model(x_const: np.ndarray | None, scale, rounding: str, bits: float = 4.0):
    """y = Quant(w) @ ... : a MatMul of the input with a (constant or computed) Quant."""
    inits = [
        numpy_helper.from_array(np.asarray(scale, np.float32), "s"),
        numpy_helper.from_array(np.float32(0), "z"),
        numpy_helper.from_array(np.float32(bits), "b"),
    ]
    attrs = {"signed": 1, "narrow": 0, "rounding_mode": rounding}
    if x_const is not None:
        inits.append(numpy_helper.from_array(x_const.astype(np.float32), "w"))
        nodes = [
            helper.make_node(
                "Quant", ["w", "s", "z", "b"], ["wq"], name="wq", domain=DOMAIN, **attrs
            ),
            helper.make_node("MatMul", ["x", "wq"], ["y"], name="mm"),
        ]
        shape = [1, x_const.shape[0]]
        out = [1, x_const.shape[1]]
    else:
        nodes = [
            helper.make_node(
                "Quant", ["x", "s", "z", "b"], ["y"], name="act", domain=DOMAIN, **attrs
            )
        ]
        shape = out = [1, 4]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)],
        inits,
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(DOMAIN, 1)]
    )


def _weight(model: onnx.ModelProto) -> tuple[np.ndarray, dict]:
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    (node,) = [n for n in model.graph.node if n.op_type == "Quant"]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    return [inits[n] for n in node.input], attrs


def test_half_up_weight_stored_quantized_on_power_of_two_grid():
    """alpha='auto'-like: scale 3/8 per column (not a power of two), exact ties rounding away
    from zero. The form holds the HALF_UP values (derived by hand here; half to even would
    give 2, -2, 0, 3) under one 2**-k grid, with ROUND."""
    w = np.array([[0.5625, -0.5625], [0.1875, 1.0]], np.float32)  # w / s: 1.5, -1.5, 0.5, 2.67
    model = _quant_model(w, np.array([0.375, 0.375], np.float32), "HALF_UP")
    (x, s, z, b), attrs = _weight(to_hls4ml(model))
    expected = np.float32(0.375) * np.array([[2, -2], [1, 3]], np.float32)
    np.testing.assert_array_equal(x, expected)
    assert attrs["rounding_mode"] == b"ROUND" and z == 0
    exponent = -np.log2(s)
    assert exponent == round(exponent)  # a power of two
    assert np.all(x / s == np.round(x / s)) and np.abs(x / s).max() < 2 ** (b - 1)
    names = {i.name for i in to_hls4ml(model).graph.initializer}
    assert "w" not in names and "s" not in names  # the originals, no longer read, are gone
    probe = {"x": np.array([[1.0, -2.0]], np.float32)}
    np.testing.assert_array_equal(
        execute_qonnx(to_hls4ml(model), probe)["y"], probe["x"] @ expected
    )


def test_power_of_two_round_weight_left_as_hls4ml_reads_it():
    w = np.array([[0.3, -0.7], [0.1, 0.9]], np.float32)
    model = _quant_model(w, np.float32(0.25), "ROUND")
    assert to_hls4ml(model).graph == model.graph


def test_half_up_weight_on_power_of_two_scale_takes_the_finest_grid_its_values_need():
    w = np.array([[0.375, -0.625], [0.125, 0.9]], np.float32)  # / 0.25: 1.5, -2.5, 0.5, 3.6
    model = _quant_model(w, np.float32(0.25), "HALF_UP")
    (x, s, _, b), _ = _weight(to_hls4ml(model))
    np.testing.assert_array_equal(x, np.array([[0.5, -0.75], [0.25, 1.0]], np.float32))
    assert s == 0.25 and b == 4  # -3 .. 4 on 0.25: signed 4 bits


# value / scale = 1.5 rounds to 2 steps: 16 = 2**4, and 2 * float32(0.1) = 13421773 * 2**-26
# (an odd integer times 2**-26)
@pytest.mark.parametrize(
    "scale, value, grid", [(8.0, 12.0, 16.0), (np.float32(0.1), 0.15, 2.0**-26)]
)
def test_grid_is_the_coarsest_power_of_two_holding_the_values(scale, value, grid):
    w = np.full((2, 2), value, np.float32)
    (x, s, _, _), _ = _weight(to_hls4ml(_quant_model(w, np.float32(scale), "HALF_UP")))
    np.testing.assert_array_equal(x, np.float32(2 * np.float32(scale)))
    assert s == grid


def test_half_up_activation_refused_naming_node():
    model = _quant_model(None, np.float32(0.5), "HALF_UP")
    with pytest.raises(ConversionError, match="HALF_UP.*hls4ml") as failure:
        to_hls4ml(model)
    assert "act" in str(failure.value)


def test_source_model_not_changed():
    model = _quant_model(np.ones((2, 2), np.float32) * 0.5625, np.float32(0.375), "HALF_UP")
    before = model.SerializeToString()
    to_hls4ml(model)
    assert model.SerializeToString() == before


def test_cli_format_hls4ml_writes_the_form_or_refuses_with_no_output(tmp_path, capsys):
    from qonnx_ingest.cli.command import make_parser, run

    source = tmp_path / "model.h5"
    source.write_bytes(b"input")
    weight = _quant_model(np.full((2, 2), 0.5625, np.float32), np.float32(0.375), "HALF_UP")
    parser = make_parser("tool", "test tool", "the model")
    assert run(parser, lambda args: weight, [str(source), "--format", "hls4ml"]) == 0
    (x, _, _, _), attrs = _weight(onnx.load(source.with_suffix(".onnx")))
    np.testing.assert_array_equal(x, np.full((2, 2), 0.75, np.float32))  # 1.5 -> 2 steps
    assert attrs["rounding_mode"] == b"ROUND"
    source.with_suffix(".onnx").unlink()
    activation = _quant_model(None, np.float32(0.5), "HALF_UP")
    assert run(parser, lambda args: activation, [str(source), "--format", "hls4ml"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Quant act: rounds HALF_UP" in err
    assert not source.with_suffix(".onnx").exists()


@requires_corpus
def test_tflite_requantizations_proven_exact_on_hello_world_and_equal_to_interpreter():
    """hello_world's four HALF_UP requantizations are each proven tie-free (its int8 input's
    grid; three Dense accumulators whose lattices miss every tie): the form writes ROUND and
    computes the interpreter's int8 outputs on the whole input domain, all 256 inputs."""
    import json

    import tflite2qonnx
    from qonnx_ingest.targets.hls4ml import EXACT, FORM_KEY
    from tflite2qonnx.reference_paths import BUILTIN_REF, open_path

    path = CORPUS / "tflite" / "tflm__hello_world_int8.tflite"
    form = tflite2qonnx.convert(path, channels_last=True, format="hls4ml")
    record = json.loads({p.key: p.value for p in form.metadata_props}[FORM_KEY])
    rules = sorted(reason.split(":")[0] for reason in record[EXACT].values())
    assert rules == ["accumulator"] * 3 + ["input grid"]
    io = json.loads({p.key: p.value for p in form.metadata_props}["tflite2qonnx.io_quantization"])
    (i_name,), (o_name,) = [v.name for v in form.graph.input], [v.name for v in form.graph.output]
    interpreter = open_path(path, BUILTIN_REF)
    (inp,), (out,) = interpreter.get_input_details(), interpreter.get_output_details()
    for q in np.arange(-128, 128, dtype=np.int8):
        interpreter.set_tensor(inp["index"], q.reshape(inp["shape"]))
        interpreter.invoke()
        expected = interpreter.get_tensor(out["index"]).astype(np.float64)
        x = np.float32(io[i_name]["scale"][0] * (float(q) - io[i_name]["zero_point"][0]))
        y = execute_qonnx(form, {i_name: np.full((1, 1), x, np.float32)})[o_name]
        steps = np.round(y / io[o_name]["scale"][0]) + io[o_name]["zero_point"][0]
        np.testing.assert_array_equal(steps, expected, err_msg=f"input {q}")


@requires_corpus
def test_tflite_unproven_requantization_refused_naming_its_quant():
    """The keyword spotter's RoundingDivideByPOT (a Quant of scale 64 reading a Cast of a
    Floor) matches no rule: refused by name, nothing approximated."""
    import tflite2qonnx

    path = CORPUS / "tflite" / "tflm__keyword_scrambled.tflite"
    with pytest.raises(ConversionError, match="rounds HALF_UP; hls4ml 1.3.0 has only ROUND") as e:
        tflite2qonnx.convert(path, channels_last=True, format="hls4ml")
    assert "Quant divide_by_pot_quant" in str(e.value)


# QKeras corpus models hls4ml already takes as converted (tests/qkeras2qonnx/
# test_hls4ml_acceptance.py compiles them): the form leaves them as they are
AS_CONVERTED = {"qkeras_3layer.json": "qkeras_3layer_weights.h5"}


@pytest.mark.keras
@requires_corpus
@pytest.mark.parametrize("source", sorted(AS_CONVERTED))
def test_models_hls4ml_already_reads_are_left_as_they_are(source):
    from qkeras2qonnx import convert

    weights = AS_CONVERTED[source]
    folder = CORPUS / "qkeras"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = convert(folder / source, weights=weights and folder / weights, channels_last=True)
    assert to_hls4ml(model).graph == model.graph


# ---- corpus models through hls4ml ----------------------------------------------------------

# QKeras corpus models the form takes through hls4ml 1.3.0 (both refused as converted:
# "Rounding mode HALF_UP not supported in Quant node"): the default precision holding the
# float BatchNormalization scales between quantizers exactly, and the input grid (bits, int)
HLS4ML_REACHED = {
    "AD03_autoqkeras_qbestModel.h5": "fixed<64,24>",
    "qmodel_oct24_savedmodel": "fixed<32,16>",
}
SAMPLES = 32


@pytest.fixture(scope="module", params=sorted(HLS4ML_REACHED))
def compiled(request, tmp_path_factory):
    import hls4ml
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean
    from qonnx.transformation.gemm_to_matmul import GemmToMatMul
    from qonnx.util.cleanup import cleanup_model

    from qkeras2qonnx import convert
    from qkeras2qonnx.environment.load import load_model

    name = request.param
    source = CORPUS / "qkeras" / name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        form = convert(source, channels_last=True, format="hls4ml")
        prepared = cleanup_model(ModelWrapper(form))
        prepared = cleanup_model(
            prepared.transform(ConvertToChannelsLastAndClean()).transform(GemmToMatMul())
        )
        config = hls4ml.utils.config.config_from_onnx_model(
            prepared, granularity="name", backend="Vivado", default_precision=HLS4ML_REACHED[name]
        )
        config["LayerName"][prepared.graph.input[0].name]["Precision"]["result"] = "fixed<8,2>"
        hls_model = hls4ml.converters.convert_from_onnx_model(
            prepared,
            output_dir=str(tmp_path_factory.mktemp("hls4ml_form")),
            io_type="io_parallel",
            backend="Vivado",
            hls_config=config,
        )
        hls_model.compile()
    return name, load_model(source), hls_model


@pytest.mark.hls4ml
@pytest.mark.keras
@requires_corpus
def test_hls4ml_compiles_form_and_predicts_as_qkeras(compiled):
    name, keras_model, hls_model = compiled
    width = keras_model.input_shape[-1]
    # inputs on hls4ml's input type fixed<8,2>: multiples of 2**-6 in [-2, 2)
    q = np.random.default_rng(7).integers(-128, 128, (SAMPLES, width))
    x = (q * 2.0**-6).astype(np.float32)
    expected = keras_model.predict(x, verbose=0)
    actual = np.asarray(hls_model.predict(np.ascontiguousarray(x))).reshape(expected.shape)
    # QKeras computes in float32; hls4ml exactly: within float32 rounding of the outputs
    scale = float(np.abs(expected).max())
    diff = np.abs(actual.astype(np.float64) - expected)
    print(
        f"{name}: max |hls4ml - QKeras| {diff.max():g} of {scale:g}, {np.mean(diff == 0):.1%} equal"
    )
    assert scale > 0 and len(np.unique(expected)) > 4
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-6 * scale, err_msg=name)
