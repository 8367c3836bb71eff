"""TOPK_V2 against the interpreter (ai-edge-litert), run by onnxruntime: hand-built models
with ties (TFLite: value descending, the lower index first) and the corpus recommendation
model, whose outputs are a TOPK_V2's."""

from __future__ import annotations

import numpy as np
import pytest
from litert_compare import reference_interpreter
from tflite_writer import build_model

import tflite2qonnx
from qonnx_ingest.errors import ConversionError
from qonnx_ingest.verification import run_converted
from support import CORPUS, requires_corpus


def topk_model(shape: list[int], k: int | None, dtype: str = "float32") -> bytes:
    """x -> TOPK_V2(x, k) -> (values, indices); ``k`` None makes k a second graph input."""
    tensors = [
        {"name": "x", "shape": shape, "dtype": dtype},
        {"name": "k", "shape": [], "dtype": "int32"},
        {"name": "values", "shape": [*shape[:-1], k or 1], "dtype": dtype},
        {"name": "indices", "shape": [*shape[:-1], k or 1], "dtype": "int32"},
    ]
    if k is not None:
        tensors[1]["data"] = np.array(k, np.int32)
    op = {"op": "TOPK_V2", "inputs": [0, 1], "outputs": [2, 3]}
    return build_model(tensors, [op], [0] if k is not None else [0, 1], [2, 3])


def run_both(data: bytes, feeds: dict[str, np.ndarray]):
    it = reference_interpreter(data)
    for detail in it.get_input_details():
        it.resize_tensor_input(detail["index"], feeds[detail["name"]].shape)
    it.allocate_tensors()
    for detail in it.get_input_details():
        it.set_tensor(detail["index"], feeds[detail["name"]])
    it.invoke()
    ref = {d["name"]: it.get_tensor(d["index"]) for d in it.get_output_details()}
    (ours,), runner = run_converted(tflite2qonnx.convert(data), [feeds])
    assert runner == "onnxruntime"
    return ref, ours


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_ties_come_out_lower_index_first_like_the_interpreter(dtype: str) -> None:
    """Rows of 12 values drawn from 4 levels: every top-5 holds ties."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, (3, 2, 12)).astype(dtype)
    ref, ours = run_both(topk_model([3, 2, 12], 5, dtype), {"x": x})
    np.testing.assert_array_equal(ours["indices"], ref["indices"])
    np.testing.assert_array_equal(ours["values"], ref["values"])
    assert ours["indices"].dtype == np.int32
    # by hand: the first row's order is a stable sort by decreasing value
    np.testing.assert_array_equal(ours["indices"][0, 0], np.argsort(-x[0, 0], kind="stable")[:5])


def test_k_as_an_input_is_read_at_run_time() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 9)).astype(np.float32)
    for k in (1, 4, 9):
        ref, ours = run_both(topk_model([4, 9], None), {"x": x, "k": np.array(k, np.int32)})
        assert ours["indices"].shape == (4, k)
        np.testing.assert_array_equal(ours["indices"], ref["indices"])
        np.testing.assert_array_equal(ours["values"], ref["values"])


def test_constant_k_beyond_the_last_axis_is_refused() -> None:
    with pytest.raises(ConversionError, match="TOPK_V2.*k = 13"):
        tflite2qonnx.convert(topk_model([2, 12], 13))


RECOMMENDATION = CORPUS / "tflite" / "tfexamples__recommendation_history10_top100.tflite"


@requires_corpus
def test_recommendation_model_matches_interpreter() -> None:
    """Ten item ids in, the 100 best items and their scores out: ids equal, scores within
    1e-4 relative (the ids are the TOPK_V2 indices, so equal ids mean equal ranking)."""
    model = tflite2qonnx.convert(RECOMMENDATION)
    it = reference_interpreter(RECOMMENDATION)
    (inp,) = it.get_input_details()
    rng = np.random.default_rng(2)
    histories = [rng.integers(1, 3953, inp["shape"]) for _ in range(6)]
    histories.append(np.array([5, 17, 0, 0, 0, 0, 0, 0, 0, 0]))  # 0 pads a short history
    for history in histories:
        x = history.astype(np.int32)
        it.set_tensor(inp["index"], x)
        it.invoke()
        (ours,), runner = run_converted(model, [{inp["name"]: x}])
        assert runner == "onnxruntime"
        for detail in it.get_output_details():
            ref, got = it.get_tensor(detail["index"]), ours[detail["name"]]
            assert got.dtype == ref.dtype and got.shape == ref.shape
            if ref.dtype == np.int32:
                np.testing.assert_array_equal(got, ref)
            else:
                assert np.max(np.abs(got - ref)) <= 1e-4 * max(1.0, float(np.max(np.abs(ref))))
