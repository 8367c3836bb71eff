"""Attribute ops after a Conv: their axes (attributes or constant inputs) are renumbered so
they still name the same source axes. References are plain numpy on the NHWC result."""

import numpy as np
import pytest
from layout_testkit import (
    check,
    conv,
    count,
    f32,
    initializer_shapes,
    layout_record,
    model,
    rng,
    run,
    softmax,
)
from onnx import TensorProto, helper, numpy_helper

I64 = TensorProto.INT64


def after_conv(nodes, inits=None, outputs=None, opset=13, inputs=None, elem=None, value_info=None):
    """x[2,5,6,3] -> Conv(w[4,3,3,3], pad 1) -> c[2,5,6,4] -> nodes; returns model, x, c."""
    r = rng(11)
    w = f32(r.normal(size=(4, 3, 3, 3)) * 0.3)
    m = model(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), *nodes],
        {"x": [2, 5, 6, 3], **(inputs or {})},
        outputs or {"y": None},
        {"w": w, **(inits or {})},
        value_info={"c": [2, 5, 6, 4], **(value_info or {})},
        opset=opset,
        elem=elem,
    )
    x = f32(r.normal(size=(2, 5, 6, 3)))
    return m, x, conv(x, w, pad=1)


def i64(*values) -> np.ndarray:
    return np.array(values, np.int64)


@pytest.mark.parametrize("axis", [-1, 3, 1, 2])
def test_softmax_axis_follows_the_permutation(axis):
    m, x, c = after_conv([helper.make_node("Softmax", ["c"], ["y"], axis=axis)])
    expected = softmax(c, axis)
    out = check(m, {"y": expected.shape})
    assert count(out, "Transpose") == 0
    assert layout_record(out)["y"]["stored"] == "NCHW"
    np.testing.assert_allclose(run(out, {"x": x})["y"], expected, rtol=1e-5, atol=1e-6)


def test_softmax_before_opset_13_terminates():
    m, x, c = after_conv([helper.make_node("LogSoftmax", ["c"], ["y"], axis=-1)], opset=11)
    expected = np.log(softmax(c, -1))
    out = check(m, {"y": expected.shape})
    # opset 11 coerces to 2D at `axis`: no channels-first axis means "C", so it reads NHWC
    # through one Transpose, and its output stays channels-last
    assert count(out, "Transpose") == 1
    assert "y" not in layout_record(out)
    np.testing.assert_allclose(run(out, {"x": x})["y"], expected, rtol=1e-5, atol=1e-5)


def reduce_case(op, axes, keepdims, opset=13, axes_input=False):
    attrs = {"keepdims": keepdims}
    inputs, inits = ["c"], {}
    if axes_input:
        inputs.append("axes")
        inits["axes"] = i64(*axes)
    else:
        attrs["axes"] = axes
    return after_conv([helper.make_node(op, inputs, ["y"], **attrs)], inits, opset=opset)


