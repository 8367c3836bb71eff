"""Implicit and transparent ops: Conv/pool chains of ranks 3, 4, 5, graph I/O, broadcasting,
constants and quantizers. Every expected value is computed in NHWC by numpy."""

import numpy as np
import pytest
from layout_testkit import (
    check,
    conv,
    count,
    f32,
    initializer_shapes,
    layout_record,
    maxpool,
    model,
    quant,
    relu,
    rng,
    run,
)
from onnx import helper

from qonnx_ingest.quant import QONNX_DOMAIN

SPATIAL = {3: (7,), 4: (5, 6), 5: (3, 4, 5)}
PERMS = {3: [0, 2, 1], 4: [0, 3, 1, 2], 5: [0, 4, 1, 2, 3]}
NAMES = {3: ("NWC", "NCW"), 4: ("NHWC", "NCHW"), 5: ("NDHWC", "NCDHW")}


def residual_block(rank: int, c: int = 3, o: int = 4):
    """x -> Conv(3^k, pad 1) -> Relu -> Add(x) -> Conv(1^k) -> y, and its numpy result."""
    r = rng(rank)
    nsp = rank - 2
    sp = SPATIAL[rank]
    w1 = f32(r.normal(size=(c, c, *(3,) * nsp)) * 0.3)
    b1 = f32(r.normal(size=c))
    w2 = f32(r.normal(size=(o, c, *(1,) * nsp)))
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1] * 2 * nsp),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Add", ["r1", "x"], ["a1"]),
        helper.make_node("Conv", ["a1", "w2"], ["y"]),
    ]
    m = model(
        nodes,
        {"x": [2, *sp, c]},
        {"y": [2, *sp, o]},
        {"w1": w1, "b1": b1, "w2": w2},
        value_info={"c1": [2, *sp, c]},
    )
    x = f32(r.normal(size=(2, *sp, c)))
    expected = conv(relu(conv(x, w1, b1, pad=1)) + x, w2)
    return m, x, expected


@pytest.mark.parametrize("rank", [3, 4, 5])
def test_conv_relu_add_conv_needs_no_transpose(rank):
    m, x, expected = residual_block(rank)
    out = check(m)
    # every tensor is linked to a Conv port through Relu/Add: all channels-first, I/O included
    assert count(out, "Transpose") == 0
    src, stored = NAMES[rank]
    entry = {"source": src, "stored": stored, "perm": PERMS[rank]}
    assert layout_record(out) == {"x": entry, "y": entry}
    x_dims = [d.dim_value for d in out.graph.input[0].type.tensor_type.shape.dim]
    assert x_dims == [x.shape[a] for a in PERMS[rank]]
    c1 = next(vi for vi in out.graph.value_info if vi.name == "c1")
    assert [d.dim_value for d in c1.type.tensor_type.shape.dim] == x_dims
    np.testing.assert_allclose(run(out, {"x": x})["y"], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rank", [3, 4, 5])
def test_keep_io_layout_adds_one_transpose_per_io_tensor(rank):
    m, x, expected = residual_block(rank)
    out = check(m, keep_io_layout=True)
    # x is fed channels-last (1 Transpose in) and y returned channels-last (1 Transpose out);
    # x's two readers (Conv and Add) share the one Transpose
    assert count(out, "Transpose") == 2
    assert layout_record(out) == {}
    x_dims = [d.dim_value for d in out.graph.input[0].type.tensor_type.shape.dim]
    assert x_dims == list(x.shape)
    np.testing.assert_allclose(run(out, {"x": x})["y"], expected, rtol=1e-5, atol=1e-5)


def test_keep_layout_keeps_only_the_named_io_tensor_in_source_order():
    """keep_layout=["x"] (a streaming state fed back as it is): x stays channels-last behind
    one Transpose, y is stored channels-first and recorded as such."""
    m, x, expected = residual_block(4)
    out = check(m, keep_layout=["x"])
    assert count(out, "Transpose") == 1
    assert set(layout_record(out)) == {"y"}
    x_dims = [d.dim_value for d in out.graph.input[0].type.tensor_type.shape.dim]
    assert x_dims == list(x.shape)
    assert [d.dim_value for d in out.graph.output[0].type.tensor_type.shape.dim][1] == 4
    # run feeds and reads back per the layout record: y's channels-first storage undone
    np.testing.assert_allclose(run(out, {"x": x})["y"], expected, rtol=1e-5, atol=1e-5)


def test_pool_and_batchnorm_chain():
    r = rng(1)
    c = 3
    scale, bias, mean = f32(r.uniform(0.5, 2, c)), f32(r.normal(size=c)), f32(r.normal(size=c))
    var = f32(r.uniform(0.5, 2, c))
    nodes = [
        helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2]),
        helper.make_node("BatchNormalization", ["p", "s", "b", "m", "v"], ["n"]),
        helper.make_node("Sigmoid", ["n"], ["y"]),
    ]
    m = model(
        nodes,
        {"x": [2, 5, 6, c]},
        {"y": [2, 4, 5, c]},
        {"s": scale, "b": bias, "m": mean, "v": var},
    )
    x = f32(r.normal(size=(2, 5, 6, c)))
    n = (maxpool(x, 2) - mean) / np.sqrt(var + 1e-5) * scale + bias
    out = check(m)
    assert count(out, "Transpose") == 0
    # BatchNormalization's [C] parameters are ONNX-form already: untouched
    assert initializer_shapes(out)["s"] == (c,)
    np.testing.assert_allclose(run(out, {"x": x})["y"], 1 / (1 + np.exp(-n)), rtol=1e-5, atol=1e-6)


