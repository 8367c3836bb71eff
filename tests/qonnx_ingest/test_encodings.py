"""--encodings: AIMET quantization encodings, version 2.0.0 (seed 001).

``validate`` is written from the seed's field table (section 1.1), not from the exporter:
required ``name`` / ``output_dtype`` / ``y_scale``, optional ``y_zero_point`` / ``axis`` /
``block_size``, the ten allowed dtypes, float zero points only for 2-bit encodings, ``axis``
required for per-channel lists. Values are compared with the Quant nodes' own initializers.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from quant_models import activation_model, finished, run_ort

from qonnx_ingest.cli.command import make_parser, run
from qonnx_ingest.encodings import aimet_encodings
from qonnx_ingest.errors import ConversionError, ConversionWarning
from qonnx_ingest.execute import execute_qonnx
from qonnx_ingest.quant import make_quant
from support import CORPUS, requires_corpus

# seed 001, 1.1: "One of: int2, uint2, int4, uint4, int8, uint8, int16, uint16, int32, uint32"
DTYPES = {f"{sign}int{bits}" for sign in ("", "u") for bits in (2, 4, 8, 16, 32)}
FIELDS = {"name", "output_dtype", "y_scale", "y_zero_point", "axis", "block_size"}


def _flat(value) -> list:
    return [v for item in value for v in _flat(item)] if isinstance(value, list) else [value]


def _dtype_range(dtype: str) -> tuple[int, int]:
    bits = int(dtype.lstrip("uint"))
    return (0, 2**bits - 1) if dtype.startswith("u") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def validate(document: dict) -> None:
    """Assert ``document`` is an AIMET 2.0.0 encodings file as the seed's table defines it."""
    assert set(document) == {"version", "encodings"}
    assert document["version"] == "2.0.0"
    assert isinstance(document["encodings"], list)
    for entry in document["encodings"]:
        validate_entry(entry)


def validate_entry(entry: dict) -> None:
    assert set(entry) <= FIELDS, set(entry) - FIELDS
    assert isinstance(entry["name"], str) and entry["name"]  # mandatory
    assert entry["output_dtype"] in DTYPES  # mandatory
    scale = entry["y_scale"]  # mandatory: float or nested list of float
    scales = _flat(scale)
    assert scales and all(isinstance(s, float) and s > 0 for s in scales), scale
    per_channel = isinstance(scale, list)
    # "axis: Required for per-channel and per-block quantization"
    assert ("axis" in entry) == per_channel
    if per_channel:
        assert isinstance(entry["axis"], int) and not isinstance(entry["axis"], bool)
    if "y_zero_point" in entry:  # optional: int, float, or nested list
        zp = entry["y_zero_point"]
        assert isinstance(zp, list) == per_channel
        zps = _flat(zp)
        assert len(zps) == len(scales)
        two_bit = entry["output_dtype"].endswith("int2")
        # "May be float for 2-bit encodings"
        assert all(isinstance(z, int) or (two_bit and isinstance(z, float)) for z in zps)
        lo, hi = _dtype_range(entry["output_dtype"])
        assert all(lo <= z <= hi for z in zps)
    assert "block_size" not in entry  # nothing here is per-block


def by_name(document: dict) -> dict[str, dict]:
    names = [e["name"] for e in document["encodings"]]
    assert len(names) == len(set(names))
    return {e["name"]: e for e in document["encodings"]}


def quant_params(
    model: onnx.ModelProto,
) -> dict[str, tuple[onnx.NodeProto, np.ndarray, np.ndarray]]:
    """quantized tensor -> (node, flat scale, flat zero point), read straight from the graph."""
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    out = {}
    for node in model.graph.node:
        if node.op_type in ("Quant", "BipolarQuant"):
            zp = inits[node.input[2]] if node.op_type == "Quant" else np.zeros(1)
            out[node.input[0]] = (node, inits[node.input[1]].reshape(-1), zp.reshape(-1))
    return out


# ----------------------------------------------------------------------------- the corpus


@pytest.fixture(scope="module")
def person_detect():
    from tflite2qonnx.api import convert

    path = CORPUS / "tflite" / "tflm__person_detect.tflite"
    if not path.exists():
        pytest.skip(f"{path.name} not in the corpus")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the reader's note on the file's rank-1 bias axes
        return convert(path)