@pytest.mark.parametrize(
    ("op", "axes", "keepdims", "opset", "axes_input", "stored", "transposes"),
    [
        ("ReduceMean", [1, 2], 1, 13, False, "NCHW", 0),
        ("ReduceMean", [1, 2], 0, 13, False, None, 0),  # NCHW minus H, W = [N, C]: source order
        ("ReduceMax", [-1], 0, 13, False, None, 0),  # NCHW minus C = NHW: source order
        ("ReduceMax", [-1], 1, 13, False, "NCHW", 0),
        ("ReduceMean", [1], 0, 13, False, "NCW", 0),  # NCHW minus H = NCW: channels-first NWC
        ("ReduceSum", [2], 0, 13, True, "NCW", 0),
        ("ReduceSum", [3], 1, 13, True, "NCHW", 0),  # opset 13 ReduceSum: axes input
        ("ReduceMean", [2, 3], 1, 18, True, "NCHW", 0),  # opset 18: every Reduce takes input
        ("ReduceMin", [0], 0, 13, False, None, 1),  # [C,H,W] stored vs [H,W,C]: one Transpose
    ],
)
def test_reduce_axes_and_keepdims(op, axes, keepdims, opset, axes_input, stored, transposes):
    m, x, c = reduce_case(op, axes, keepdims, opset, axes_input)
    fn = {"ReduceMean": np.mean, "ReduceMax": np.max, "ReduceSum": np.sum, "ReduceMin": np.min}
    expected = fn[op](c, axis=tuple(axes), keepdims=bool(keepdims))
    out = check(m, {"y": expected.shape})
    assert count(out, "Transpose") == transposes
    assert layout_record(out).get("y", {}).get("stored") == stored
    np.testing.assert_allclose(run(out, {"x": x})["y"], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("keepdims", [1, 0])
def test_argmax_over_channels(keepdims):
    m, x, c = after_conv(
        [helper.make_node("ArgMax", ["c"], ["y"], axis=-1, keepdims=keepdims)],
        elem={"y": I64},
    )
    expected = np.argmax(c, axis=-1)
    expected = expected[..., None] if keepdims else expected
    out = check(m, {"y": expected.shape})
    assert count(out, "Transpose") == 0
    np.testing.assert_array_equal(run(out, {"x": x})["y"], expected)


def test_concat_along_channels_with_input_and_constant():
    k = f32(rng(12).normal(size=(2, 5, 6, 2)))
    m, x, c = after_conv(
        [
            helper.make_node("Concat", ["c", "x", "k"], ["cat"], axis=-1),
            helper.make_node("Relu", ["cat"], ["y"]),
        ],
        {"k": k},
    )
    expected = np.maximum(np.concatenate([c, x, k], axis=-1), 0)
    out = check(m, {"y": expected.shape})
    assert count(out, "Transpose") == 0
    np.testing.assert_allclose(run(out, {"x": x})["y"], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset", [10, 13, 18])
def test_pad_spatial_and_channels(opset):
    pads = [0, 1, 2, 0, 0, 2, 1, 1]  # NHWC begins, then ends
    if opset == 10:
        node = helper.make_node("Pad", ["c"], ["y"], pads=pads, value=0.5)
        inits = {}
    else:
        node = helper.make_node("Pad", ["c", "pads", "cv"], ["y"])
        inits = {"pads": i64(*pads), "cv": f32(0.5)}
    m, x, c = after_conv([node], inits, opset=opset)
    expected = np.pad(c, [(0, 0), (1, 2), (2, 1), (0, 1)], constant_values=0.5)
    out = check(m, {"y": expected.shape})
    assert count(out, "Transpose") == 0
    np.testing.assert_allclose(run(out, {"x": x})["y"], expected, rtol=1e-5, atol=1e-5)


def test_pad_with_axes_input():
    node = helper.make_node("Pad", ["c", "pads", "", "axes"], ["y"])
    inits = {"pads": i64(1, 0, 0, 2), "axes": i64(1, -1)}  # H: (1, 0), C: (0, 2)
    m, x, c = after_conv([node], inits, opset=18)
    expected = np.pad(c, [(0, 0), (1, 0), (0, 0), (0, 2)])
    out = check(m, {"y": expected.shape})
    assert count(out, "Transpose") == 0
    np.testing.assert_allclose(run(out, {"x": x})["y"], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("starts", "ends", "axes", "steps", "index"),
    [
        ([1, 0], [4, 2], [1, 3], None, np.s_[:, 1:4, :, 0:2]),
        ([0, 1, 0, 1], [2, 5, 6, 4], None, None, np.s_[:, 1:5, :, 1:4]),
        ([3, 5], [0, 0], [-1, 2], [-1, -2], np.s_[:, :, 5:0:-2, 3:0:-1]),
    ],
)
def test_slice(starts, ends, axes, steps, index):
    inputs, inits = ["c", "starts", "ends"], {"starts": i64(*starts), "ends": i64(*ends)}
    if axes is not None:
        inputs.append("axes")
        inits["axes"] = i64(*axes)
    if steps is not None:
        inputs.append("steps")
        inits["steps"] = i64(*steps)
    m, x, c = after_conv([helper.make_node("Slice", inputs, ["y"])], inits)
    out = check(m, {"y": c[index].shape})
    assert count(out, "Transpose") == 0
    np.testing.assert_allclose(run(out, {"x": x})["y"], c[index], rtol=1e-5, atol=1e-5)


def test_split_gather_tile_cumsum_expand():
    nodes = [
        helper.make_node("Split", ["c", "split"], ["s1", "s2"], axis=-1),
        helper.make_node("Gather", ["s2", "idx"], ["g"], axis=3),  # channels [2, 0] of s2
        helper.make_node("Tile", ["g", "reps"], ["t"]),
        helper.make_node("CumSum", ["t", "cax"], ["cs"]),
        helper.make_node("Expand", ["z", "shape"], ["e"]),
        helper.make_node("Add", ["cs", "e"], ["y"]),
        helper.make_node("Relu", ["s1"], ["y1"]),
    ]
    inits = {
        "split": i64(1, 3),
        "idx": i64(2, 0),
        "reps": i64(1, 1, 2, 2),
        "cax": np.array(-1, np.int64),
        "shape": i64(2, 1, 12, 4),
    }
    m, x, c = after_conv(nodes, inits, inputs={"z": [1, 5, 1, 4]}, outputs={"y": None, "y1": None})
    z = f32(rng(13).normal(size=(1, 5, 1, 4)))
    s1, s2 = c[..., :1], c[..., 1:]
    t = np.tile(s2[..., [2, 0]], (1, 1, 2, 2))
    expected = np.cumsum(t, axis=-1) + np.broadcast_to(z, (2, 5, 12, 4))
    out = check(m, {"y": expected.shape, "y1": s1.shape})
    # everything is linked to the Conv output: no Transpose; z is expanded channels-first too
    assert count(out, "Transpose") == 0
    assert layout_record(out)["z"]["stored"] == "NCHW"
    assert initializer_shapes(out)["cax"] == ()  # the scalar axis stays a scalar
    got = run(out, {"x": x, "z": z})
    np.testing.assert_allclose(got["y"], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["y1"], np.maximum(s1, 0), rtol=1e-5, atol=1e-5)


def test_dynamic_pads_terminate():
    m, x, c = after_conv(
        [helper.make_node("Pad", ["c", "pads"], ["y"])], inputs={"pads": [8]}, elem={"pads": I64}
    )
    pads = i64(0, 1, 0, 0, 0, 0, 2, 0)
    expected = np.pad(c, [(0, 0), (1, 0), (0, 2), (0, 0)])
    out = check(m, {"y": [2, "h", "w", 4]})
    # pads computed at run time cannot be renumbered: Pad reads NHWC through one Transpose
    assert count(out, "Transpose") == 1
    got = run(out, {"x": x, "pads": pads})["y"]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_slice_before_opset_10_uses_attributes():
    node = helper.make_node("Slice", ["c"], ["y"], starts=[1, 2], ends=[3, 4], axes=[-1, 1])
    m, x, c = after_conv([node], opset=9)
    expected = c[:, 2:4, :, 1:3]
    out = check(m, {"y": expected.shape})
    assert count(out, "Transpose") == 0
    np.testing.assert_allclose(run(out, {"x": x})["y"], expected, rtol=1e-5, atol=1e-5)


def test_per_axis_quantize_dequantize_linear_follow_the_channel_axis():
    r = rng(14)
    scale = f32(r.uniform(0.01, 0.05, size=4))
    zp = np.array([0, 3, -2, 1], np.int8)
    nodes = [
        helper.make_node("QuantizeLinear", ["c", "s", "zp"], ["q"], axis=3),
        helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], axis=-1),
    ]
    m, x, c = after_conv(
        nodes, {"s": scale, "zp": zp}, value_info={"q": [2, 5, 6, 4]}, elem={"q": TensorProto.INT8}
    )
    q = np.clip(np.round(c / scale) + zp, -128, 127)
    expected = f32((q - zp) * scale)
    out = check(m, {"y": expected.shape})
    assert count(out, "Transpose") == 0
    assert initializer_shapes(out)["s"] == (4,)  # 1-D per-axis parameters stay 1-D
    np.testing.assert_allclose(run(out, {"x": x})["y"], expected, rtol=1e-5, atol=1e-6)


