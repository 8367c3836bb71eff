"""``--format finn``: an AveragePool (or a mean over the image) as a depthwise sum whose
division joins the exact thresholds behind it, and two Reshapes in a row as one; checked
against the quantizer and the pooling computed by hand."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from qonnx_ingest.execute import execute_qonnx
from qonnx_ingest.targets.finn import to_finn

STEP = np.float32(0.125)  # a power of two: window sums exact in float32, ties exact


def quant(x: str, y: str, s: str = "s", bits: str = "b"):
    """An int8-style Quant rounding half away from zero, as TFLite does."""
    return helper.make_node(
        "Quant",
        [x, s, "z", bits],
        [y],
        domain="qonnx.custom_op.general",
        signed=1,
        narrow=0,
        rounding_mode="HALF_UP",
    )


def _pool_model(k: int):
    """x (1, 2, 6, 6) -> Quant(1/8, int8) -> AveragePool k x k / k -> Quant(1/8, int8,
    HALF_UP) -> Reshape (1, 2, n) -> Reshape (1, 2n)."""
    n = (6 // k) ** 2

    nodes = [
        quant("x", "q"),
        helper.make_node("AveragePool", ["q"], ["p"], kernel_shape=[k, k], strides=[k, k]),
        quant("p", "pq"),
        helper.make_node("Reshape", ["pq", "shape_a"], ["r"]),
        helper.make_node("Reshape", ["r", "shape_b"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2 * n])],
        [
            numpy_helper.from_array(STEP, "s"),
            numpy_helper.from_array(np.float32(0), "z"),
            numpy_helper.from_array(np.float32(8), "b"),
            numpy_helper.from_array(np.int64([1, 2, n]), "shape_a"),
            numpy_helper.from_array(np.int64([1, 2 * n]), "shape_b"),
        ],
    )
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid("qonnx.custom_op.general", 1)]
    return helper.make_model(graph, opset_imports=opsets)


@pytest.mark.parametrize("k", [2, 3])
def test_average_pool_is_a_depthwise_sum_with_its_division_in_the_thresholds(k: int) -> None:
    """Window means by hand, rounded half away from zero: with 2x2 windows sums of 4j + 2
    levels put the mean exactly on a tie."""
    model = to_finn(_pool_model(k))
    ops = [n.op_type for n in model.graph.node]
    assert "AveragePool" not in ops and "Div" not in ops and ops.count("Reshape") == 1, ops
    (conv,) = [n for n in model.graph.node if n.op_type == "Conv"]
    assert [a.i for a in conv.attribute if a.name == "group"] == [2]
    rng = np.random.default_rng(35)
    ties = 0
    for _ in range(4):
        levels = rng.integers(-12, 13, (1, 2, 6, 6)).astype(np.float32)
        sums = levels.reshape(1, 2, 6 // k, k, 6 // k, k).sum(axis=(3, 5))
        mean = sums / (k * k)
        ties += int(np.sum(mean % 1 == 0.5))
        want = np.sign(mean) * np.floor(np.abs(mean) + 0.5) * STEP
        got = execute_qonnx(model, {"x": levels * STEP})["y"]
        np.testing.assert_array_equal(got, want.astype(np.float32).reshape(got.shape))
    assert k == 3 or ties > 0  # the 2x2 case met ties


def test_a_one_pixel_classifier_head_is_a_matmul_behind_its_reshape() -> None:
    """x (1, 4, 2, 2) -> Quant -> global AveragePool -> Quant -> 1x1 Conv (per-channel weight
    Quant, bias Quant) -> Quant -> Reshape (1, 3), against the head computed by hand (power-of-
    two scales: exact in float32)."""
    rng = np.random.default_rng(35)
    w = rng.integers(-7, 8, (3, 4, 1, 1)).astype(np.float32)
    w_scale = np.float32([0.25, 0.5, 0.125]).reshape(3, 1, 1, 1)
    bias = rng.integers(-20, 21, 3).astype(np.float32)
    b_scale = STEP * w_scale.reshape(3)

    nodes = [
        quant("x", "q"),
        helper.make_node("AveragePool", ["q"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        quant("p", "pq"),
        quant("w", "wq", "ws"),
        quant("bias", "bq", "bs", "b32"),
        helper.make_node("Conv", ["pq", "wq", "bq"], ["c"], kernel_shape=[1, 1]),
        quant("c", "cq"),
        helper.make_node("Reshape", ["cq", "shape"], ["y"]),
    ]
    initializers = {
        "s": STEP,
        "z": np.float32(0),
        "b": np.float32(8),
        "b32": np.float32(32),
        "w": w * w_scale,
        "ws": w_scale,
        "bias": bias * b_scale,
        "bs": b_scale,
        "shape": np.int64([1, 3]),
    }
    graph = helper.make_graph(
        nodes,
        "head",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in initializers.items()],
    )
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid("qonnx.custom_op.general", 1)]
    model = to_finn(helper.make_model(graph, opset_imports=opsets))
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("Conv") == 1 and "MatMul" in ops and ops.count("Reshape") == 1, ops
    read = {name for node in model.graph.node for name in node.input} | {"y"}
    assert all(node.output[0] in read for node in model.graph.node)  # FINN refuses orphans
    for _ in range(4):
        levels = rng.integers(-12, 13, (1, 4, 2, 2)).astype(np.float64)
        mean = levels.sum(axis=(2, 3)) / 4
        pooled = np.sign(mean) * np.floor(np.abs(mean) + 0.5)  # in steps of 1/8
        acc = pooled @ (w.reshape(3, 4).T * w_scale.reshape(1, 3)) + bias * w_scale.reshape(3)
        want = np.clip(np.sign(acc) * np.floor(np.abs(acc) + 0.5), -128, 127) * STEP
        got = execute_qonnx(model, {"x": (levels * STEP).astype(np.float32)})["y"]
        np.testing.assert_array_equal(got, want.astype(np.float32))


def test_a_mean_over_the_image_is_a_depthwise_sum_over_one_window() -> None:
    """TFLite's MEAN over height and width (a ReduceMean keeping them): FINN maps no
    ReduceMean; its form is the AveragePool's, checked against the means by hand."""
    nodes = [
        quant("x", "q"),
        helper.make_node("ReduceMean", ["q"], ["m"], axes=[2, 3], keepdims=1),
        quant("m", "y"),
    ]
    graph = helper.make_graph(
        nodes,
        "mean",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 1, 1])],
        [
            numpy_helper.from_array(STEP, "s"),
            numpy_helper.from_array(np.float32(0), "z"),
            numpy_helper.from_array(np.float32(8), "b"),
        ],
    )
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid("qonnx.custom_op.general", 1)]
    model = to_finn(helper.make_model(graph, opset_imports=opsets))
    ops = [n.op_type for n in model.graph.node]
    assert "ReduceMean" not in ops and ops.count("Conv") == 1, ops
    rng = np.random.default_rng(36)
    for _ in range(4):
        levels = rng.integers(-12, 13, (1, 2, 4, 4)).astype(np.float32)
        mean = levels.sum(axis=(2, 3), keepdims=True) / 16
        want = np.sign(mean) * np.floor(np.abs(mean) + 0.5) * STEP
        got = execute_qonnx(model, {"x": levels * STEP})["y"]
        np.testing.assert_array_equal(got, want.astype(np.float32))
