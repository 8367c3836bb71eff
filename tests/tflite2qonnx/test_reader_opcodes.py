"""What the reader reads beyond the tflite 2.18 bindings. OperatorCode from its own fields: a
writer may leave ``deprecated_builtin_code`` 0 (ADD) and set only ``builtin_code``
(ai-edge-quantizer does), and the schema says to take the larger. The tflite bindings'
``BuiltinCode()`` returns the old field for codes below 127, which read such a DEQUANTIZE as
ADD. LiteRT's newer tensor types by their names."""

from __future__ import annotations

import flatbuffers
import pytest
from reader_testkit import corpus_model

import support
from tflite2qonnx.reader import read_model

pytestmark = support.requires_corpus


def test_builtin_code_alone_names_the_operator() -> None:
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_litert.tools import flatbuffer_utils

    data = corpus_model("tflm__hello_world_int8.tflite").read_bytes()
    model = flatbuffer_utils.convert_bytearray_to_object(bytearray(data))
    before = [op.opcode.builtin for op in read_model(data).subgraphs[0].operators]
    assert set(before) == {"FULLY_CONNECTED"}
    for code in model.operatorCodes:
        assert code.builtinCode == schema.BuiltinOperator.FULLY_CONNECTED
        code.deprecatedBuiltinCode = 0  # ADD, as ai-edge-quantizer leaves it
    builder = flatbuffers.Builder(0)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    after = [op.opcode.builtin for op in read_model(bytes(builder.Output())).subgraphs[0].operators]
    assert after == before


def test_float8_activation_is_refused_by_its_type_name() -> None:
    """LiteRT's FLOAT8_E4M3FN (21), unknown to the tflite bindings: named, not a number. Only
    FLOAT8 constants convert (test_minifloat.py): no LiteRT kernel computes FLOAT8 values."""
    from ai_edge_litert.tools import flatbuffer_utils

    from qonnx_ingest.errors import ConversionError, InputError

    data = corpus_model("tflm__hello_world_int8.tflite").read_bytes()
    model = flatbuffer_utils.convert_bytearray_to_object(bytearray(data))
    model.subgraphs[0].tensors[0].type = 21
    builder = flatbuffers.Builder(0)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    with pytest.raises(ConversionError, match="FLOAT8_E4M3FN activations are not supported") as exc:
        read_model(bytes(builder.Output()))
    assert not isinstance(exc.value, InputError)
