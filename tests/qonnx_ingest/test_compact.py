"""The compact form: a graph whose structure outweighs its weights loses its long tensor names,
keeps readable node names, its inputs/outputs and the value_info of every tensor (under the
short names, as qonnx's executor needs), and computes the same; small graphs are left as they
are."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from quant_models import ort_session

from qonnx_ingest.compact import NODE_NAME_LIMIT, _tail, compact, needs_compacting
from qonnx_ingest.finish import finish_model


def chain(n: int) -> onnx.ModelProto:
    """x[1,4] -> n x (Add c, Relu) on ONE 4-float constant, with Keras-like scoped names."""
    graph = helper.make_graph(
        [], "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )  # fmt: skip
    graph.initializer.append(
        numpy_helper.from_array(np.array([0.5, -0.25, 0.125, -1.0], np.float32), "c")
    )
    src = "x"
    for k in range(n):
        scope = f"model/recurrent_block_{k // 100}/cell/step_{k}"
        last = k == n - 1
        graph.node.append(
            helper.make_node("Add", [src, "c"], [f"{scope}/add"], name=f"{scope}/add/Add")
        )
        out = "y" if last else f"{scope}/relu"
        graph.node.append(
            helper.make_node("Relu", [f"{scope}/add"], [out], name=f"{scope}/relu/Relu")
        )
        src = f"{scope}/relu"
    return helper.make_model(graph)


def test_large_structure_on_small_weights_is_compacted_and_computes_the_same():
    full = finish_model(chain(1500), compact_large=False)[0]
    small = finish_model(chain(1500), compact_large=True)[0]
    assert small.ByteSize() < full.ByteSize() / 2
    names = [n.name for n in small.graph.node]
    assert len(set(names)) == len(names) and all(len(n) <= NODE_NAME_LIMIT for n in names)
    assert "cell/step_1234/relu/Relu" in names
    assert [v.name for v in small.graph.input] == ["x"]
    assert [v.name for v in small.graph.output] == ["y"]
    x = np.random.default_rng(0).uniform(-2, 2, (1, 4)).astype(np.float32)
    np.testing.assert_array_equal(
        ort_session(small).run(None, {"x": x})[0], ort_session(full).run(None, {"x": x})[0]
    )
    # every internal tensor keeps its shape and type, as written (no inference needed)
    recorded = {v.name: v.type.tensor_type for v in small.graph.value_info}
    internal = {o for n in small.graph.node for o in n.output} - {"y"}
    assert len(internal) == 2999
    # "t" and k in base 62: 2,999 tensors in at most three characters (t0 .. tMm)
    assert max(len(name) for name in internal) == 3 and "tMm" in internal
    for name in internal:
        assert recorded[name].elem_type == TensorProto.FLOAT, name
        assert [d.dim_value for d in recorded[name].shape.dim] == [1, 4], name


def test_qonnx_executor_runs_the_compact_form_as_written():
    """qonnx's execute_onnx reads every tensor's shape from value_info ("Found unspecified
    tensor shapes" otherwise): x -> 20 x (x + c, relu), compacted, by hand."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx

    small = finish_model(chain(20))[0]
    compact(small)  # what finishing does past the size threshold
    assert small.graph.node[0].output[0] == "t0"
    c = np.array([0.5, -0.25, 0.125, -1.0], np.float32)
    x = np.array([[1.0, 2.0, -3.0, 4.0]], np.float32)
    expected = x
    for _ in range(20):
        expected = np.maximum(expected + c, 0)
    got = execute_onnx(ModelWrapper(small), {"x": x})["y"]
    np.testing.assert_array_equal(got, expected)


def test_small_graph_keeps_its_names_and_value_info():
    model = finish_model(chain(20), compact_large=True)[0]
    assert len(model.graph.value_info) > 0
    assert "model/recurrent_block_0/cell/step_7/add/Add" in [n.name for n in model.graph.node]


def test_tail_keeps_whole_scope_parts():
    assert _tail("dprnn_block/bidirectional/forward_gru_1/MatMul_17/MatMul") == (
        "forward_gru_1/MatMul_17/MatMul"
    )
    assert _tail("short/name") == "short/name"
    assert _tail("x/" + "a" * 40) == "a" * 32


def test_a_graph_with_subgraphs_is_never_compacted():
    """An If branch reads outer tensors by name: renaming them would cut the branch off."""
    model = chain(1500)
    assert needs_compacting(model)
    branch = helper.make_graph(
        [helper.make_node("Identity", ["model/recurrent_block_0/cell/step_0/relu"], ["b"])],
        "branch",
        [],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 4])],
    )
    model.graph.initializer.append(numpy_helper.from_array(np.array(True), "cond"))
    model.graph.node.append(
        helper.make_node("If", ["cond"], ["z"], then_branch=branch, else_branch=branch)
    )
    assert not needs_compacting(model)


def test_a_graph_with_quantizers_is_never_compacted():
    """qonnx's executor runs such a graph node by node from its value_info shapes."""
    model = chain(1500)
    assert needs_compacting(model)
    for name, value in (("s", 1.0), ("z", 0.0), ("bits", 8.0)):
        model.graph.initializer.append(numpy_helper.from_array(np.array(value, np.float32), name))
    model.graph.node.append(
        helper.make_node("Quant", ["x", "s", "z", "bits"], ["xq"], domain="qonnx.custom_op.general")
    )
    assert not needs_compacting(model)


def biased_matmul(rows: int, extra_reader: bool = False) -> onnx.ModelProto:
    """x[rows,3] @ W[3,2] + b[2] -> y (and the product also as output p: read twice)."""
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, 2])]
    if extra_reader:
        outputs.append(helper.make_tensor_value_info("p", TensorProto.FLOAT, [rows, 2]))
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["p"], name="fc/MatMul"),
            helper.make_node("Add", ["b", "p"], ["y"], name="fc/Add"),  # bias first
        ],
        "fc",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, 3])],
        outputs,
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "b")],
    )
    return finish_model(helper.make_model(graph), rename_tensors=False)[0]


W = np.array([[1.0, -2.0], [0.5, 4.0], [-3.0, 0.25]], np.float32)
B = np.array([10.0, -20.0], np.float32)


def test_a_biased_matmul_becomes_one_gemm_that_computes_x_w_plus_b():
    model = biased_matmul(2)
    compact(model)
    assert [(n.op_type, n.name) for n in model.graph.node] == [("Gemm", "fc/MatMul")]
    assert len(model.graph.value_info) == 2  # the weights' only: the product is gone
    x = np.array([[1.0, 2.0, 3.0], [-1.0, 0.0, 4.0]], np.float32)
    expected = np.array([[1 + 1 - 9 + 10, -2 + 8 + 0.75 - 20], [-1 - 12 + 10, 2 + 1 - 20]])
    np.testing.assert_array_equal(ort_session(model).run(None, {"x": x})[0], expected)


def test_a_product_read_twice_or_of_rank_3_keeps_its_matmul():
    read_twice = biased_matmul(2, extra_reader=True)
    compact(read_twice)
    assert [n.op_type for n in read_twice.graph.node] == ["MatMul", "Add"]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["p"]), helper.make_node("Add", ["p", "b"], ["y"])],
        "fc3",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 2])],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "b")],
    )
    rank3 = finish_model(helper.make_model(graph), rename_tensors=False)[0]
    compact(rank3)  # Gemm takes a matrix only
    assert [n.op_type for n in rank3.graph.node] == ["MatMul", "Add"]
