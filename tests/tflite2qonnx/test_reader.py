"""Tests for tflite2qonnx.reader.

Facts are checked against independent sources: the ai-edge-litert interpreter (which parses the
flatbuffer with its own C++ code), known architecture facts of the corpus models, and small
models built here with the flatbuffers Builder, whose contents the test itself chose.
"""

from __future__ import annotations

import struct
from pathlib import Path

import flatbuffers
import numpy as np
import pytest
import tflite
from tflite_writer import byte_vector, int_vector, offset_vector, sparsity_parameters

import support
from qonnx_ingest.errors import InputError
from tflite2qonnx.reader import read_model

CORPUS = support.CORPUS / "tflite"
CORPUS_FILES = sorted(CORPUS.glob("*.tflite"))
REFUSED_BY_INTERPRETER = {"tflm__person_detect.tflite"}
LOADABLE = [p for p in CORPUS_FILES if p.name not in REFUSED_BY_INTERPRETER]

pytestmark = pytest.mark.skipif(not CORPUS_FILES, reason=f"no corpus at {CORPUS}")


def _corpus(name: str) -> Path:
    return CORPUS / name


def _interpreter(**kwargs):
    # No default (XNNPACK) delegate: it rewrites the graph and refuses some tiny test models.
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    return Interpreter(
        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES, **kwargs
    )


def _assert_one_line_error(exc_info: pytest.ExceptionInfo, *fragments: str) -> str:
    text = str(exc_info.value)
    assert "\n" not in text
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in {text!r}"
    return text


# ----------------------------------------------------------------------------- interpreter


@pytest.mark.parametrize("path", LOADABLE, ids=lambda p: p.stem)
def test_subgraph0_matches_interpreter(path: Path) -> None:
    interp = _interpreter(model_path=str(path))
    model = read_model(path)
    sg = model.subgraphs[0]
    details = interp.get_tensor_details()
    assert len(details) == len(sg.tensors)

    compared = 0
    for d in details:
        t = sg.tensors[d["index"]]
        assert t.index == d["index"]
        assert t.name == d["name"]
        assert t.shape == tuple(int(v) for v in d["shape"])
        assert t.shape_signature == tuple(int(v) for v in d["shape_signature"])
        assert t.dtype == np.dtype(d["dtype"]).name
        qp = d["quantization_parameters"]
        if t.quantization is None:
            assert qp["scales"].size == 0
        else:
            np.testing.assert_array_equal(t.quantization.scale, qp["scales"])
            np.testing.assert_array_equal(t.quantization.zero_point, qp["zero_points"])
            assert t.quantization.quantized_dimension == qp["quantized_dimension"]
            assert t.quantization.per_axis == (qp["scales"].size > 1)
        try:
            value = interp.get_tensor(d["index"])
        except ValueError:  # activation tensors are not readable before allocate_tensors()
            assert t.data is None, f"{t.name} has data but the interpreter has none"
            continue
        if value.size == 0 and t.data is None:
            continue  # zero-element tensors (LSTM intermediates) read as empty either way
        # Before allocation only read-only (constant) tensors are readable.
        assert t.data is not None, f"interpreter has a constant for {t.name}, reader has none"
        assert t.data.dtype == value.dtype
        np.testing.assert_array_equal(t.data, value)
        compared += 1
    assert compared == sum(t.data is not None for t in sg.tensors) > 0

    ops = interp._get_ops_details()
    assert [o["op_name"] for o in ops] == [op.name for op in sg.operators]
    assert [tuple(int(i) for i in o["inputs"]) for o in ops] == [op.inputs for op in sg.operators]
    assert [tuple(int(i) for i in o["outputs"]) for o in ops] == [op.outputs for op in sg.operators]

    expected_sigs = interp._get_full_signature_list()
    assert {s.key: {"inputs": s.inputs, "outputs": s.outputs} for s in model.signature_defs} == {
        k: {"inputs": dict(v["inputs"]), "outputs": dict(v["outputs"])}
        for k, v in expected_sigs.items()
    }


