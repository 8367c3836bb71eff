"""What the reader tests share: the corpus, the interpreter without delegates, one-line error
checks, and TFLite models built field by field with the flatbuffers Builder.

The built models use tflite_writer's vector helpers (the bindings have no object API), so each
test can break exactly one field. The default model (``base_spec``) is ADD(input, const) + RELU.
"""

from __future__ import annotations

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


def corpus_model(name: str) -> Path:
    return CORPUS / name


def interpreter(**kwargs):
    # No default (XNNPACK) delegate: it rewrites the graph and refuses some tiny test models.
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    return Interpreter(
        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES, **kwargs
    )


def assert_one_line_error(exc_info: pytest.ExceptionInfo, *fragments: str) -> str:
    text = str(exc_info.value)
    assert "\n" not in text
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in {text!r}"
    return text


def base_spec() -> dict:
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


def build(spec: dict, external_offsets: list[int] | None = None) -> bytes:
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
    final = bytearray(build(spec, offsets))
    assert len(final) == len(out)
    for offset, payload in zip(offsets, externals, strict=True):
        final.extend(b"\0" * (offset - len(final)))
        final.extend(payload)
    return bytes(final)


def run_model(data: bytes, x: np.ndarray) -> np.ndarray:
    interp = interpreter(model_content=data)
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


def expect_error(spec: dict, *fragments: str) -> str:
    with pytest.raises(InputError) as exc:
        read_model(build(spec))
    return assert_one_line_error(exc, "<bytes>", *fragments)
