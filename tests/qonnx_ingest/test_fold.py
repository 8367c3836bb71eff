"""Linear-time constant folding and constant sharing agree with qonnx's passes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from qonnx_ingest.execute import execute_qonnx
from qonnx_ingest.finish import finish_model, infer_shapes, set_opset_imports, sort_nodes
from qonnx_ingest.fold import PRESERVED_OP_TYPES, fold_constants, share_equal_initializers
from qonnx_ingest.quant import make_quant


def constant_chains_graph() -> onnx.ModelProto:
    """x [2, 3] in; constant chains (a Transpose, an Add feeding a Mul, a Shape of the static
    input feeding a Reshape), a Quant on a constant (kept) and a Split of a constant."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((3, 2)).astype(np.float32)
    q = make_quant("w_scaled", "w_q", 0.25, 0, 4)
    nodes = [
        helper.make_node("Transpose", ["w"], ["w_t"], perm=[1, 0]),
        helper.make_node("Add", ["w_t", "offset"], ["w_sum"]),
        helper.make_node("Mul", ["w_sum", "two"], ["w_scaled"]),
        q.node,
        helper.make_node("MatMul", ["x", "w_q"], ["h"]),
        helper.make_node("Shape", ["x"], ["x_shape"]),
        helper.make_node("Reshape", ["h", "x_shape"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(np.full((2, 3), 0.01, np.float32), "offset"),
        numpy_helper.from_array(np.array(2.0, np.float32), "two"),
        *q.initializers,
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        inits,
    )
    model = helper.make_model(graph)
    set_opset_imports(model, opset=17)
    sort_nodes(model)
    return infer_shapes(model)


def _qonnx_fold(model: onnx.ModelProto) -> onnx.ModelProto:
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.fold_constants import FoldConstantsFiltered

    def eligible(_model, node):
        return node.op_type not in PRESERVED_OP_TYPES

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    wrapper = ModelWrapper(copy)
    return wrapper.transform(FoldConstantsFiltered(eligible), cleanup=False).model


def _folded_view(model: onnx.ModelProto):
    """Remaining nodes (type, inputs read as values where constant) and every constant."""
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    nodes = [
        (n.op_type, [inits[i].tolist() if i in inits else i for i in n.input])
        for n in model.graph.node
    ]
    return sorted(nodes, key=repr)


def test_folding_leaves_what_qonnxs_fold_constants_filtered_leaves():
    model = constant_chains_graph()
    theirs = _qonnx_fold(model)
    assert fold_constants(model) == (model, True)
    assert _folded_view(model) == _folded_view(theirs)
    assert [n.op_type for n in model.graph.node] == ["Quant", "MatMul", "Reshape"]


def test_folded_values_are_the_hand_computed_ones():
    model = constant_chains_graph()
    w = numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == "w"))
    fold_constants(model)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    np.testing.assert_array_equal(inits["w_scaled"], (w.T + np.float32(0.01)) * np.float32(2))
    np.testing.assert_array_equal(inits["x_shape"], [2, 3])


def test_nothing_to_fold_changes_nothing():
    model = constant_chains_graph()
    fold_constants(model)
    before = model.SerializeToString()
    assert fold_constants(model) == (model, False)
    assert model.SerializeToString() == before


def test_shape_of_a_dynamic_tensor_is_not_baked_in():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, [2])
    model = helper.make_model(
        helper.make_graph([helper.make_node("Shape", ["x"], ["y"])], "g", [x], [y])
    )
    set_opset_imports(model, opset=17)
    model = infer_shapes(model)
    assert fold_constants(model) == (model, False)


def _shared_weight_graph(copies: int) -> onnx.ModelProto:
    """x -> (MatMul w_k, Add b_k) x copies, every w_k and b_k equal, as converters copy them."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    nodes, inits, prev = [], [], "x"
    for k in range(copies):
        nodes += [
            helper.make_node("MatMul", [prev, f"w{k}"], [f"m{k}"]),
            helper.make_node("Add", [f"b{k}", f"m{k}"], [f"a{k}"]),
        ]
        inits += [numpy_helper.from_array(w, f"w{k}"), numpy_helper.from_array(b, f"b{k}")]
        prev = f"a{k}"
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 4])],
        inits,
    )
    return helper.make_model(graph)


def test_equal_constants_share_one_initializer_and_compute_the_same():
    x = np.random.default_rng(0).standard_normal((1, 4)).astype(np.float32)
    model = _shared_weight_graph(5)
    w = numpy_helper.to_array(model.graph.initializer[0])
    b = numpy_helper.to_array(model.graph.initializer[1])
    finished = finish_model(model)[0]
    assert len(finished.graph.initializer) == 2
    expected = x
    for _ in range(5):
        expected = expected @ w + b
    (out,) = execute_qonnx(finished, {"x": x}).values()
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_commutative_inputs_put_the_constant_last():
    finished = finish_model(_shared_weight_graph(1))[0]
    add = next(n for n in finished.graph.node if n.op_type == "Add")
    inits = {t.name for t in finished.graph.initializer}
    assert add.input[0] not in inits and add.input[1] in inits


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_constants_equal_in_bytes_but_not_type_or_shape_stay_apart(dtype):
    a = numpy_helper.from_array(np.zeros((2, 2), dtype), "a")
    b = numpy_helper.from_array(np.zeros(4, dtype), "b")
    c = numpy_helper.from_array(np.zeros((2, 2), np.int32 if dtype != np.int32 else np.int8), "c")
    graph = helper.make_graph(
        [helper.make_node("Identity", [n], [f"{n}_out"]) for n in "abc"], "g", [], [], [a, b, c]
    )
    model = helper.make_model(graph)
    assert share_equal_initializers(model) == (model, False)
    graph = model.graph
    assert len(graph.initializer) == 3
