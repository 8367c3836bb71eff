"""Tests for tflite2qonnx.reader on models built field by field (reader_testkit.build), whose
contents the test itself chose: valid ones read back as the interpreter runs them, and each
broken field is an InputError in one line naming it.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
import tflite
from reader_testkit import (
    assert_one_line_error,
    base_spec,
    build,
    expect_error,
    interpreter,
    run_model,
)

from qonnx_ingest.errors import InputError
from tflite2qonnx.reader import read_model


def test_built_model_is_valid_and_read_back() -> None:
    spec = base_spec()
    spec["signature"] = ("serving", {"x": 0}, {"y": 2})
    spec["buffers"].append(b"1.5.0\0")
    spec["metadata"] = [("min_runtime_version", 4)]
    data = build(spec)
    # The interpreter agrees the builder wrote a real model: ADD + RELU of the constant.
    x = np.array([[0.5, 0.5, -5.0, 5.0]], np.float32)
    np.testing.assert_array_equal(run_model(data, x), np.maximum(x + [[1, -2, 3, -4]], 0))

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


def test_operator_input_out_of_range() -> None:
    spec = base_spec()
    spec["operators"][0]["inputs"] = [0, 999]
    expect_error(spec, "subgraph 0 operator 0", "input 1", "tensor 999", "out of range")


def test_operator_output_minus_one_rejected_but_optional_input_allowed() -> None:
    spec = base_spec()
    spec["operators"][0]["inputs"] = [0, 1, -1]
    assert read_model(build(spec)).subgraphs[0].operators[0].inputs == (0, 1, -1)
    spec["operators"][0]["outputs"] = [-1]
    expect_error(spec, "subgraph 0 operator 0", "output 0", "tensor -1")


def test_opcode_index_out_of_range() -> None:
    spec = base_spec()
    spec["operators"][0]["opcode"] = 99
    expect_error(spec, "subgraph 0 operator 0", "opcode index 99")


def test_buffer_index_out_of_range() -> None:
    spec = base_spec()
    spec["tensors"][1]["buffer"] = 999
    expect_error(spec, "subgraph 0 tensor 1 'const'", "buffer index 999")


def test_buffer_with_wrong_size() -> None:
    spec = base_spec()
    spec["buffers"][2] = b"\0" * 12
    expect_error(spec, "subgraph 0 tensor 1 'const'", "12 bytes", "needs 16")


def test_subgraph_output_out_of_range() -> None:
    spec = base_spec()
    spec["outputs"] = [7]
    expect_error(spec, "subgraph 0", "output 0 refers to tensor 7")


def test_signature_tensor_out_of_range() -> None:
    spec = base_spec()
    spec["signature"] = ("serving", {"x": 0}, {"y": 42})
    expect_error(spec, "signature_def 0 'serving'", "tensor 42")


def test_metadata_buffer_out_of_range() -> None:
    spec = base_spec()
    spec["metadata"] = [("min_runtime_version", 50)]
    expect_error(spec, "metadata", "buffer index 50")


def test_schema_version() -> None:
    spec = base_spec()
    spec["version"] = 2
    expect_error(spec, "schema version 2")


def test_absurd_shape() -> None:
    spec = base_spec()
    spec["tensors"][2]["shape"] = [2**31 - 1] * 3
    expect_error(spec, "tensor 2 'output'", "absurdly large")


def test_negative_shape_signature() -> None:
    spec = base_spec()
    spec["tensors"][0]["shape_signature"] = [-3, 4]
    expect_error(spec, "tensor 0 'input'", "negative dimension")


def test_dynamic_shape_signature() -> None:
    spec = base_spec()
    spec["tensors"][0]["shape_signature"] = [-1, 4]
    t = read_model(build(spec)).subgraphs[0].tensors[0]
    assert (t.shape, t.shape_signature) == ((1, 4), (-1, 4))


def test_unknown_builtin_code_is_kept() -> None:
    spec = base_spec()
    spec["opcodes"][0]["code"] = 250
    model = read_model(build(spec))
    assert model.opcodes[0].builtin == "UNKNOWN_250"
    assert model.subgraphs[0].operators[0].name == "UNKNOWN_250"


def test_large_builtin_code_uses_new_field() -> None:
    spec = base_spec()
    spec["opcodes"][0]["code"] = tflite.BuiltinOperator.GELU  # 150 > 127: deprecated field 127
    assert read_model(build(spec)).opcodes[0].builtin == "GELU"


def test_custom_op() -> None:
    spec = base_spec()
    spec["opcodes"] = [{"code": tflite.BuiltinOperator.CUSTOM, "custom": "MyOp"}]
    spec["operators"][0]["options"] = None
    spec["operators"][0]["custom_options"] = b"\x01\x02\x03"
    op = read_model(build(spec)).subgraphs[0].operators[0]
    assert (op.name, op.custom_options, op.options_type, op.options) == (
        "MyOp",
        b"\x01\x02\x03",
        "",
        {},
    )


def test_quantization_zero_point_count_mismatch() -> None:
    spec = base_spec()
    spec["tensors"][1]["quant"] = ([0.5, 0.25, 0.125, 1.0], [0, 0], 1)
    expect_error(spec, "tensor 1 'const'", "4 scales but 2 zero points")


def test_quantization_dimension_out_of_range() -> None:
    spec = base_spec()
    spec["tensors"][1]["quant"] = ([0.5, 0.25, 0.125, 1.0], [0, 0, 0, 0], 2)
    expect_error(spec, "tensor 1 'const'", "quantized_dimension 2")


def test_quantization_scale_count_must_match_axis() -> None:
    spec = base_spec()
    spec["tensors"][1]["quant"] = ([0.5, 0.25, 0.125], [0, 0, 0], 1)
    expect_error(spec, "tensor 1 'const'", "3 scales")


@pytest.mark.parametrize("bad", [0.0, -0.5, float("nan"), float("inf"), 2.0**-130])
def test_integer_tensor_scale_must_be_positive_finite_and_normal(bad: float) -> None:
    """An int8 tensor's real value is scale * (q - zero_point): no usable grid otherwise."""
    spec = base_spec()
    spec["tensors"][1]["type"] = tflite.TensorType.INT8
    spec["tensors"][1]["quant"] = ([0.5, bad, 0.125, 1.0], [0, 0, 0, 0], 1)
    expect_error(spec, "tensor 1 'const'", f"quantization scale {bad} is not a positive finite")