def test_constant_data_is_read_only() -> None:
    model = read_model(_corpus("tflm__hello_world_int8.tflite"))
    data = next(t.data for t in model.subgraphs[0].tensors if t.data is not None)
    with pytest.raises(ValueError):
        data.flat[0] = 1


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview, str])
def test_source_kinds_agree(kind) -> None:
    path = _corpus("t2o__conv.uint8.tflite")
    raw = path.read_bytes()
    source = str(path) if kind is str else kind(raw)
    model = read_model(source)
    reference = read_model(path)
    assert model.source_name == (str(path) if kind is str else "<bytes>")
    for a, b in zip(model.subgraphs[0].tensors, reference.subgraphs[0].tensors, strict=True):
        assert (a.name, a.shape, a.dtype) == (b.name, b.shape, b.dtype)
        if a.data is not None:
            np.testing.assert_array_equal(a.data, b.data)


# ----------------------------------------------------------------------------- known facts


def test_person_detect_reads_with_per_axis_int8_conv() -> None:
    path = _corpus("tflm__person_detect.tflite")
    model = read_model(path)
    sg = model.subgraphs[0]
    conv = next(op for op in sg.operators if op.name == "CONV_2D")
    weights = sg.tensors[conv.inputs[1]]
    assert weights.dtype == "int8"
    assert weights.quantization is not None and weights.quantization.per_axis
    out_channels = weights.shape[0]
    assert len(weights.quantization.scale) == out_channels
    assert weights.quantization.quantized_dimension == 0
    assert weights.data is not None and weights.data.shape == weights.shape

    # Quirk of this TOCO file: depthwise biases (rank 1) carry quantized_dimension 3, copied
    # from the weights. That is why the interpreter refuses the file; the reader uses axis 0.
    raw = tflite.Model.GetRootAsModel(path.read_bytes(), 0).Subgraphs(0)
    odd = [
        i
        for i in range(raw.TensorsLength())
        if (q := raw.Tensors(i).Quantization()) is not None
        and q.ScaleLength() > 1
        and q.QuantizedDimension() >= raw.Tensors(i).ShapeLength()
    ]
    assert odd, "expected the known quantized_dimension quirk in person_detect"
    for i in odd:
        t = sg.tensors[i]
        assert len(t.shape) == 1 and t.quantization.quantized_dimension == 0
        assert len(t.quantization.scale) == t.shape[0]


def test_hello_world_facts() -> None:
    model = read_model(_corpus("tflm__hello_world_int8.tflite"))
    sg = model.subgraphs[0]
    assert [op.name for op in sg.operators] == ["FULLY_CONNECTED"] * 3
    inp = sg.tensors[sg.inputs[0]]
    assert inp.dtype == "int8" and inp.shape == (1, 1) and inp.shape_signature == (-1, 1)
    assert model.version == 3
    fc = sg.operators[0]
    assert fc.options_type == "FullyConnectedOptions"
    assert fc.options["fused_activation_function"] == "RELU"
    assert fc.options["weights_format"] == "DEFAULT"


def test_coral_mobilenet_v2_facts() -> None:
    path = _corpus("coral__tf2_mobilenet_v2_1.0_224_ptq.tflite")
    model = read_model(path)
    sg = model.subgraphs[0]
    convs = [op for op in sg.operators if op.name == "CONV_2D"]
    # MobileNetV2 stem: 3x3 conv, 32 filters, stride 2, SAME padding, ReLU6.
    stem = convs[0]
    assert sg.tensors[stem.inputs[1]].shape == (32, 3, 3, 3)
    assert stem.options_type == "Conv2DOptions"
    assert stem.options["stride_w"] == 2 and stem.options["stride_h"] == 2
    assert stem.options["padding"] == "SAME"
    assert stem.options["fused_activation_function"] == "RELU6"
    assert stem.options["dilation_w_factor"] == 1
    for op in convs:
        assert op.options["padding"] in ("SAME", "VALID")
        w = sg.tensors[op.inputs[1]]
        assert w.quantization.per_axis and w.quantization.quantized_dimension == 0
        assert len(w.quantization.scale) == w.shape[0]
    # Metadata buffers are taken verbatim from the file.
    version = model.metadata["min_runtime_version"]
    assert version in path.read_bytes()
    assert version.rstrip(b"\0").decode().replace(".", "").isdigit()


