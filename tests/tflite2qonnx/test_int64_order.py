"""int64 MAXIMUM / MINIMUM / REDUCE_MAX / REDUCE_MIN, fused integer RELU and FLOOR_DIV on values
past 2**31 and 2**53: the converted models run in onnxruntime equal the TFLite interpreter
(numpy's floor division for FLOOR_DIV, which LiteRT has no int64 kernel for) element for
element. onnxruntime 1.31's own int64 Max / Min / Clip / ReduceMax / ReduceMin misorder values
whose high words are equal and low words differ in bit 31, and its int64 fmod goes through
double; the converters must not emit those on int64 (``ops.int64_order``)."""

from __future__ import annotations

import numpy as np
import pytest
from int64_order_models import (
    EDGES,
    SEGMENT_IDS,
    add_relu_model,
    extremes_model,
    floor_div_model,
    segment_extremes_model,
)
from litert_compare import reference_interpreter, run_ours

from tflite2qonnx import convert

UNRELIABLE_ON_INT64 = {"Max", "Min", "Clip", "ReduceMax", "ReduceMin"}


def _misordered_by_signed_low_words(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Where comparing (high word, low word as int32) orders a and b unlike their true order:
    the pairs onnxruntime's int64 Max / Min get wrong (hand-derived, to show the inputs hit)."""
    high_a, high_b = a >> 32, b >> 32
    low_a, low_b = (a & 0xFFFFFFFF).astype(np.uint32), (b & 0xFFFFFFFF).astype(np.uint32)
    return (high_a == high_b) & ((low_a.view(np.int32) < low_b.view(np.int32)) != (a < b))


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    """Each model's file and converted graph, built once."""
    root = tmp_path_factory.mktemp("int64")
    out = {}
    makers = {"extremes": extremes_model, "add_relu": add_relu_model,
              "floor_div": floor_div_model, "segments": segment_extremes_model}  # fmt: skip
    for name, make in makers.items():
        path = root / f"{name}.tflite"
        path.write_bytes(make())
        out[name] = (path, convert(path))
    return out


def _interpreter_outputs(path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    it = reference_interpreter(path)
    for d in it.get_input_details():
        it.set_tensor(d["index"], feeds[d["name"]])
    it.invoke()
    return {d["name"]: it.get_tensor(d["index"]) for d in it.get_output_details()}


def _int64_ops(model) -> list[str]:
    """The op types of nodes whose output the graph declares int64 (value_info and outputs)."""
    int64 = {
        v.name
        for v in (*model.graph.value_info, *model.graph.output)
        if v.type.tensor_type.elem_type == 7
    }
    return [n.op_type for n in model.graph.node if any(o in int64 for o in n.output)]


def test_int64_maximum_minimum_and_reductions_equal_the_interpreter_past_2_31(built) -> None:
    path, model = built["extremes"]
    assert not UNRELIABLE_ON_INT64 & set(n.op_type for n in model.graph.node)
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(6):
        x, y = (rng.choice(EDGES, (2, 3, 8)).astype(np.int64) for _ in range(2))
        flip = rng.random(x.shape) < 0.5  # y: x with bit 31 flipped, same high word
        feeds = {"x": x, "y": np.where(flip, x ^ np.int64(1 << 31), y)}
        hits += int(_misordered_by_signed_low_words(feeds["x"], feeds["y"]).sum())
        expected = _interpreter_outputs(path, feeds)
        ours = run_ours(model, feeds)
        assert set(ours) == set(expected)
        for name, want in expected.items():
            got = ours[name]
            assert got.dtype == np.int64 and got.shape == want.shape, name
            bad = np.argwhere(got != want)
            assert bad.size == 0, f"{name}: {len(bad)} differ, first at {bad[0]}"
    assert hits > 100  # the inputs do hold pairs a signed low-word comparison misorders


def test_int64_add_fused_relu_clamps_at_zero_as_the_interpreter(built) -> None:
    path, model = built["add_relu"]
    assert not UNRELIABLE_ON_INT64 & set(_int64_ops(model))
    x = np.array([2**31, 2**31 - 1, 2**32 - 1, -(2**31) - 1, -(2**32), 5, -5, 0] * 2, np.int64)
    y = np.array([0, 1, 0, 0, 0, 2**31 - 5, 2**31, -(2**31)] * 2, np.int64)
    y[8:] = -y[8:]
    feeds = {"x": x, "y": y}
    want = _interpreter_outputs(path, feeds)["z"]
    np.testing.assert_array_equal(want, np.maximum(x + y, 0))  # the kernel's rule, by hand
    np.testing.assert_array_equal(run_ours(model, feeds)["z"], want)


def test_int64_floor_div_is_exact_past_2_53(built) -> None:
    _, model = built["floor_div"]
    x = np.array([-(2**53) - 1, 2**53 + 1, 2**63 - 1, -(2**62) - 3, 2**55 + 7, -(2**55) - 7,
                  7, -7, 2**31, -(2**31) - 1, 0, 9, -9, 2**62 + 1, -(2**53) - 3, 2**60 - 1],
                 np.int64)  # fmt: skip
    y = np.array([2, -2, 7, 4, -3, 3, 2, 2, -3, 3, 5, -4, 4, 3, 4, -5], np.int64)
    np.testing.assert_array_equal(run_ours(model, {"x": x, "y": y})["q"], np.floor_divide(x, y))


def test_int64_unsorted_segment_max_and_min_past_2_31(built) -> None:
    _, model = built["segments"]
    assert not UNRELIABLE_ON_INT64 & set(n.op_type for n in model.graph.node)
    rng = np.random.default_rng(3)
    for _ in range(200):  # onnxruntime's ReduceMax misorders only some draws of this shape
        x = rng.choice(EDGES, 8).astype(np.int64)
        ours = run_ours(model, {"data": x})
        for name, pick in (("segment_max", np.max), ("segment_min", np.min)):
            want = np.array([pick(x[s == SEGMENT_IDS]) for s in range(3)], np.int64)
            np.testing.assert_array_equal(ours[name], want)
