"""Tests for tflite2qonnx.reader on the corpus: every tensor of subgraph 0 against the
ai-edge-litert interpreter (which parses the flatbuffer with its own C++ code), and known
architecture facts of the corpus models.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import tflite
from reader_testkit import LOADABLE, corpus_model, interpreter

import support
from tflite2qonnx.reader import read_model

pytestmark = support.requires_corpus


@pytest.mark.parametrize("path", LOADABLE, ids=lambda p: p.stem)
def test_subgraph0_matches_interpreter(path: Path) -> None:
    interp = interpreter(model_path=str(path))
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
    model = read_model(corpus_model("tflm__hello_world_int8.tflite"))
    data = next(t.data for t in model.subgraphs[0].tensors if t.data is not None)
    with pytest.raises(ValueError):
        data.flat[0] = 1


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview, str])
def test_source_kinds_agree(kind) -> None:
    path = corpus_model("t2o__conv.uint8.tflite")
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
    path = corpus_model("tflm__person_detect.tflite")
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
    model = read_model(corpus_model("tflm__hello_world_int8.tflite"))
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
    path = corpus_model("coral__tf2_mobilenet_v2_1.0_224_ptq.tflite")
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
    model = read_model(corpus_model("t2o__conv-quant-fp16.float32.tflite"))
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
    model = read_model(corpus_model("mediapipe__selfie_segmentation.tflite"))
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
