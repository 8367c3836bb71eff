"""Chains of Transpose / Reshape (with per-tensor quantizers) collapse to at most one Transpose,
and a Reshape's dims come from its constant shape: counts derived by hand, numbers by numpy."""

import numpy as np
import onnx
from layout_testkit import check, conv, count, f32, model, quant, rng, run
from onnx import TensorProto, helper

from layout.collapse import collapse_moves
from qonnx_ingest.quant import QONNX_DOMAIN


def conv_block(tail_nodes, tail_inits, outputs, value_info=None, inputs=None):
    """x[1,4,4,3] -> Conv(w[8,3,3,3], pad 1) -> c[1,4,4,8] -> tail."""
    r = rng(31)
    w = f32(r.normal(size=(8, 3, 3, 3)) * 0.3)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), *tail_nodes]
    m = model(nodes, inputs or {"x": [1, 4, 4, 3]}, outputs, {"w": w, **tail_inits},
              value_info=value_info)  # fmt: skip
    x = f32(r.normal(size=(1, 4, 4, 3)))
    return m, x, conv(x, w, pad=1)


def shape(*dims):
    return np.array(dims, np.int64)


def test_layer_norm_lowering_after_conv_is_one_reshape():
    """TFLite's LayerNormalization: Reshape [1,16,8,1] -> Transpose (0,2,3,1) -> [1,8,1,16].
    From the Conv's NCHW [1,8,4,4] that is a pure Reshape: the layout pass's Transpose back
    to NHWC and the source Transpose cancel."""
    m, x, c = conv_block(
        [
            helper.make_node("Reshape", ["c", "s1"], ["r"]),
            helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 3, 1]),
            helper.make_node("ReduceMean", ["t"], ["y"], axes=[3], keepdims=1),
        ],
        {"s1": shape(1, 16, 8, 1)},
        {"y": [1, 8, 1, 1]},
    )
    out = check(m)
    assert count(out, "Transpose") == 0
    want = c.reshape(1, 16, 8, 1).transpose(0, 2, 3, 1).mean(axis=3, keepdims=True)
    np.testing.assert_allclose(run(out, {"x": x})["y"], want, rtol=1e-5, atol=1e-6)


def test_patch_unfold_after_conv_is_one_transpose():
    """MobileViT's unfold (Reshape to 2x2 patches, TRANSPOSE, Reshape to [P, N, C]) read from
    the Conv's NCHW output: the Transpose back to NHWC and the unfold's compose to one."""
    m, x, c = conv_block(
        [
            helper.make_node("Reshape", ["c", "s1"], ["r"]),
            helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 4, 1, 3, 5]),
            helper.make_node("Reshape", ["t", "s2"], ["p"]),
            helper.make_node("MatMul", ["p", "wm"], ["y"]),
        ],
        {"s1": shape(1, 2, 2, 2, 2, 8), "s2": shape(4, 4, 8),
         "wm": f32(rng(32).normal(size=(8, 5)))},
        {"y": [4, 4, 5]},
    )  # fmt: skip
    out = check(m)
    assert count(out, "Transpose") == 1
    patches = c.reshape(1, 2, 2, 2, 2, 8).transpose(0, 2, 4, 1, 3, 5).reshape(4, 4, 8)
    want = patches @ _init(m, "wm")
    np.testing.assert_allclose(run(out, {"x": x})["y"], want, rtol=1e-5, atol=1e-5)


def _init(m, name):
    return next(onnx.numpy_helper.to_array(t) for t in m.graph.initializer if t.name == name)


def test_shared_intermediate_keeps_its_transpose():
    """A chain stops at a tensor another op also reads: the NHWC version feeds two Reshapes,
    so it stays (one Transpose) and each Reshape reads it."""
    m, x, c = conv_block(
        [
            helper.make_node("Reshape", ["c", "s1"], ["r"]),
            helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 3, 1]),
            helper.make_node("Reshape", ["c", "s2"], ["y2"]),
            helper.make_node("ReduceMean", ["t"], ["y"], axes=[3], keepdims=1),
        ],
        {"s1": shape(1, 16, 8, 1), "s2": shape(1, 128)},
        {"y": [1, 8, 1, 1], "y2": [1, 128]},
    )
    out = check(m)
    assert count(out, "Transpose") == 1
    got = run(out, {"x": x})
    np.testing.assert_allclose(got["y2"], c.reshape(1, 128), rtol=1e-5, atol=1e-6)
    want = c.reshape(1, 16, 8, 1).transpose(0, 2, 3, 1).mean(axis=3, keepdims=True)
    np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=1e-6)


def quant_node(x, y, scale):
    return helper.make_node(
        "Quant", [x, scale, "zp", "bits"], [y], domain=QONNX_DOMAIN, signed=1, narrow=0,
        rounding_mode="ROUND",
    )  # fmt: skip


def moves_model(nodes, inits, in_shape, out_shape):
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)]
    graph = helper.make_graph(
        nodes, "g", inputs, outputs,
        [onnx.numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )  # fmt: skip
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid(QONNX_DOMAIN, 1)]
    return helper.make_model(graph, opset_imports=opsets)


QPARAMS = {"zp": f32(0.0), "bits": f32(8.0)}


