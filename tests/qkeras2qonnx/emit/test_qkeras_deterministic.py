"""One model, one result: converting the same model again (in this process or another) gives
the same bytes. tf2onnx's own output varies from run to run (node and initializer order, the
numbers of the nodes it inserts); qkeras2qonnx.emit.canonical puts it in one form."""

import os
import subprocess
import sys
import warnings

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from qkeras_helpers import CORPUS

from qkeras2qonnx.emit.canonical import canonicalize
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


MITBIH = CORPUS / "mitbih_Conv1D_int8_pqmodel.h5"


@requires_corpus
@pytest.mark.keras
def test_mitbih_converts_to_the_same_bytes_three_times_with_batch_through_its_convs():
    """The model whose value_info varied one run in about 40 (qonnx_ingest.symbolic_dims):
    the batch symbol is now carried through every Conv/pool to the Flatten's Reshape [-1, 320],
    after which inference cannot prove the size and names it apart."""
    import qkeras2qonnx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = [qkeras2qonnx.convert(MITBIH) for _ in range(3)]
    assert len({m.SerializeToString() for m in runs}) == 1
    first = {
        v.name: v.type.tensor_type.shape.dim[0].dim_param
        for v in runs[0].graph.value_info
        if v.type.tensor_type.shape.dim and not v.type.tensor_type.shape.dim[0].dim_value
    }
    before_flatten = [k for k in first if "Conv1D_out0" in k or "MaxPool_out0" in k]
    assert len(before_flatten) == 6
    assert {first[k] for k in before_flatten} == {"batch"}
    assert first["model_1/prune_low_magnitude_flatten_2/Reshape_out0"] != "batch"


@pytest.mark.keras
def test_dynamic_non_batch_dims_are_named_after_their_tensor_not_tf2onnx_counter():
    """tf2onnx names them unk__N from a process-wide counter: a second conversion differed."""
    from qkeras import QActivation, QConv1D
    from qkeras_helpers import keras

    import qkeras2qonnx

    k = keras()
    inp = k.Input((None, 3), name="signal")
    x = QConv1D(4, 3, kernel_quantizer="quantized_bits(4,0,alpha=1)", name="conv")(inp)
    model = k.Model(inp, QActivation("quantized_relu(4)", name="act")(x))
    runs = [qkeras2qonnx.convert(model) for _ in range(2)]
    assert runs[0].SerializeToString() == runs[1].SerializeToString()
    assert _dims(runs[0].graph.input[0]) == ["batch", "signal_dim1", 3]
    assert _dims(runs[0].graph.output[0]) == ["batch", "act_dim1", 4]


def _dims(value: onnx.ValueInfoProto) -> list:
    return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]