def test_quantization_single_zero_point_and_odd_scales() -> None:
    """On a float tensor the parameters are only metadata: read as they are."""
    spec = base_spec()
    spec["tensors"][1]["quant"] = ([0.5, -1.0, 0.0, float("nan")], [3], 1)
    q = read_model(build(spec)).subgraphs[0].tensors[1].quantization
    assert q.per_axis and q.quantized_dimension == 1
    np.testing.assert_array_equal(q.scale, np.array([0.5, -1.0, 0.0, np.nan], np.float32))
    np.testing.assert_array_equal(q.zero_point, [3, 3, 3, 3])
    assert q.scale.dtype == np.float32 and q.zero_point.dtype == np.int64


def test_external_buffer_matches_interpreter() -> None:
    spec = base_spec()
    values = np.array([[10.0, 20.0, -30.0, 40.0]], np.float32)
    spec["buffers"][2] = ("external", values.tobytes())
    data = build(spec)
    assert values.tobytes() not in data[: len(data) - 16]  # really outside the flatbuffer
    x = np.zeros((1, 4), np.float32)
    np.testing.assert_array_equal(run_model(data, x), np.maximum(values, 0))
    np.testing.assert_array_equal(read_model(data).subgraphs[0].tensors[1].data, values)


def test_external_buffer_beyond_end() -> None:
    spec = base_spec()
    spec["buffers"][2] = ("external", np.zeros(4, np.float32).tobytes())
    data = build(spec)
    with pytest.raises(InputError) as exc:
        read_model(data[:-8])
    assert_one_line_error(exc, "tensor 1 'const'", "beyond the end of the file")


def test_int4_constant_unpacked() -> None:
    spec = base_spec()
    spec["tensors"][1]["type"] = tflite.TensorType.INT4
    spec["tensors"][1]["shape"] = [1, 3]
    # Low nibble first: 7, -8 | -1, (pad)
    spec["buffers"][2] = bytes([0x87, 0x0F])
    t = read_model(build(spec)).subgraphs[0].tensors[1]
    assert t.dtype == "int4"
    np.testing.assert_array_equal(t.data, [[7, -8, -1]])


def test_string_constant() -> None:
    spec = base_spec()
    spec["tensors"][1]["type"] = tflite.TensorType.STRING
    spec["tensors"][1]["shape"] = [2]
    header = struct.pack("<4i", 2, 16, 19, 24)
    spec["buffers"][2] = header + b"abchello"
    t = read_model(build(spec)).subgraphs[0].tensors[1]
    assert t.dtype == "string"
    assert t.data.tolist() == [b"abc", b"hello"]


def test_sparse_constant_matches_interpreter() -> None:
    dense = np.array([[1, 0, 0, 2], [0, 0, 0, 0], [0, 3, 0, 0], [4, 0, 5, 0]], np.float32)
    rows, cols = np.nonzero(dense)
    segments = [0, *np.cumsum(np.bincount(rows, minlength=4)).tolist()]
    spec = base_spec()
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
    data = build(spec)

    interp = interpreter(model_content=data)
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
    spec = base_spec()
    spec["tensors"][1]["sparsity"] = {
        "traversal_order": [0, 0],
        "block_map": [],
        "dim_metadata": [(tflite.DimensionType.DENSE, 1, None, None)] * 2,
    }
    expect_error(spec, "tensor 1 'const'", "traversal_order")