def test_fp16_constant_behind_dequantize() -> None:
    model = read_model(_corpus("t2o__conv-quant-fp16.float32.tflite"))
    sg = model.subgraphs[0]
    dequant = [op for op in sg.operators if op.name == "DEQUANTIZE"]
    assert dequant
    for op in dequant:
        src = sg.tensors[op.inputs[0]]
        assert src.dtype == "float16" and src.data is not None and src.data.dtype == np.float16
        assert sg.tensors[op.outputs[0]].dtype == "float32"
    conv = next(op for op in sg.operators if op.name == "CONV_2D")
    assert {sg.tensors[i].name for i in conv.inputs[1:]} == {
        sg.tensors[op.outputs[0]].name for op in dequant
    }


def test_selfie_custom_transpose_conv() -> None:
    model = read_model(_corpus("mediapipe__selfie_segmentation.tflite"))
    sg = model.subgraphs[0]
    custom = [op for op in sg.operators if op.opcode.builtin == "CUSTOM"]
    assert [op.name for op in custom] == ["Convolution2DTransposeBias"]
    op = custom[0]
    assert op.opcode.custom_code == "Convolution2DTransposeBias"
    assert op.options_type == "" and op.options == {}
    # MediaPipe's op takes TfLiteTransposeConvParams {padding, stride_w, stride_h} as raw ints;
    # the strides must explain the spatial upsampling between input and output.
    padding, stride_w, stride_h = struct.unpack("<3i", op.custom_options)
    _, in_h, in_w, _ = sg.tensors[op.inputs[0]].shape
    _, out_h, out_w, _ = sg.tensors[op.outputs[0]].shape
    assert (out_h, out_w) == (in_h * stride_h, in_w * stride_w)
    assert padding in (1, 2)  # kTfLitePaddingSame / kTfLitePaddingValid


# ----------------------------------------------------------------------------- bad files


def test_empty_bytes() -> None:
    with pytest.raises(InputError) as exc:
        read_model(b"")
    _assert_one_line_error(exc, "<bytes>", "not a TFLite flatbuffer")


def test_random_bytes() -> None:
    rng = np.random.default_rng(1234)
    data = rng.integers(0, 256, 4096, dtype=np.uint8).tobytes()
    with pytest.raises(InputError) as exc:
        read_model(data)
    _assert_one_line_error(exc, "not a TFLite flatbuffer", "identifier")


def test_wrong_identifier(tmp_path: Path) -> None:
    data = bytearray(_corpus("tflm__hello_world_int8.tflite").read_bytes())
    data[4:8] = b"XXXX"
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(bytes(data))
    with pytest.raises(InputError) as exc:
        read_model(bad)
    _assert_one_line_error(exc, str(bad), "not a TFLite flatbuffer", "XXXX")


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.stem)
def test_truncated(path: Path, fraction: float) -> None:
    data = path.read_bytes()
    with pytest.raises(InputError) as exc:
        read_model(data[: int(len(data) * fraction)])
    _assert_one_line_error(exc, "<bytes>")


def test_nonexistent_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.tflite"
    with pytest.raises(InputError) as exc:
        read_model(missing)
    _assert_one_line_error(exc, str(missing), "does not exist")


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        read_model(tmp_path)
    _assert_one_line_error(exc, str(tmp_path), "directory")


