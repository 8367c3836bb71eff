"""LiteRT quantization details whose scales live in other tensors: blockwise quantization is
read with its scales (one per block of ``block_size`` values); what the reader does not take
(a block_shape, multi-axis quantization) is refused by name, never read as unscaled integers
(that computed wrong numbers without a word)."""

from __future__ import annotations

import flatbuffers
import numpy as np
import pytest
from reader_testkit import assert_one_line_error, corpus_model

import support
from qonnx_ingest.errors import ConversionError, InputError
from tflite2qonnx.quantization import dequantize
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


def test_blockwise_weights_carry_one_scale_per_block() -> None:
    from ai_edge_litert import schema_py_generated as schema

    details = schema.BlockwiseQuantizationT()
    details.blockSize, details.zeroPoints = 16, -1
    model = read_model(_with_details(schema.QuantizationDetails.BlockwiseQuantization, details))
    (weight,) = [t for t in model.subgraphs[0].tensors if t.name == WEIGHT]
    assert weight.quantization.block_size == 16
    assert weight.quantization.quantized_dimension == 1  # scales [16, 1] of a [16, 16] weight
    assert not weight.quantization.per_axis
    np.testing.assert_array_equal(weight.quant.scale, np.full((16, 16), np.float32(0.01)))
    np.testing.assert_array_equal(weight.quant.zero_point, np.zeros((16, 16)))
    expected = (np.float64(np.float32(0.01)) * weight.data).astype(np.float32)
    np.testing.assert_array_equal(dequantize(weight), expected)


def test_blockwise_with_a_block_shape_is_refused_naming_the_tensor() -> None:
    from ai_edge_litert import schema_py_generated as schema

    details = schema.BlockwiseQuantizationT()
    details.blockSize, details.zeroPoints, details.blockShape = 16, -1, [1, 16]
    with pytest.raises(ConversionError) as exc:
        read_model(_with_details(schema.QuantizationDetails.BlockwiseQuantization, details))
    assert not isinstance(exc.value, InputError)  # exit 1: a real model we cannot convert yet
    assert_one_line_error(exc, WEIGHT, "blockwise quantization with a block_shape")


def test_multi_axis_quantization_is_refused_naming_the_tensor() -> None:
    from ai_edge_litert import schema_py_generated as schema

    details = schema.MultiAxisQuantizationT()
    with pytest.raises(ConversionError) as exc:
        read_model(_with_details(schema.QuantizationDetails.MultiAxisQuantization, details))
    assert not isinstance(exc.value, InputError)
    assert_one_line_error(exc, WEIGHT, "multi-axis quantization is not supported")