def test_transpose_pair_around_per_tensor_quant_cancels():
    """Transpose -> Quant -> inverse Transpose: the quantizer alone (elementwise, one scale)."""
    nodes = [
        helper.make_node("Transpose", ["x"], ["a"], perm=[0, 2, 3, 1]),
        quant_node("a", "b", "s"),
        helper.make_node("Transpose", ["b"], ["y"], perm=[0, 3, 1, 2]),
    ]
    m = moves_model(nodes, {"s": f32(0.05), **QPARAMS}, [1, 3, 4, 5], [1, 3, 4, 5])
    assert collapse_moves(m) == (m, True)  # both Transposes gone, counted below
    assert count(m, "Transpose") == 0 and count(m, "Quant") == 1
    x = f32(rng(33).normal(size=(1, 3, 4, 5)))
    np.testing.assert_allclose(run(m, {"x": x})["y"], quant(x, 0.05), rtol=0, atol=1e-7)


def test_per_channel_quant_stops_the_chain():
    """A per-channel scale is tied to an axis: the Transposes around it stay."""
    nodes = [
        helper.make_node("Transpose", ["x"], ["a"], perm=[0, 2, 3, 1]),
        quant_node("a", "b", "s"),
        helper.make_node("Transpose", ["b"], ["y"], perm=[0, 3, 1, 2]),
    ]
    scale = f32([0.05, 0.1, 0.2])
    m = moves_model(nodes, {"s": scale, **QPARAMS}, [1, 3, 4, 5], [1, 3, 4, 5])
    assert collapse_moves(m) == (m, False)
    assert count(m, "Transpose") == 2


def test_chain_that_moves_elements_keeps_one_transpose():
    """Transpose (0,2,1) then Reshape then Transpose: the composite is one real transpose."""
    nodes = [
        helper.make_node("Transpose", ["x"], ["a"], perm=[0, 2, 1]),
        helper.make_node("Reshape", ["a", "s"], ["b"]),
        helper.make_node("Transpose", ["b"], ["y"], perm=[0, 1, 3, 2]),
    ]
    m = moves_model(nodes, {"s": shape(1, 6, 2, 2)}, [1, 4, 6], [1, 6, 2, 2])
    assert collapse_moves(m) == (m, True)  # one of the two Transposes gone, counted below
    assert count(m, "Transpose") == 1
    x = f32(np.arange(24).reshape(1, 4, 6))
    want = x.transpose(0, 2, 1).reshape(1, 6, 2, 2).transpose(0, 1, 3, 2)
    np.testing.assert_array_equal(run(m, {"x": x})["y"], want)


def test_dynamic_batch_reshape_into_conv_needs_no_transpose():
    """[N, 20] -> Reshape [-1, 4, 5, 1] -> Conv (ds_cnn's input): C is 1, so channels-first is
    the same element order; the Reshape's dims come from its constant shape."""
    r = rng(34)
    w = f32(r.normal(size=(2, 1, 3, 3)))
    m = model(
        [
            helper.make_node("Reshape", ["x", "s"], ["r"]),
            helper.make_node("Conv", ["r", "w"], ["y"], pads=[1, 1, 1, 1]),
        ],
        {"x": ["batch", 20]},
        {"y": ["batch", 4, 5, 2]},
        {"s": shape(-1, 4, 5, 1), "w": w},
    )
    out = check(m)
    assert count(out, "Transpose") == 0
    x = f32(r.normal(size=(3, 20)))
    want = conv(x.reshape(3, 4, 5, 1), w, pad=1)
    np.testing.assert_allclose(run(out, {"x": x})["y"], want, rtol=1e-5, atol=1e-5)


def test_transposed_scores_become_one_matmul_of_retransposed_operands():
    """TFLite's attention: s = Transpose(q·kᵀ, swap last two) with q and kᵀ from Transposes.
    kᵀᵀ·qᵀ from the same two Transposes (other perms) leaves 2 Transposes, not 3."""
    nodes = [
        helper.make_node("Transpose", ["x"], ["q"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["x2"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["s"]),
        helper.make_node("Transpose", ["s"], ["st"], perm=[0, 1, 3, 2]),
        helper.make_node("Softmax", ["st"], ["y"], axis=-1),
    ]
    m = model(nodes, {"x": [1, 5, 2, 4], "x2": [1, 6, 2, 4]}, {"y": [1, 2, 6, 5]})
    out = check(m)
    assert count(out, "Transpose") == 2
    r = rng(35)
    x, x2 = f32(r.normal(size=(1, 5, 2, 4))), f32(r.normal(size=(1, 6, 2, 4)))
    scores = (x.transpose(0, 2, 1, 3) @ x2.transpose(0, 2, 3, 1)).transpose(0, 1, 3, 2)
    want = np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(run(out, {"x": x, "x2": x2})["y"], want, rtol=1e-5, atol=1e-6)


def test_transposed_matmul_with_constant_operand_transposes_the_constant():
    """One operand a constant: (xᵀ·W)ᵀ = Wᵀ·x, W transposed at conversion time, and xᵀ's
    Transpose composed with the swap is the identity: no Transpose left of the 2."""
    wc = f32(rng(36).normal(size=(4, 3)))
    nodes = [
        helper.make_node("Transpose", ["x"], ["a"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["a", "wc"], ["s"]),
        helper.make_node("Transpose", ["s"], ["y"], perm=[0, 2, 1]),
    ]
    m = model(nodes, {"x": [2, 4, 5]}, {"y": [2, 3, 5]}, {"wc": wc})
    out = check(m)
    assert count(out, "Transpose") == 0
    x = f32(rng(37).normal(size=(2, 4, 5)))
    want = (x.transpose(0, 2, 1) @ wc).transpose(0, 2, 1)
    np.testing.assert_allclose(run(out, {"x": x})["y"], want, rtol=1e-5, atol=1e-5)