def test_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "locked.tflite"
    p.write_bytes(b"")

    def deny(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", deny)  # portable stand-in for chmod 000 (root)
    with pytest.raises(InputError) as exc:
        read_model(p)
    _assert_one_line_error(exc, str(p), "cannot read", "Permission denied")


def test_random_corruption_only_raises_input_error() -> None:
    """Seeded byte flips inside the flatbuffer: the reader either succeeds or says InputError."""
    original = _corpus("tflm__hello_world_int8.tflite").read_bytes()
    rng = np.random.default_rng(20240521)
    failures = 0
    for _ in range(300):
        data = bytearray(original)
        for pos in rng.integers(8, len(data), rng.integers(1, 9)):
            data[pos] = int(rng.integers(0, 256))
        try:
            read_model(bytes(data))
        except InputError as exc:
            assert "\n" not in str(exc)
            failures += 1
    assert failures > 0


# ----------------------------------------------------------------------------- built models
# Models built field by field (tflite_writer's vector helpers; the bindings have no object API),
# so each test can break exactly one field.  The default model is ADD(input, const) + RELU.


def _base_spec() -> dict:
    const = np.array([[1.0, -2.0, 3.0, -4.0]], np.float32)
    return {
        "version": 3,
        "opcodes": [{"code": tflite.BuiltinOperator.ADD}],
        "buffers": [b"", b"", const.tobytes(), b""],
        "tensors": [
            {"name": "input", "type": tflite.TensorType.FLOAT32, "shape": [1, 4], "buffer": 1},
            {"name": "const", "type": tflite.TensorType.FLOAT32, "shape": [1, 4], "buffer": 2},
            {"name": "output", "type": tflite.TensorType.FLOAT32, "shape": [1, 4], "buffer": 3},
        ],
        "operators": [
            {
                "opcode": 0,
                "inputs": [0, 1],
                "outputs": [2],
                "options": "add_relu",
            }
        ],
        "inputs": [0],
        "outputs": [2],
        "signature": None,
        "metadata": [],
    }


def _build(spec: dict, external_offsets: list[int] | None = None) -> bytes:
    b = flatbuffers.Builder(1024)

    buffers = []
    ext_index = 0
    for data in spec["buffers"]:
        if isinstance(data, tuple):  # ("external", payload): stored after the flatbuffer
            offset = external_offsets[ext_index] if external_offsets else 2
            ext_index += 1
            tflite.BufferStart(b)
            tflite.BufferAddOffset(b, offset)
            tflite.BufferAddSize(b, len(data[1]))
            buffers.append(tflite.BufferEnd(b))
            continue
        vec = byte_vector(b, data) if data else None
        tflite.BufferStart(b)
        if vec is not None:
            tflite.BufferAddData(b, vec)
        buffers.append(tflite.BufferEnd(b))

    tensors = []
    for t in spec["tensors"]:
        name = b.CreateString(t["name"])
        shape = int_vector(b, t["shape"])
        sig = int_vector(b, t["shape_signature"]) if "shape_signature" in t else None
        quant = None
        if "quant" in t:
            scales, zps, qdim = t["quant"]
            sv = int_vector(b, scales, "PrependFloat32")
            zv = int_vector(b, zps, "PrependInt64", 8)
            tflite.QuantizationParametersStart(b)
            tflite.QuantizationParametersAddScale(b, sv)
            tflite.QuantizationParametersAddZeroPoint(b, zv)
            tflite.QuantizationParametersAddQuantizedDimension(b, qdim)
            quant = tflite.QuantizationParametersEnd(b)
        sparsity = sparsity_parameters(b, **t["sparsity"]) if "sparsity" in t else None
        tflite.TensorStart(b)
        tflite.TensorAddShape(b, shape)
        if sig is not None:
            tflite.TensorAddShapeSignature(b, sig)
        tflite.TensorAddType(b, t["type"])
        tflite.TensorAddBuffer(b, t["buffer"])
        tflite.TensorAddName(b, name)
        if quant is not None:
            tflite.TensorAddQuantization(b, quant)
        if sparsity is not None:
            tflite.TensorAddSparsity(b, sparsity)
        tensors.append(tflite.TensorEnd(b))

    operators = []
    for op in spec["operators"]:
        inputs = int_vector(b, op["inputs"])
        outputs = int_vector(b, op["outputs"])
        custom = byte_vector(b, op["custom_options"], 1) if "custom_options" in op else None
        options = None
        if op.get("options") == "add_relu":
            tflite.AddOptionsStart(b)
            tflite.AddOptionsAddFusedActivationFunction(b, tflite.ActivationFunctionType.RELU)
            options = tflite.AddOptionsEnd(b)
        tflite.OperatorStart(b)
        tflite.OperatorAddOpcodeIndex(b, op["opcode"])
        tflite.OperatorAddInputs(b, inputs)
        tflite.OperatorAddOutputs(b, outputs)
        if options is not None:
            tflite.OperatorAddBuiltinOptionsType(b, tflite.BuiltinOptions.AddOptions)
            tflite.OperatorAddBuiltinOptions(b, options)
        if custom is not None:
            tflite.OperatorAddCustomOptions(b, custom)
        operators.append(tflite.OperatorEnd(b))

    tensors_vec = offset_vector(b, tensors)
    ops_vec = offset_vector(b, operators)
    sg_inputs = int_vector(b, spec["inputs"])
    sg_outputs = int_vector(b, spec["outputs"])
    sg_name = b.CreateString("main")
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, tensors_vec)
    tflite.SubGraphAddOperators(b, ops_vec)
    tflite.SubGraphAddInputs(b, sg_inputs)
    tflite.SubGraphAddOutputs(b, sg_outputs)
    tflite.SubGraphAddName(b, sg_name)
    subgraph = tflite.SubGraphEnd(b)

    opcodes = []
    for oc in spec["opcodes"]:
        custom_code = b.CreateString(oc["custom"]) if "custom" in oc else None
        tflite.OperatorCodeStart(b)
        tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(oc["code"], 127))
        tflite.OperatorCodeAddBuiltinCode(b, oc["code"])
        tflite.OperatorCodeAddVersion(b, 1)
        if custom_code is not None:
            tflite.OperatorCodeAddCustomCode(b, custom_code)
        opcodes.append(tflite.OperatorCodeEnd(b))

    signatures = []
    if spec["signature"]:
        key, sig_inputs, sig_outputs = spec["signature"]
        maps = []
        for mapping in (sig_inputs, sig_outputs):
            entries = []
            for name, index in mapping.items():
                n = b.CreateString(name)
                tflite.TensorMapStart(b)
                tflite.TensorMapAddName(b, n)
                tflite.TensorMapAddTensorIndex(b, index)
                entries.append(tflite.TensorMapEnd(b))
            maps.append(offset_vector(b, entries))
        k = b.CreateString(key)
        tflite.SignatureDefStart(b)
        tflite.SignatureDefAddInputs(b, maps[0])
        tflite.SignatureDefAddOutputs(b, maps[1])
        tflite.SignatureDefAddSignatureKey(b, k)
        tflite.SignatureDefAddSubgraphIndex(b, 0)
        signatures.append(tflite.SignatureDefEnd(b))

    metadata = []
    for name, buffer_index in spec["metadata"]:
        n = b.CreateString(name)
        tflite.MetadataStart(b)
        tflite.MetadataAddName(b, n)
        tflite.MetadataAddBuffer(b, buffer_index)
        metadata.append(tflite.MetadataEnd(b))

    opcodes_vec = offset_vector(b, opcodes)
    subgraphs_vec = offset_vector(b, [subgraph])
    buffers_vec = offset_vector(b, buffers)
    signatures_vec = offset_vector(b, signatures)
    metadata_vec = offset_vector(b, metadata)
    description = b.CreateString("built by test_reader")
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, spec["version"])
    tflite.ModelAddOperatorCodes(b, opcodes_vec)
    tflite.ModelAddSubgraphs(b, subgraphs_vec)
    tflite.ModelAddDescription(b, description)
    tflite.ModelAddBuffers(b, buffers_vec)
    tflite.ModelAddSignatureDefs(b, signatures_vec)
    tflite.ModelAddMetadata(b, metadata_vec)
    b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
    out = bytes(b.Output())

    externals = [d[1] for d in spec["buffers"] if isinstance(d, tuple)]
    if not externals or external_offsets:
        return out
    # Second pass: now that the flatbuffer size is known, place the payloads after it.
    # Offsets are fixed-width fields, so the flatbuffer keeps its size.
    pos, offsets = len(out), []
    for payload in externals:
        pos = (pos + 15) // 16 * 16
        offsets.append(pos)
        pos += len(payload)
    final = bytearray(_build(spec, offsets))
    assert len(final) == len(out)
    for offset, payload in zip(offsets, externals, strict=True):
        final.extend(b"\0" * (offset - len(final)))
        final.extend(payload)
    return bytes(final)


