"""One model, one result: converting the same model again (in this process or another) gives
the same bytes. tf2onnx's own output varies from run to run (node and initializer order, the
numbers of the nodes it inserts); qkeras2qonnx.canonical puts it in one form."""

import os
import subprocess
import sys
import warnings

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from qkeras_helpers import CORPUS

from qkeras2qonnx.canonical import canonicalize
from support import ROOT, requires_corpus

AD03 = CORPUS / "AD03_autoqkeras_qbestModel.h5"


_CONVERT_AND_SAVE = """
import sys, warnings
import qkeras2qonnx
warnings.simplefilter("ignore")
open(sys.argv[2], "wb").write(qkeras2qonnx.convert(sys.argv[1]).SerializeToString())
"""


@pytest.fixture(scope="module")
def ad03_bytes(tmp_path_factory):
    """AD03 converted twice in this process and once in another, which runs meanwhile (each
    run's tf2onnx numbers its nodes on from the last and walks its node sets in another
    order)."""
    import qkeras2qonnx

    out = tmp_path_factory.mktemp("ad03") / "ad03.onnx"
    other = subprocess.Popen(
        [sys.executable, "-c", _CONVERT_AND_SAVE, str(AD03), str(out)],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its lost po2 annotations (test_qkeras_corpus)
        here = [qkeras2qonnx.convert(AD03).SerializeToString() for _ in range(2)]
    _, err = other.communicate(timeout=300)
    assert other.returncode == 0, err[-2000:]
    return here, out.read_bytes()


@requires_corpus
@pytest.mark.keras
def test_ad03_converts_to_the_same_bytes_twice_in_one_process(ad03_bytes):
    (first, second), _ = ad03_bytes
    assert first == second


@requires_corpus
@pytest.mark.keras
def test_ad03_converts_to_the_same_bytes_in_another_process(ad03_bytes):
    (first, _), elsewhere = ad03_bytes
    assert elsewhere == first


def _graph(node_order, names, init_order):
    """A diamond x -> (Relu, Neg) -> Add -> y with a weight read by Mul, written as tf2onnx
    might: nodes in ``node_order``, inserted-node names from ``names``, initializers in
    ``init_order``."""
    nodes = {
        "relu": helper.make_node("Relu", ["x"], ["r"], name=names[0]),
        "neg": helper.make_node("Neg", ["x"], ["n"], name="model/neg"),
        "add": helper.make_node("Add", ["r", "n"], ["s"], name="model/add"),
        "mul": helper.make_node("Mul", ["s", "w"], ["y"], name=names[1]),
        "shape": helper.make_node("Reshape", ["y", "c"], ["z"], name=names[2]),
    }
    inits = {
        "w": numpy_helper.from_array(np.float32([2.0]), "w"),
        "c": numpy_helper.from_array(np.int64([-1]), "c"),
    }
    return helper.make_graph(
        [nodes[k] for k in node_order],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [3])],
        [inits[k] for k in init_order],
    )


def test_canonical_form_ignores_tf2onnx_order_and_numbers():
    one = _graph(
        ["relu", "neg", "add", "mul", "shape"],
        ["model/relu__7", "model/mul__12", "model/mul__3__15"],
        ["w", "c"],
    )
    two = _graph(
        ["neg", "relu", "add", "mul", "shape"],
        ["model/relu__31", "model/mul__40", "model/mul__29__44"],
        ["c", "w"],
    )
    canonicalize(one)
    canonicalize(two)
    assert one.SerializeToString() == two.SerializeToString()
    # by hand: ready nodes by name (model/neg < model/relu), numbers 1, 2, 3 in that order,
    # initializers in the order nodes read them
    assert [n.name for n in one.node] == [
        "model/neg",
        "model/relu__1",
        "model/add",
        "model/mul__2",
        "model/mul__3",
    ]
    assert [t.name for t in one.initializer] == ["w", "c"]


def test_canonical_order_keeps_a_loop_after_what_its_body_reads():
    """An If reads ``w2`` only inside its branch: the node making ``w2`` (named to sort after
    the If) still comes first."""
    branch = helper.make_graph(
        [helper.make_node("Identity", ["w2"], ["out"], name="inner")],
        "branch",
        [],
        [helper.make_tensor_value_info("out", onnx.TensorProto.FLOAT, [1])],
    )
    maker = helper.make_node("Neg", ["x"], ["w2"], name="z/neg__4")
    cond = helper.make_node("Cast", ["x"], ["c"], name="a/cast", to=onnx.TensorProto.BOOL)
    branching = helper.make_node(
        "If", ["c"], ["y"], name="b/if", then_branch=branch, else_branch=branch
    )
    graph = helper.make_graph(
        [maker, cond, branching],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])],
    )
    canonicalize(graph)
    assert [n.name for n in graph.node] == ["a/cast", "z/neg__1", "b/if"]