@requires_corpus
def test_per_channel_corpus_model_is_valid_and_states_each_quant(person_detect):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConversionWarning)  # int8/int32 only: all exact
        document = aimet_encodings(person_detect)
    validate(document)
    encodings = by_name(document)
    params = quant_params(person_detect)
    assert set(encodings) == set(params)  # one encoding per quantized tensor, named after it
    shapes = {t.name: list(t.dims) for t in person_detect.graph.initializer}
    per_channel = 0
    for name, entry in encodings.items():
        node, scale, zero_point = params[name]
        bits = int(numpy_helper.to_array(
            next(t for t in person_detect.graph.initializer if t.name == node.input[3])
        ))  # fmt: skip
        signed = next(a.i for a in node.attribute if a.name == "signed")
        assert entry["output_dtype"] == f"{'' if signed else 'u'}int{bits}"
        if "axis" in entry:
            per_channel += 1
            # the axis indexes the named tensor, one scale per slice
            assert len(entry["y_scale"]) == shapes[name][entry["axis"]] == scale.size
            assert entry["y_scale"] == [float(s) for s in scale]
        else:
            assert scale.size == 1 and entry["y_scale"] == float(scale[0])
        if np.any(zero_point != 0):
            assert entry["y_zero_point"] == int(zero_point[0])  # activations: per tensor
        else:
            assert "y_zero_point" not in entry  # omitted when all zero
    assert per_channel == 56  # 28 conv weights + their 28 int32 biases


@requires_corpus
def test_cli_writes_a_valid_encodings_file(tmp_path, capsys):
    from tflite2qonnx.cli import main

    out, enc = tmp_path / "m.onnx", tmp_path / "m.encodings.json"
    model = CORPUS / "tflite" / "t2o__conv.uint8.tflite"
    assert main([str(model), "-o", str(out), "--encodings", str(enc)]) == 0
    document = json.loads(enc.read_text())
    validate(document)
    # uint8 input with zero point 100 (the TFLite file's input quantization)
    assert by_name(document)["input"]["output_dtype"] == "uint8"
    assert by_name(document)["input"]["y_zero_point"] == 100
    assert out.exists()


# ----------------------------------------------------------------------------- hand-built


def odd_widths_model() -> onnx.ModelProto:
    """3-bit input (zp -1), 5-bit weights, 6-bit unsigned activation, 4-bit per-channel
    weights and an 8-bit output with zero point 5: three widths AIMET has no dtype for."""
    graph = helper.make_graph(
        [],
        "odd",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
    )
    make_quant("x", "x_q", 0.5, -1, 3, name="in3").add_to(graph)
    w1 = np.arange(-6, 6, dtype=np.float32).reshape(4, 3) * 0.125
    graph.initializer.append(numpy_helper.from_array(w1, "w1"))
    make_quant("w1", "w1_q", 0.125, 0, 5, name="w5").add_to(graph)
    graph.node.append(helper.make_node("MatMul", ["x_q", "w1_q"], ["h"], name="fc1"))
    graph.node.append(helper.make_node("Relu", ["h"], ["r"], name="relu"))
    make_quant("r", "r_q", 0.1, 0, 6, signed=False, name="act6").add_to(graph)
    w2 = np.array([[0.5, -0.25], [1.0, 0.75], [-1.5, 0.25]], np.float32)
    graph.initializer.append(numpy_helper.from_array(w2, "w2"))
    make_quant("w2", "w2_q", [0.25, 0.125], 0, 4, axis=1, x_shape=[3, 2], name="w4").add_to(graph)
    graph.node.append(helper.make_node("MatMul", ["r_q", "w2_q"], ["z"], name="fc2"))
    make_quant("z", "y", 0.05, 5, 8, name="out8").add_to(graph)
    return finished(graph)


def test_widths_without_an_aimet_dtype_take_the_next_one_with_one_warning():
    with pytest.warns(ConversionWarning) as caught:
        document = aimet_encodings(odd_widths_model())
    validate(document)
    (warning,) = caught
    message = str(warning.message)
    assert message.startswith("3 quantized tensors have no exact AIMET encoding")
    for listed in ("x (3 bits -> int4)", "w1 (5 bits -> int8)", "r (6 bits -> uint8)"):
        assert listed in message
    assert "w2" not in message and "z (" not in message
    e = by_name(document)
    assert e["x"] == {"name": "x", "output_dtype": "int4", "y_scale": 0.5, "y_zero_point": -1}
    assert e["w1"] == {"name": "w1", "output_dtype": "int8", "y_scale": 0.125}
    assert e["r"] == {"name": "r", "output_dtype": "uint8", "y_scale": float(np.float32(0.1))}
    assert e["w2"] == {"name": "w2", "output_dtype": "int4", "y_scale": [0.25, 0.125], "axis": 1}
    assert e["z"] == {
        "name": "z", "output_dtype": "int8", "y_scale": float(np.float32(0.05)), "y_zero_point": 5
    }  # fmt: skip