def _run(data: bytes, x: np.ndarray) -> np.ndarray:
    interp = _interpreter(model_content=data)
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


def test_built_model_is_valid_and_read_back() -> None:
    spec = _base_spec()
    spec["signature"] = ("serving", {"x": 0}, {"y": 2})
    spec["buffers"].append(b"1.5.0\0")
    spec["metadata"] = [("min_runtime_version", 4)]
    data = _build(spec)
    # The interpreter agrees the builder wrote a real model: ADD + RELU of the constant.
    x = np.array([[0.5, 0.5, -5.0, 5.0]], np.float32)
    np.testing.assert_array_equal(_run(data, x), np.maximum(x + [[1, -2, 3, -4]], 0))

    model = read_model(data)
    sg = model.subgraphs[0]
    assert [t.name for t in sg.tensors] == ["input", "const", "output"]
    np.testing.assert_array_equal(sg.tensors[1].data, [[1.0, -2.0, 3.0, -4.0]])
    assert sg.tensors[0].data is None and sg.tensors[0].quantization is None
    op = sg.operators[0]
    assert op.name == "ADD" and op.options_type == "AddOptions"
    assert op.options == {"fused_activation_function": "RELU", "pot_scale_int16": True}
    assert op.custom_options is None
    assert (sg.inputs, sg.outputs, sg.name) == ((0,), (2,), "main")
    assert model.description == "built by test_reader"
    assert model.metadata == {"min_runtime_version": b"1.5.0\0"}
    [sig] = model.signature_defs
    assert (sig.key, sig.subgraph_index, sig.inputs, sig.outputs) == (
        "serving",
        0,
        {"x": 0},
        {"y": 2},
    )


