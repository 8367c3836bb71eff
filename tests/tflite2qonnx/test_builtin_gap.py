"""The builtins closing the gap to tf2onnx's TFLite handler table (scripts/tflite_op_gap.py),
each alone against the TFLite interpreter: float, and int8 where TFLite quantizes the op."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from litert_compare import compare, run_ours
from test_tflite_ops import interpreter, op_names, xnnpack_agreement
from tf_models import build_tflite
from tf_models_gap import GAP_CASES, GAP_MODELS, nms_v4_model

import tflite2qonnx
from qonnx_ingest.errors import ConversionError

pytestmark = pytest.mark.keras

PARAMS = [pytest.param(name, False, id=f"{name}-float") for name in GAP_CASES] + [
    pytest.param(name, True, id=f"{name}-int8")
    for name, case in GAP_CASES.items()
    if case.quantized
]


@pytest.mark.parametrize("name, quantized", PARAMS)
def test_gap_op_model_matches_interpreter(name: str, quantized: bool) -> None:
    """Same shapes as the interpreter's outputs (WHERE, UNIQUE: data-dependent); float within
    1e-4 relative, int8 within one step and equal on >= 99% of elements (or XNNPACK's share)."""
    case = GAP_CASES[name]
    data = build_tflite(case, quantized, seed=zlib.crc32(name.encode()) % 1000)
    assert case.op in op_names(data), f"TF's converter did not emit {case.op}"
    it = interpreter(data, xnnpack=case.interpreter == "default")
    pairs = compare(tflite2qonnx.convert(data), it, n_inputs=8, low=case.low, high=case.high)
    for p in pairs:
        assert p.ours.shape == p.reference.shape, p.name
    if quantized:
        steps = np.concatenate([p.steps() for p in pairs])
        assert steps.max() <= 1
        if np.mean(steps == 0) < 0.99:
            assert np.mean(steps == 0) >= xnnpack_agreement(data, case)
    else:
        assert all(p.float_error_ok() for p in pairs)


def _raw_outputs(data: bytes, feeds: dict[str, np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(interpreter's, ours) per output, as stored: integer outputs are compared as integers."""
    it = interpreter(data)
    for detail in it.get_input_details():
        it.set_tensor(detail["index"], feeds[detail["name"]])
    it.invoke()
    ours = run_ours(tflite2qonnx.convert(data), feeds)
    return [(it.get_tensor(d["index"]), ours[d["name"]]) for d in it.get_output_details()]


def test_rank_is_the_interpreters_constant() -> None:
    data = GAP_MODELS["rank"]()
    ((theirs, ours),) = _raw_outputs(data, {"x": np.zeros((2, 3, 4), np.float32)})
    assert ours.dtype == theirs.dtype == np.int32 and ours.shape == theirs.shape
    assert ours == theirs == 3


def test_broadcast_args_right_aligns_and_replaces_ones() -> None:
    ((theirs, ours),) = _raw_outputs(GAP_MODELS["broadcast_args"](), {})
    assert ours.tolist() == theirs.tolist() == [5, 4, 3]


def test_dynamic_update_slice_clamps_the_start_like_the_kernel() -> None:
    """Starts past the end or negative are clamped so the block fits (checked on two)."""
    data = GAP_MODELS["dynamic_update_slice"]()
    pairs = compare(tflite2qonnx.convert(data), interpreter(data), n_inputs=2)
    assert all(np.array_equal(p.ours, p.reference) for p in pairs)
    assert not np.array_equal(pairs[0].reference, pairs[1].reference)


def test_embedding_lookup_takes_rows_of_the_table() -> None:
    data = GAP_MODELS["embedding_lookup"]()
    pairs = compare(tflite2qonnx.convert(data), interpreter(data), n_inputs=2)
    assert all(np.array_equal(p.ours, p.reference) for p in pairs)


def test_nms_drops_a_box_whose_iou_equals_the_threshold() -> None:
    """The kernel drops at IoU >= threshold (ONNX at >): box 1 overlaps box 0 by exactly 0.5
    and goes; box 2 (corners given in reverse) overlaps neither and stays."""
    boxes = np.array([[0, 0, 1, 1], [0, 0, 1, 0.5], [3, 3, 2, 2]], np.float32)
    scores = np.array([0.9, 0.8, 0.7], np.float32)
    outputs = _raw_outputs(
        GAP_MODELS["non_max_suppression_v4"](), {"boxes": boxes, "scores": scores}
    )
    (selected, ours_selected), (valid, ours_valid) = outputs
    assert selected.tolist() == ours_selected.tolist() == [0, 2, 0]
    assert int(valid) == int(ours_valid) == 2


def test_nms_refuses_a_zero_iou_threshold_which_keeps_one_box() -> None:
    with pytest.raises(ConversionError, match="iou_threshold 0.0 <= 0"):
        tflite2qonnx.convert(nms_v4_model(0.0))


def test_sparse_to_dense_refuses_repeated_indices() -> None:
    """ONNX ScatterND leaves the order of two writes to one cell open: refused, named."""
    from tf_models import OpCase, _fn

    case = OpCase(
        "SPARSE_TO_DENSE",
        _fn(
            lambda tf, x: tf.compat.v1.sparse_to_dense(
                [[0, 1], [0, 1]], [3, 4], x[0], 0.5, validate_indices=False
            )
        ),
        ((1, 2),),
        quantized=False,
    )
    data = build_tflite(case, False)
    with pytest.raises(ConversionError, match="SPARSE_TO_DENSE.*repeated indices|repeated"):
        tflite2qonnx.convert(data)


@pytest.mark.parametrize("opset, op_type", [(18, "BitwiseXor")])
def test_bitwise_xor_is_onnx_bitwise_xor_from_opset_18(opset, op_type) -> None:
    """Equal to the interpreter's integers (cast to float at the model's end); below opset 18
    the bit form is checked by the bitwise_xor case."""
    case = GAP_CASES["bitwise_xor"]
    data = build_tflite(case, False, seed=zlib.crc32(b"bitwise_xor") % 1000)
    model = tflite2qonnx.convert(data, opset=opset)
    assert any(n.op_type == op_type for n in model.graph.node)
    pairs = compare(model, interpreter(data), n_inputs=4, low=case.low, high=case.high)
    assert all(np.array_equal(p.ours, p.reference) for p in pairs)