def test_constant_of_shape_is_generated_channels_first():
    value = helper.make_tensor("v", TensorProto.FLOAT, [1], [1.5])
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["k"], value=value),
        helper.make_node("Add", ["c", "k"], ["y"]),
    ]
    m, x, c = after_conv(nodes, {"shape": i64(2, 5, 6, 4)})
    out = check(m, {"y": c.shape})
    # ConstantOfShape writes whatever order its reader wants: its shape input is reordered
    assert count(out, "Transpose") == 0
    shape = next(t for t in out.graph.initializer if t.name == "shape")
    assert list(numpy_helper.to_array(shape)) == [2, 4, 5, 6]
    np.testing.assert_allclose(run(out, {"x": x})["y"], c + 1.5, rtol=1e-5, atol=1e-5)


def test_more_axis_ops_and_resize():
    idx = rng(15).integers(0, 4, size=(2, 5, 6, 4)).astype(np.int64)
    nodes = [
        helper.make_node("TopK", ["c", "k"], ["top", "arg"], axis=-1),
        helper.make_node("GatherElements", ["c", "idx"], ["ge"], axis=3),
        helper.make_node("LpNormalization", ["c"], ["l2"], axis=-1, p=2),
        helper.make_node("Compress", ["c", "keep"], ["cmp"], axis=-1),
        helper.make_node("Hardmax", ["c"], ["hm"], axis=-1),
        helper.make_node("LogSoftmax", ["c"], ["ls"], axis=2),
        helper.make_node(
            "Resize",
            ["c", "", "scales"],
            ["up"],
            mode="nearest",
            coordinate_transformation_mode="asymmetric",
            nearest_mode="floor",
        ),
    ]
    inits = {
        "k": i64(2),
        "idx": idx,
        "keep": np.array([True, False, True, True]),
        "scales": f32([1, 1, 2, 2]),  # an implicit op's parameters are in ONNX (NCHW) form
    }
    names = ["top", "arg", "ge", "l2", "cmp", "hm", "ls", "up"]
    elem = {"arg": I64}
    m, x, c = after_conv(nodes, inits, outputs=dict.fromkeys(names), elem=elem)
    order = np.argsort(-c, axis=-1, kind="stable")[..., :2]
    hard = (c == c.max(axis=-1, keepdims=True)).astype(np.float32)
    expected = {
        "top": np.take_along_axis(c, order, axis=-1),
        "arg": order,
        "ge": np.take_along_axis(c, idx, axis=3),
        "l2": c / np.linalg.norm(c, axis=-1, keepdims=True),
        "cmp": c[..., [0, 2, 3]],
        "hm": hard,
        "ls": np.log(softmax(c, 2)),
        "up": np.repeat(np.repeat(c, 2, axis=1), 2, axis=2),
    }
    out = check(m, {n: v.shape for n, v in expected.items()})
    assert count(out, "Transpose") == 0
    assert initializer_shapes(out)["idx"] == (2, 4, 5, 6)  # constant indices follow the data
    got = run(out, {"x": x})
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-5, err_msg=name)