def _expect_error(spec: dict, *fragments: str) -> str:
    with pytest.raises(InputError) as exc:
        read_model(_build(spec))
    return _assert_one_line_error(exc, "<bytes>", *fragments)


def test_operator_input_out_of_range() -> None:
    spec = _base_spec()
    spec["operators"][0]["inputs"] = [0, 999]
    _expect_error(spec, "subgraph 0 operator 0", "input 1", "tensor 999", "out of range")


def test_operator_output_minus_one_rejected_but_optional_input_allowed() -> None:
    spec = _base_spec()
    spec["operators"][0]["inputs"] = [0, 1, -1]
    assert read_model(_build(spec)).subgraphs[0].operators[0].inputs == (0, 1, -1)
    spec["operators"][0]["outputs"] = [-1]
    _expect_error(spec, "subgraph 0 operator 0", "output 0", "tensor -1")


def test_opcode_index_out_of_range() -> None:
    spec = _base_spec()
    spec["operators"][0]["opcode"] = 99
    _expect_error(spec, "subgraph 0 operator 0", "opcode index 99")


def test_buffer_index_out_of_range() -> None:
    spec = _base_spec()
    spec["tensors"][1]["buffer"] = 999
    _expect_error(spec, "subgraph 0 tensor 1 'const'", "buffer index 999")


def test_buffer_with_wrong_size() -> None:
    spec = _base_spec()
    spec["buffers"][2] = b"\0" * 12
    _expect_error(spec, "subgraph 0 tensor 1 'const'", "12 bytes", "needs 16")


def test_subgraph_output_out_of_range() -> None:
    spec = _base_spec()
    spec["outputs"] = [7]
    _expect_error(spec, "subgraph 0", "output 0 refers to tensor 7")


def test_signature_tensor_out_of_range() -> None:
    spec = _base_spec()
    spec["signature"] = ("serving", {"x": 0}, {"y": 42})
    _expect_error(spec, "signature_def 0 'serving'", "tensor 42")


def test_metadata_buffer_out_of_range() -> None:
    spec = _base_spec()
    spec["metadata"] = [("min_runtime_version", 50)]
    _expect_error(spec, "metadata", "buffer index 50")


def test_schema_version() -> None:
    spec = _base_spec()
    spec["version"] = 2
    _expect_error(spec, "schema version 2")


def test_absurd_shape() -> None:
    spec = _base_spec()
    spec["tensors"][2]["shape"] = [2**31 - 1] * 3
    _expect_error(spec, "tensor 2 'output'", "absurdly large")


def test_negative_shape_signature() -> None:
    spec = _base_spec()
    spec["tensors"][0]["shape_signature"] = [-3, 4]
    _expect_error(spec, "tensor 0 'input'", "negative dimension")


