"""LiteRT quantization details the reader must not mistake for plain integers: a tensor whose
scales live in other tensors (blockwise, multi-axis) is refused by name until it is converted,
never read as unscaled integers (that computed wrong numbers without a word)."""

from __future__ import annotations

import flatbuffers
import numpy as np
import pytest
from reader_testkit import assert_one_line_error, corpus_model

import support
from qonnx_ingest.errors import ConversionError, InputError
from tflite2qonnx.reader import read_model

pytestmark = support.requires_corpus

WEIGHT = "sequential/dense_1/MatMul"  # hello_world's [16, 16] int8 FULLY_CONNECTED weight


def _with_details(details_type: int, details) -> bytes:
    """hello_world with its middle weight's quantization replaced by ``details``, the scales
    moved into a new float tensor as LiteRT's blockwise quantization stores them."""
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_litert.tools import flatbuffer_utils

    data = corpus_model("tflm__hello_world_int8.tflite").read_bytes()
    model = flatbuffer_utils.convert_bytearray_to_object(bytearray(data))
    graph = model.subgraphs[0]
    (weight,) = [t for t in graph.tensors if t.name.decode() == WEIGHT]
    scales = schema.BufferT()
    scales.data = np.full((16, 1), 0.01, np.float32).tobytes()
    model.buffers.append(scales)
    scale_tensor = schema.TensorT()
    scale_tensor.name, scale_tensor.type = b"scales", schema.TensorType.FLOAT32
    scale_tensor.shape, scale_tensor.buffer = [16, 1], len(model.buffers) - 1
    graph.tensors.append(scale_tensor)
    details.scales = len(graph.tensors) - 1
    quant = schema.QuantizationParametersT()
    quant.detailsType, quant.details = details_type, details
    weight.quantization = quant
    builder = flatbuffers.Builder(0)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def test_blockwise_weights_are_refused_naming_the_tensor_not_read_as_plain_integers() -> None:
    from ai_edge_litert import schema_py_generated as schema

    details = schema.BlockwiseQuantizationT()
    details.blockSize = 16
    with pytest.raises(ConversionError) as exc:
        read_model(_with_details(schema.QuantizationDetails.BlockwiseQuantization, details))
    assert not isinstance(exc.value, InputError)  # exit 1: a real model we cannot convert yet
    assert_one_line_error(exc, WEIGHT, "blockwise quantization is not supported")
