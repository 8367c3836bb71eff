"""Terminate ops read source order: exactly the Transposes their semantics need, shared, and
none where a Reshape does (only size-1 axes move) or a Transpose op can absorb the layout."""

import numpy as np
from layout_testkit import check, conv, count, f32, layout_record, model, rng, run
from onnx import helper


def conv_model(nodes, inits, outputs, inputs=None, value_info=None):
    r = rng(21)
    w = f32(r.normal(size=(4, 3, 3, 3)) * 0.3)
    m = model(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), *nodes],
        inputs or {"x": [2, 5, 6, 3]},
        outputs,
        {"w": w, **inits},
        value_info=value_info,
    )
    x = f32(r.normal(size=(2, 5, 6, 3)))
    return m, x, conv(x, w, pad=1)


def test_reshape_after_conv_sees_nhwc_element_order():
    wm = f32(rng(22).normal(size=(120, 10)))
    m, x, c = conv_model(
        [
            helper.make_node("Reshape", ["c", "flat"], ["f"]),
            helper.make_node("MatMul", ["f", "wm"], ["y"]),
            helper.make_node("Reshape", ["c", "rows"], ["y2"]),
        ],
        {"wm": wm, "flat": np.array([2, 120], np.int64), "rows": np.array([2, 30, 4], np.int64)},
        {"y": [2, 10], "y2": [2, 30, 4]},
    )
    out = check(m)
    # c is channels-first (Conv output); both Reshapes must flatten it in NHWC order: one
    # Transpose back to NHWC, shared by the two readers
    assert count(out, "Transpose") == 1
    record = layout_record(out)
    assert set(record) == {"x"}  # y, y2 are terminate outputs: source order, not recorded
    got = run(out, {"x": x})
    np.testing.assert_allclose(got["y"], c.reshape(2, 120) @ wm, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got["y2"], c.reshape(2, 30, 4), rtol=1e-5, atol=1e-5)


def test_global_pool_head_needs_no_transpose_even_with_dynamic_batch():
    wm = f32(rng(23).normal(size=(4, 10)))
    m, x, c = conv_model(
        [
            helper.make_node("GlobalAveragePool", ["c"], ["p"]),
            helper.make_node("Flatten", ["p"], ["f"]),
            helper.make_node("Gemm", ["f", "wm"], ["y"]),
        ],
        {"wm": wm},
        {"y": ["batch", 10]},
        inputs={"x": ["batch", 5, 6, 3]},
        value_info={"p": ["batch", 1, 1, 4]},
    )
    out = check(m)
    # p is [N,C,1,1] stored, [N,1,1,C] in source order: the same elements in the same order,
    # so a Reshape (batch copied with 0) replaces the Transpose
    assert count(out, "Transpose") == 0
    assert count(out, "Reshape") == 1
    assert [d.dim_param or d.dim_value for d in out.graph.input[0].type.tensor_type.shape.dim] == [
        "batch",
        3,
        5,
        6,
    ]
    expected = c.mean(axis=(1, 2)) @ wm
    np.testing.assert_allclose(run(out, {"x": x})["y"], expected, rtol=1e-5, atol=1e-5)


def test_terminate_output_feeding_conv_gets_one_transpose():
    r = rng(24)
    w = f32(r.normal(size=(2, 3, 1, 1)))
    m = model(
        [
            helper.make_node("Reshape", ["x", "shape"], ["t"]),
            helper.make_node("Relu", ["t"], ["u"]),
            helper.make_node("Conv", ["u", "w"], ["y"]),
        ],
        {"x": [2, 30, 3]},
        {"y": [2, 5, 6, 2]},
        {"w": w, "shape": np.array([2, 5, 6, 3], np.int64)},
    )
    out = check(m)
    # the Reshape writes NHWC; Relu and Conv want NCHW: one Transpose right after the Reshape
    assert count(out, "Transpose") == 1
    assert set(layout_record(out)) == {"y"}  # x is rank 3 but read only by the Reshape
    x = f32(r.normal(size=(2, 30, 3)))
    expected = conv(np.maximum(x.reshape(2, 5, 6, 3), 0), w)
    np.testing.assert_allclose(run(out, {"x": x})["y"], expected, rtol=1e-5, atol=1e-5)


def test_transpose_is_composed_with_the_layout():
    m, x, c = conv_model(
        [
            helper.make_node("Transpose", ["c"], ["nchw"], perm=[0, 3, 1, 2]),
            helper.make_node("Transpose", ["c"], ["swap"], perm=[0, 2, 1, 3]),
        ],
        {},
        {"nchw": [2, 4, 5, 6], "swap": [2, 6, 5, 4]},
    )
    out = check(m)
    # the source model's own NHWC->NCHW Transpose becomes an Identity (c already is NCHW);
    # the H/W swap stays one Transpose with a composed perm: nothing is added
    assert count(out, "Transpose") == 1
    assert count(out, "Identity") == 1
    perm = next(n for n in out.graph.node if n.op_type == "Transpose").attribute[0].ints
    assert list(perm) == [0, 3, 2, 1]
    got = run(out, {"x": x})
    np.testing.assert_allclose(got["nchw"], c.transpose(0, 3, 1, 2), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["swap"], c.transpose(0, 2, 1, 3), rtol=1e-5, atol=1e-5)


def test_source_transpose_output_feeding_conv_is_written_channels_first():
    r = rng(25)
    w = f32(r.normal(size=(2, 3, 1, 1)))
    m = model(
        [
            helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1, 3]),  # NHWC: swap H, W
            helper.make_node("Conv", ["t", "w"], ["y"]),
        ],
        {"x": [2, 5, 6, 3]},
        {"y": [2, 6, 5, 2]},
        {"w": w},
    )
    out = check(m)
    # x stays NHWC (only the Transpose reads it); the Transpose writes t as NCHW directly
    assert count(out, "Transpose") == 1
    assert set(layout_record(out)) == {"y"}
    x = f32(r.normal(size=(2, 5, 6, 3)))
    expected = conv(x.transpose(0, 2, 1, 3), w)
    np.testing.assert_allclose(run(out, {"x": x})["y"], expected, rtol=1e-5, atol=1e-5)


def test_graph_without_implicit_ops_is_unchanged():
    m = model(
        [helper.make_node("Relu", ["x"], ["y"])],
        {"x": [2, 5, 6, 3]},
        {"y": [2, 5, 6, 3]},
    )
    out = check(m)
    assert out.graph == m.graph
    assert layout_record(out) == {}