def test_dynamic_shape_signature() -> None:
    spec = _base_spec()
    spec["tensors"][0]["shape_signature"] = [-1, 4]
    t = read_model(_build(spec)).subgraphs[0].tensors[0]
    assert (t.shape, t.shape_signature) == ((1, 4), (-1, 4))


def test_unknown_builtin_code_is_kept() -> None:
    spec = _base_spec()
    spec["opcodes"][0]["code"] = 250
    model = read_model(_build(spec))
    assert model.opcodes[0].builtin == "UNKNOWN_250"
    assert model.subgraphs[0].operators[0].name == "UNKNOWN_250"


def test_large_builtin_code_uses_new_field() -> None:
    spec = _base_spec()
    spec["opcodes"][0]["code"] = tflite.BuiltinOperator.GELU  # 150 > 127: deprecated field 127
    assert read_model(_build(spec)).opcodes[0].builtin == "GELU"


def test_custom_op() -> None:
    spec = _base_spec()
    spec["opcodes"] = [{"code": tflite.BuiltinOperator.CUSTOM, "custom": "MyOp"}]
    spec["operators"][0]["options"] = None
    spec["operators"][0]["custom_options"] = b"\x01\x02\x03"
    op = read_model(_build(spec)).subgraphs[0].operators[0]
    assert (op.name, op.custom_options, op.options_type, op.options) == (
        "MyOp",
        b"\x01\x02\x03",
        "",
        {},
    )


def test_quantization_zero_point_count_mismatch() -> None:
    spec = _base_spec()
    spec["tensors"][1]["quant"] = ([0.5, 0.25, 0.125, 1.0], [0, 0], 1)
    _expect_error(spec, "tensor 1 'const'", "4 scales but 2 zero points")


def test_quantization_dimension_out_of_range() -> None:
    spec = _base_spec()
    spec["tensors"][1]["quant"] = ([0.5, 0.25, 0.125, 1.0], [0, 0, 0, 0], 2)
    _expect_error(spec, "tensor 1 'const'", "quantized_dimension 2")


def test_quantization_scale_count_must_match_axis() -> None:
    spec = _base_spec()
    spec["tensors"][1]["quant"] = ([0.5, 0.25, 0.125], [0, 0, 0], 1)
    _expect_error(spec, "tensor 1 'const'", "3 scales")


@pytest.mark.parametrize("bad", [0.0, -0.5, float("nan"), float("inf")])
def test_integer_tensor_scale_must_be_positive_and_finite(bad: float) -> None:
    """An int8 tensor's real value is scale * (q - zero_point): no usable grid otherwise."""
    spec = _base_spec()
    spec["tensors"][1]["type"] = tflite.TensorType.INT8
    spec["tensors"][1]["quant"] = ([0.5, bad, 0.125, 1.0], [0, 0, 0, 0], 1)
    _expect_error(spec, "tensor 1 'const'", f"quantization scale {bad} is not a positive finite")


def test_quantization_single_zero_point_and_odd_scales() -> None:
    """On a float tensor the parameters are only metadata: read as they are."""
    spec = _base_spec()
    spec["tensors"][1]["quant"] = ([0.5, -1.0, 0.0, float("nan")], [3], 1)
    q = read_model(_build(spec)).subgraphs[0].tensors[1].quantization
    assert q.per_axis and q.quantized_dimension == 1
    np.testing.assert_array_equal(q.scale, np.array([0.5, -1.0, 0.0, np.nan], np.float32))
    np.testing.assert_array_equal(q.zero_point, [3, 3, 3, 3])
    assert q.scale.dtype == np.float32 and q.zero_point.dtype == np.int64


def test_external_buffer_matches_interpreter() -> None:
    spec = _base_spec()
    values = np.array([[10.0, 20.0, -30.0, 40.0]], np.float32)
    spec["buffers"][2] = ("external", values.tobytes())
    data = _build(spec)
    assert values.tobytes() not in data[: len(data) - 16]  # really outside the flatbuffer
    x = np.zeros((1, 4), np.float32)
    np.testing.assert_array_equal(_run(data, x), np.maximum(values, 0))
    np.testing.assert_array_equal(read_model(data).subgraphs[0].tensors[1].data, values)