def conv_then(nodes_after, inits_after, out_shape, value_info=None, opset=13, inputs=None):
    """x[2,5,6,3] -> Conv(w[4,3,3,3], pad 1) -> c[2,5,6,4] -> nodes_after -> y."""
    r = rng(7)
    w = f32(r.normal(size=(4, 3, 3, 3)) * 0.3)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), *nodes_after]
    m = model(
        nodes,
        {"x": [2, 5, 6, 3], **(inputs or {})},
        {"y": out_shape},
        {"w": w, **inits_after},
        value_info={"c": [2, 5, 6, 4], **(value_info or {})},
        opset=opset,
    )
    x = f32(r.normal(size=(2, 5, 6, 3)))
    return m, x, conv(x, w, pad=1)


def test_channel_constant_operands_are_reshaped_in_place():
    r = rng(2)
    bias, gain = f32(r.normal(size=4)), f32(r.normal(size=(1, 1, 1, 4)))
    m, x, c = conv_then(
        [
            helper.make_node("Add", ["c", "bias"], ["a"]),
            helper.make_node("Mul", ["a", "gain"], ["y"]),
        ],
        {"bias": bias, "gain": gain},
        [2, 5, 6, 4],
    )
    out = check(m)
    # [C] and [1,1,1,C] become [1,C,1,1] at conversion time: no runtime node at all
    assert initializer_shapes(out)["bias"] == (1, 4, 1, 1)
    assert initializer_shapes(out)["gain"] == (1, 4, 1, 1)
    assert count(out, "Transpose") == count(out, "Reshape") == 0
    np.testing.assert_allclose(run(out, {"x": x})["y"], (c + bias) * gain, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("z_shape", "transposes", "why"),
    [
        ([4], 0, "[C] -> [1,C,1,1] keeps the element order: a Reshape"),
        ([6, 4], 1, "[W,C] -> [1,C,1,W] reorders W and C: one Transpose, then a Reshape"),
        ([5, 6, 4], 1, "[H,W,C] -> [1,C,H,W]: one Transpose, then a Reshape"),
        ([6, 1], 0, "[W,1] -> [1,1,1,W]: only a size-1 axis moves, a Reshape suffices"),
    ],
)
def test_lower_rank_activation_operand_is_made_full_rank(z_shape, transposes, why):
    m, x, c = conv_then(
        [helper.make_node("Add", ["c", "z"], ["y"])], {}, [2, 5, 6, 4], inputs={"z": z_shape}
    )
    out = check(m)
    assert count(out, "Transpose") == transposes, why
    assert count(out, "Reshape") == 1
    assert "z" not in layout_record(out)  # a broadcast operand keeps its own (source) layout
    z = f32(rng(3).normal(size=z_shape))
    np.testing.assert_allclose(run(out, {"x": x, "z": z})["y"], c + z, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset", [11, 13])
def test_lower_rank_operand_with_dynamic_dim_uses_unsqueeze(opset):
    m, x, c = conv_then(
        [helper.make_node("Mul", ["c", "z"], ["y"])],
        {},
        [2, 5, 6, 4],
        inputs={"z": ["k"]},
        opset=opset,
    )
    out = check(m)
    # a Reshape needs a static shape; Unsqueeze(axes 0, 2, 3) does not (attribute before 13)
    assert count(out, "Unsqueeze") == 1 and count(out, "Transpose") == 0
    z = f32(rng(4).normal(size=4))
    np.testing.assert_allclose(run(out, {"x": x, "z": z})["y"], c * z, rtol=1e-5, atol=1e-5)


def test_constant_shared_by_consumers_in_two_layouts_is_duplicated():
    r = rng(5)
    k, wm = f32(r.normal(size=4)), f32(r.normal(size=(90, 4)))
    m, x, c = conv_then(
        [
            helper.make_node("Add", ["c", "k"], ["y"]),  # channels-first: needs [1,4,1,1]
            helper.make_node("Reshape", ["x", "flat"], ["f"]),
            helper.make_node("MatMul", ["f", "wm"], ["mm"]),
            helper.make_node("Add", ["mm", "k"], ["y2"]),  # rank 2: needs [4] as it is
        ],
        {"k": k, "wm": wm, "flat": np.array([2, 90], np.int64)},
        [2, 5, 6, 4],
    )
    m.graph.output.append(helper.make_tensor_value_info("y2", 1, [2, 4]))
    out = check(m)
    shapes = initializer_shapes(out)
    assert shapes["k"] == (4,)
    assert sorted(s for n, s in shapes.items() if n.startswith("k")) == [(1, 4, 1, 1), (4,)]
    # x is channels-first (it feeds the Conv): the Reshape reads it through one Transpose
    assert count(out, "Transpose") == 1
    got = run(out, {"x": x})
    np.testing.assert_allclose(got["y"], c + k, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["y2"], x.reshape(2, 90) @ wm + k, rtol=1e-5, atol=1e-5)


def test_constant_shared_by_two_channels_first_consumers_changes_in_place():
    r = rng(6)
    k = f32(r.normal(size=4))
    m, x, c = conv_then(
        [
            helper.make_node("Add", ["c", "k"], ["a"]),
            helper.make_node("Mul", ["a", "k"], ["y"]),
        ],
        {"k": k},
        [2, 5, 6, 4],
    )
    out = check(m)
    assert [s for n, s in initializer_shapes(out).items() if n.startswith("k")] == [(1, 4, 1, 1)]
    np.testing.assert_allclose(run(out, {"x": x})["y"], (c + k) * k, rtol=1e-5, atol=1e-5)


def test_constant_node_is_transposed_at_conversion_time():
    k = f32(rng(8).normal(size=(1, 1, 6, 4)))
    m, x, c = conv_then(
        [
            helper.make_node("Constant", [], ["k"], value=helper.make_tensor("kv", 1, k.shape, k)),
            helper.make_node("Sub", ["c", "k"], ["y"]),
        ],
        {},
        [2, 5, 6, 4],
    )
    out = check(m)
    assert count(out, "Transpose") == count(out, "Constant") == 0
    assert initializer_shapes(out)["k"] == (1, 4, 1, 6)
    np.testing.assert_allclose(run(out, {"x": x})["y"], c - k, rtol=1e-5, atol=1e-5)


def quant_node(x: str, y: str):
    inputs = [x, "scale", "zp", "bits"]
    return helper.make_node(
        "Quant", inputs, [y], domain=QONNX_DOMAIN, signed=1, narrow=0, rounding_mode="ROUND"
    )


@pytest.mark.parametrize("scale_shape", [(1, 1, 1, 4), (4,)])
def test_per_channel_quant_parameters_follow_the_tensor(scale_shape):
    r = rng(9)
    scale = f32(r.uniform(0.05, 0.2, size=scale_shape))
    w2 = f32(r.normal(size=(2, 4, 1, 1)))
    m, x, c = conv_then(
        [quant_node("c", "q"), helper.make_node("Conv", ["q", "w2"], ["y"])],
        {"scale": scale, "zp": f32(0), "bits": f32(4), "w2": w2},
        [2, 5, 6, 2],
    )
    out = check(m)
    assert initializer_shapes(out)["scale"] == (1, 4, 1, 1)
    assert initializer_shapes(out)["bits"] == ()
    assert count(out, "Transpose") == 0
    expected = conv(quant(c, scale.reshape(1, 1, 1, 4), bits=4), w2)
    np.testing.assert_allclose(run(out, {"x": x})["y"], expected, rtol=1e-5, atol=1e-5)


def test_quantized_constant_operand_is_transposed_not_at_runtime():
    r = rng(10)
    k = f32(r.normal(size=(1, 5, 6, 4)))
    scale = f32(r.uniform(0.05, 0.2, size=(1, 1, 1, 4)))
    m, x, c = conv_then(
        [
            quant_node("k", "kq"),
            helper.make_node("Add", ["c", "kq"], ["y"]),
        ],
        {"k": k, "scale": scale, "zp": f32(0), "bits": f32(8)},
        [2, 5, 6, 4],
    )
    out = check(m)
    # Quant is transparent: its constant input and its scale are both transposed in place
    assert initializer_shapes(out)["k"] == (1, 4, 5, 6)
    assert initializer_shapes(out)["scale"] == (1, 4, 1, 1)
    assert count(out, "Transpose") == 0
    np.testing.assert_allclose(run(out, {"x": x})["y"], c + quant(k, scale), rtol=1e-5, atol=1e-5)


def test_result_survives_finish_model_and_keeps_the_layout_record():
    from qonnx_ingest.finish import finish_model

    r = rng(11)
    scale = f32(r.uniform(0.05, 0.2, size=4))
    k = f32(r.normal(size=4))
    m, x, c = conv_then(
        [
            quant_node("c", "q"),
            helper.make_node("Add", ["q", "k"], ["a"]),
            helper.make_node("Reshape", ["a", "flat"], ["y"]),
        ],
        {"scale": scale, "zp": f32(0), "bits": f32(6), "k": k, "flat": np.array([2, -1], np.int64)},
        [2, 120],
    )
    out = finish_model(check(m), metadata={"source": "test"})[0]
    assert set(layout_record(out)) == {"x"}
    assert count(out, "Transpose") == 1  # before the Reshape, which flattens NHWC order
    expected = (quant(c, scale, bits=6) + k).reshape(2, -1)
    np.testing.assert_allclose(run(out, {"x": x})["y"], expected, rtol=1e-5, atol=1e-5)