def test_strict_refuses_what_it_would_approximate():
    with pytest.raises(ConversionError, match=r"3 quantized tensors .*--strict refuses them"):
        aimet_encodings(odd_widths_model(), strict=True)


def test_encoding_means_what_the_quant_node_computes():
    """QuantizeLinear/DequantizeLinear with an exact-width encoding's y_scale, y_zero_point
    and dtype (the 2.0.0 mapping) reproduce the Quant node: same zero-point convention."""
    model = activation_model(16, relu=False, scale=0.05, zero_point=-7, bits=8)
    (entry,) = aimet_encodings(model)["encodings"]
    assert entry == {"name": "x", "output_dtype": "int8", "y_scale": float(np.float32(0.05)),
                     "y_zero_point": -7}  # fmt: skip
    qdq = helper.make_graph(
        [
            helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
            helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"]),
        ],
        "qdq",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])],
        [
            numpy_helper.from_array(np.array(entry["y_scale"], np.float32), "s"),
            numpy_helper.from_array(np.array(entry["y_zero_point"], np.int8), "z"),
        ],
    )
    qdq_model = helper.make_model(qdq, opset_imports=[helper.make_opsetid("", 13)])
    x = np.random.default_rng(1).uniform(-8, 8, (1, 16)).astype(np.float32)  # clips both ends
    np.testing.assert_array_equal(
        run_ort(qdq_model, {"x": x})["y"], execute_qonnx(model, {"x": x})["y"]
    )


def test_bipolar_is_the_int2_custom_grid():
    with pytest.warns(ConversionWarning, match=r"bipolar -> int2 custom grid"):
        (entry,) = aimet_encodings(activation_model(bipolar=True, scale=0.5))["encodings"]
    validate_entry(entry)
    # seed 001: custom grid [-3, -1, 1, 3] is int2 with y_zero_point -0.5; BipolarQuant's
    # {-s, +s} with s = 0.5 is y_scale * (q - zp) for q in {-1, 0} with y_scale 2s = 1.0:
    # 1.0 * (-1 + 0.5) = -0.5 and 1.0 * (0 + 0.5) = +0.5
    assert entry == {"name": "r", "output_dtype": "int2", "y_scale": 1.0, "y_zero_point": -0.5}


def test_narrow_activation_warns_narrow_weight_does_not():
    with pytest.warns(ConversionWarning, match=r"narrow range \[-127, 127\] -> full int8"):
        aimet_encodings(activation_model(scale=0.5, narrow=True))
    graph = helper.make_graph(
        [], "w", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]
    )
    graph.initializer.append(numpy_helper.from_array(np.array([1.0, -1.0], np.float32), "w"))
    make_quant("w", "y", 0.5, 0, 8, narrow=True, name="w_quant").add_to(graph)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConversionWarning)  # a constant never reaches -128
        (entry,) = aimet_encodings(finished(graph))["encodings"]
    assert entry["output_dtype"] == "int8"


def test_wider_than_32_bits_is_an_error_naming_the_node():
    graph = helper.make_graph(
        [], "w", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]
    )
    graph.initializer.append(numpy_helper.from_array(np.array([1.0, -1.0], np.float32), "w"))
    make_quant("w", "y", 0.5, 0, 40, name="wide_quant").add_to(graph)
    with pytest.raises(ConversionError, match=r"Quant wide_quant: 40-bit quantization"):
        aimet_encodings(finished(graph))


# ----------------------------------------------------------------------------- the CLI side


def run_tool(tmp_path, *options):
    source = tmp_path / "model.bin"
    source.write_bytes(b"stand-in source")
    parser = make_parser("tool", "test tool", "the model")
    return run(parser, lambda args: odd_widths_model(), [str(source), *map(str, options)])


def test_cli_warns_once_and_writes(tmp_path, capsys):
    enc = tmp_path / "enc.json"
    assert run_tool(tmp_path, "--encodings", enc) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tool: warning: 3 quantized tensors")
    validate(json.loads(enc.read_text()))


def test_cli_strict_refuses_and_writes_nothing(tmp_path, capsys):
    enc = tmp_path / "enc.json"
    assert run_tool(tmp_path, "--encodings", enc, "--strict") == 1
    err = capsys.readouterr().err
    assert err.startswith("tool: error: encodings: 3 quantized tensors") and "--strict" in err
    assert not enc.exists() and not (tmp_path / "model.onnx").exists()