def test_external_buffer_beyond_end() -> None:
    spec = _base_spec()
    spec["buffers"][2] = ("external", np.zeros(4, np.float32).tobytes())
    data = _build(spec)
    with pytest.raises(InputError) as exc:
        read_model(data[:-8])
    _assert_one_line_error(exc, "tensor 1 'const'", "beyond the end of the file")


def test_int4_constant_unpacked() -> None:
    spec = _base_spec()
    spec["tensors"][1]["type"] = tflite.TensorType.INT4
    spec["tensors"][1]["shape"] = [1, 3]
    # Low nibble first: 7, -8 | -1, (pad)
    spec["buffers"][2] = bytes([0x87, 0x0F])
    t = read_model(_build(spec)).subgraphs[0].tensors[1]
    assert t.dtype == "int4"
    np.testing.assert_array_equal(t.data, [[7, -8, -1]])


def test_string_constant() -> None:
    spec = _base_spec()
    spec["tensors"][1]["type"] = tflite.TensorType.STRING
    spec["tensors"][1]["shape"] = [2]
    header = struct.pack("<4i", 2, 16, 19, 24)
    spec["buffers"][2] = header + b"abchello"
    t = read_model(_build(spec)).subgraphs[0].tensors[1]
    assert t.dtype == "string"
    assert t.data.tolist() == [b"abc", b"hello"]


def test_sparse_constant_matches_interpreter() -> None:
    dense = np.array([[1, 0, 0, 2], [0, 0, 0, 0], [0, 3, 0, 0], [4, 0, 5, 0]], np.float32)
    rows, cols = np.nonzero(dense)
    segments = [0, *np.cumsum(np.bincount(rows, minlength=4)).tolist()]
    spec = _base_spec()
    spec["opcodes"] = [{"code": tflite.BuiltinOperator.DENSIFY}]
    spec["tensors"] = [
        {
            "name": "sparse",
            "type": tflite.TensorType.FLOAT32,
            "shape": [4, 4],
            "buffer": 1,
            "sparsity": {
                "traversal_order": [0, 1],
                "block_map": [],
                "dim_metadata": [
                    (tflite.DimensionType.DENSE, 4, None, None),
                    (tflite.DimensionType.SPARSE_CSR, 0, segments, cols.tolist()),
                ],
            },
        },
        {"name": "dense", "type": tflite.TensorType.FLOAT32, "shape": [4, 4], "buffer": 2},
    ]
    spec["buffers"] = [b"", dense[rows, cols].tobytes(), b""]
    spec["operators"] = [{"opcode": 0, "inputs": [0], "outputs": [1]}]
    spec["inputs"], spec["outputs"] = [], [1]
    data = _build(spec)

    interp = _interpreter(model_content=data)
    interp.allocate_tensors()
    interp.invoke()
    np.testing.assert_array_equal(interp.get_tensor(1), dense)  # the builder wrote it right
    expected = interp.get_tensor_details()[0]["sparsity_parameters"]

    t = read_model(data).subgraphs[0].tensors[0]
    np.testing.assert_array_equal(t.data, dense[rows, cols])
    sp = t.sparsity
    assert list(sp.traversal_order) == list(expected["traversal_order"])
    assert list(sp.block_map) == list(expected["block_map"])
    assert len(sp.dim_metadata) == len(expected["dim_metadata"])
    for got, want in zip(sp.dim_metadata, expected["dim_metadata"], strict=True):
        assert got.format == ("DENSE" if want["format"] == 0 else "SPARSE_CSR")
        if got.format == "DENSE":
            assert got.dense_size == want["dense_size"]
        else:
            np.testing.assert_array_equal(got.array_segments, want["array_segments"])
            np.testing.assert_array_equal(got.array_indices, want["array_indices"])


def test_sparsity_with_bad_traversal_order() -> None:
    spec = _base_spec()
    spec["tensors"][1]["sparsity"] = {
        "traversal_order": [0, 0],
        "block_map": [],
        "dim_metadata": [(tflite.DimensionType.DENSE, 1, None, None)] * 2,
    }
    _expect_error(spec, "tensor 1 'const'", "traversal_order")
