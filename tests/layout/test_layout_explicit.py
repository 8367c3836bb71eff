"""Explicit layouts (the escape hatch) and the errors: unknown tensors, bad values, and two
layout sources that disagree on one tensor must raise, naming it, never yield a wrong graph."""

import numpy as np
import pytest
from layout_testkit import check, conv, count, f32, layout_record, model, rng, run
from onnx import helper

from qonnx_ingest.errors import ConversionError

NCHW = {"source": "NHWC", "stored": "NCHW", "perm": [0, 3, 1, 2]}


def add_model():
    return model(
        [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
        {"a": [2, 5, 6, 3], "b": [2, 5, 6, 3]},
        {"y": [2, 5, 6, 3]},
    )


def test_explicit_nchw_converts_a_graph_without_implicit_ops():
    out = check(add_model(), explicit={"a": "NCHW"})
    assert count(out, "Transpose") == 0
    assert layout_record(out) == {"a": NCHW, "b": NCHW, "y": NCHW}
    r = rng(31)
    a, b = f32(r.normal(size=(2, 5, 6, 3))), f32(r.normal(size=(2, 5, 6, 3)))
    np.testing.assert_allclose(run(out, {"a": a, "b": b})["y"], np.maximum(a + b, 0))


def test_explicit_layout_on_a_terminate_output():
    m = model(
        [helper.make_node("Reshape", ["x", "shape"], ["t"]), helper.make_node("Neg", ["t"], ["y"])],
        {"x": [2, 30, 3]},
        {"y": [2, 5, 6, 3]},
        {"shape": np.array([2, 5, 6, 3], np.int64)},
    )
    out = check(m, explicit={"t": "NCHW"})
    # t is written NHWC by the Reshape: one Transpose makes it NCHW; Neg and y follow
    assert count(out, "Transpose") == 1
    assert layout_record(out) == {"y": NCHW}
    x = f32(rng(32).normal(size=(2, 30, 3)))
    np.testing.assert_allclose(run(out, {"x": x})["y"], -x.reshape(2, 5, 6, 3))


def test_explicit_nhwc_keeps_an_unconstrained_tensor_in_source_order():
    r = rng(33)
    w = f32(r.normal(size=(2, 3, 1, 1)))
    m = model(
        [
            helper.make_node("Conv", ["x", "w"], ["c"]),
            helper.make_node("Reshape", ["c", "shape"], ["t"]),
            helper.make_node("Relu", ["t"], ["y"]),
        ],
        {"x": [2, 5, 6, 3]},
        {"y": [2, 6, 5, 2]},
        {"w": w, "shape": np.array([2, 6, 5, 2], np.int64)},
    )
    out = check(m, explicit={"y": "NHWC", "x": "NCHW"})
    assert count(out, "Transpose") == 1  # before the Reshape, which reads NHWC order
    assert layout_record(out) == {"x": NCHW}
    x = f32(r.normal(size=(2, 5, 6, 3)))
    expected = np.maximum(conv(x, w).reshape(2, 6, 5, 2), 0)
    np.testing.assert_allclose(run(out, {"x": x})["y"], expected, rtol=1e-5, atol=1e-5)


def test_rank_specific_names_are_accepted():
    m = model([helper.make_node("Abs", ["x"], ["y"])], {"x": [2, 7, 3]}, {"y": [2, 7, 3]})
    out = check(m, explicit={"x": "NCW"})
    assert layout_record(out)["y"] == {"source": "NWC", "stored": "NCW", "perm": [0, 2, 1]}


def conv_relu():
    w = f32(rng(34).normal(size=(2, 3, 1, 1)))
    return model(
        [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])],
        {"x": [2, 5, 6, 3]},
        {"y": [2, 5, 6, 2]},
        {"w": w},
    )


def test_explicit_layout_contradicting_a_conv_raises_naming_the_tensor():
    with pytest.raises(ConversionError) as err:
        check(conv_relu(), explicit={"y": "NHWC"})
    # y meets the Conv's requirement through the Relu; the message names y and both sources
    assert err.value.where == "y"
    assert "Conv" in err.value.message and "NHWC" in err.value.message


def test_two_explicit_layouts_that_disagree_raise():
    with pytest.raises(ConversionError) as err:
        check(add_model(), explicit={"a": "NCHW", "y": "NHWC"})
    assert err.value.where in {"a", "b", "s", "y"}
    assert "'a'" in err.value.message and "'y'" in err.value.message


@pytest.mark.parametrize(
    ("explicit", "where", "words"),
    [
        ({"nope": "NCHW"}, "nope", "does not have"),
        ({"w": "NCHW"}, "w", "constants"),
        ({"x": "NWHC"}, "x", "not NHWC or NCHW"),
        ({"x": "NCW"}, "x", "does not fit rank 4"),
    ],
)
def test_bad_explicit_layouts_raise(explicit, where, words):
    with pytest.raises(ConversionError) as err:
        check(conv_relu(), explicit=explicit)
    assert err.value.where == where and words in err.value.message


def test_flatten_output_cannot_be_forced_channels_first():
    m = model([helper.make_node("Flatten", ["x"], ["y"])], {"x": [2, 5, 6, 3]}, {"y": [2, 90]})
    with pytest.raises(ConversionError) as err:
        check(m, explicit={"y": "NCHW"})
    assert err.value.where == "y" and "rank 2" in err.value.message


def test_conv_on_a_tensor_of_unknown_rank_raises():
    m = model(
        [
            helper.make_node("Reshape", ["x", "s"], ["t"]),
            helper.make_node("Conv", ["t", "w"], ["y"]),
        ],
        {"x": [2, 90], "s": None},  # a shape input of unknown length
        {"y": [2, 5, 6, 2]},
        {"w": f32(np.ones((2, 3, 1, 1)))},
        elem={"s": 7},
    )
    with pytest.raises(ConversionError) as err:
        check(m)
    assert err.value.where == "t" and "value_info" in err.value.message


def test_the_input_model_is_not_modified():
    m = conv_relu()
    before = m.SerializeToString()
    check(m)
    assert m.SerializeToString() == before
