"""``--format finn``: an AveragePool as a depthwise sum whose division joins the exact
thresholds behind it, and two Reshapes in a row as one; checked against the quantizer and the
pooling computed by hand."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from qonnx_ingest.execute import execute_qonnx
from qonnx_ingest.targets.finn import to_finn

STEP = np.float32(0.125)  # a power of two: window sums exact in float32, ties exact


def _pool_model(k: int):
    """x (1, 2, 6, 6) -> Quant(1/8, int8) -> AveragePool k x k / k -> Quant(1/8, int8,
    HALF_UP) -> Reshape (1, 2, n) -> Reshape (1, 2n)."""
    n = (6 // k) ** 2

    def quant(x: str, y: str):
        return helper.make_node(
            "Quant",
            [x, "s", "z", "b"],
            [y],
            domain="qonnx.custom_op.general",
            signed=1,
            narrow=0,
            rounding_mode="HALF_UP",
        )

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
