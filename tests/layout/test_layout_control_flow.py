"""Control-flow nodes (If, Loop) as terminate ops: their inputs, and the outer values their
subgraphs read by name, are read in source order; their outputs are in source order."""

from __future__ import annotations

import numpy as np
import pytest
from layout_testkit import check, conv, count, f32, model, rng, run
from onnx import TensorProto, helper

from qonnx_ingest.errors import ConversionError

SHAPE = [2, 5, 6, 2]


def _info(name: str, elem: int = TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def _control_flow_model():
    """c = Conv(x) is stored channels-first; a = c + s (s broadcasts over the channels);
    y = If(cond, c + s, -c) with branches reading c and s by name; z = Loop 3 times
    v <- v + c from v0, the body reading c by name."""
    then = helper.make_graph([helper.make_node("Add", ["c", "s"], ["t"])], "then", [],
                             [_info("t")])  # fmt: skip
    other = helper.make_graph([helper.make_node("Neg", ["c"], ["e"])], "else", [], [_info("e")])
    body = helper.make_graph(
        [
            helper.make_node("Add", ["v_in", "c"], ["v_out"]),
            helper.make_node("Identity", ["go"], ["go_out"]),
        ],
        "body",
        [_info("i", TensorProto.INT64, []), _info("go", TensorProto.BOOL, []), _info("v_in")],
        [_info("go_out", TensorProto.BOOL, []), _info("v_out")],
    )
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("Add", ["c", "s"], ["a"]),
        helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other),
        helper.make_node("Loop", ["trips", "", "v0"], ["z"], body=body),
    ]
    w = rng(3).normal(size=(2, 3, 1, 1))
    inits = {"w": f32(w), "s": f32([1.5, -2.0]), "trips": np.array(3, np.int64)}
    m = model(nodes, {"x": [2, 5, 6, 3], "cond": [], "v0": SHAPE},
              {"a": SHAPE, "y": SHAPE, "z": SHAPE}, inits, elem={"cond": 9})  # fmt: skip
    return m, w


@pytest.mark.parametrize("taken", [True, False])
def test_if_and_loop_read_permuted_outer_values_in_source_order(taken: bool) -> None:
    m, w = _control_flow_model()
    out = check(m)
    assert count(out, "Transpose") >= 1  # c is stored channels-first, read back for the subgraphs
    x, v0 = rng(4).normal(size=(2, 5, 6, 3)), rng(5).normal(size=SHAPE)
    feeds = {"x": f32(x), "cond": np.array(taken), "v0": f32(v0)}
    got = run(out, feeds)
    c = conv(x, w)
    s = np.array([1.5, -2.0])
    np.testing.assert_allclose(got["a"], c + s, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["y"], c + s if taken else -c, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["z"], v0 + 3 * c, rtol=1e-5, atol=1e-5)


def test_a_node_with_subgraphs_of_unknown_scoping_is_refused_when_anything_is_permuted():
    branch = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["o"])], "branch", [], [_info("o")]
    )
    m = model(
        [
            helper.make_node("Conv", ["x", "w"], ["c"]),
            helper.make_node("Mystery", ["c"], ["y"], domain="example.ops", body=branch),
        ],
        {"x": [2, 5, 6, 3]},
        {"y": [2, 5, 6, 2]},
        {"w": f32(np.ones((2, 3, 1, 1)))},
    )
    with pytest.raises(ConversionError, match="Mystery node .* holds a subgraph"):
        check(m)
