"""Finishing keeps every quantizer, folds the rest, names things and passes onnx.checker."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from qonnx_ingest.errors import ConversionError, InputError
from qonnx_ingest.execute import execute_qonnx
from qonnx_ingest.finish import (
    MAX_OPSET,
    finish_model,
    infer_shapes,
    name_nodes,
    set_opset_imports,
    sort_nodes,
)
from qonnx_ingest.quant import QONNX_DOMAIN, make_quant


def quantized_matmul_graph(batch="N"):
    """y = x @ Quant(w + b_offset): the Add on constants folds, the Quant on the weight stays."""
    w = np.array([[0.26, -0.74], [0.5, 0.12]], dtype=np.float32)
    q = make_quant("w_sum", "w_q", 0.25, 0, 4)
    nodes = [
        helper.make_node("Add", ["w", "offset"], ["w_sum"], name="bias_fold"),
        q.node,
        helper.make_node("MatMul", ["x", "w_q"], ["y"], name="dense"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 2])],
        [
            numpy_helper.from_array(w, "w"),
            numpy_helper.from_array(np.full((2, 2), 0.01, np.float32), "offset"),
            *q.initializers,
        ],
    )
    return helper.make_model(graph)


def test_quantizers_survive_folding_and_constants_fold():
    model = finish_model(quantized_matmul_graph())[0]
    ops = [n.op_type for n in model.graph.node]
    assert ops == ["Quant", "MatMul"]
    assert model.graph.node[0].domain == QONNX_DOMAIN


def test_finished_model_passes_checker_with_qonnx_domain_imported():
    model = finish_model(quantized_matmul_graph(), opset=13)[0]
    onnx.checker.check_model(model)
    imports = {o.domain: o.version for o in model.opset_import}
    assert imports == {"": 13, QONNX_DOMAIN: 1}
    assert model.opset_import[0].domain == ""


def test_finished_model_computes_the_hand_derived_result():
    # w + 0.01 = [[0.27, -0.73], [0.51, 0.13]] -> /0.25 = [[1.08,-2.92],[2.04,0.52]]
    # -> round [[1,-3],[2,1]] -> *0.25 = [[0.25,-0.75],[0.5,0.25]]; x=[[1,2]] -> [1.25, -0.25]
    model = finish_model(quantized_matmul_graph())[0]
    y = execute_qonnx(model, {"x": np.array([[1, 2]], np.float32)})["y"]
    np.testing.assert_allclose(y, [[1.25, -0.25]], rtol=1e-6)


def test_graph_io_names_kept_and_internal_names_readable_and_unique():
    model = finish_model(quantized_matmul_graph())[0]
    assert [i.name for i in model.graph.input] == ["x"]
    assert [o.name for o in model.graph.output] == ["y"]
    names = [n.name for n in model.graph.node]
    assert len(set(names)) == len(names) and all(names)
    assert model.graph.node[0].output[0] == f"{names[0]}_out0"


def test_every_tensor_gets_a_shape():
    model = finish_model(quantized_matmul_graph())[0]
    inits = {t.name for t in model.graph.initializer}
    known = {v.name for v in (*model.graph.value_info, *model.graph.input, *model.graph.output)}
    produced = {o for n in model.graph.node for o in n.output}
    assert produced - inits <= known


def test_shape_of_a_dynamic_tensor_is_not_baked_in():
    graph = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Reshape", ["x", "s"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
    )
    model = finish_model(helper.make_model(graph))[0]
    assert [n.op_type for n in model.graph.node] == ["Shape", "Reshape"]


def test_duplicate_and_empty_node_names_are_made_unique():
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["a"], name="act"),
            helper.make_node("Relu", ["a"], ["b"], name="act"),
            helper.make_node("Relu", ["b"], ["c"]),
        ],
        "g",
        [],
        [],
    )
    model, modified = name_nodes(helper.make_model(graph))
    assert modified and [n.name for n in model.graph.node] == ["act", "Relu_0", "Relu_1"]


def _chain_graph(reverse: bool) -> onnx.ModelProto:
    nodes = [
        onnx.helper.make_node("Relu", ["x"], ["a"], name="first"),
        onnx.helper.make_node("Neg", ["a"], ["b"], name="second"),
        onnx.helper.make_node("Abs", ["x"], ["c"], name="independent"),
        onnx.helper.make_node("Add", ["b", "c"], ["y"], name="last"),
    ]
    return onnx.helper.make_model(
        onnx.helper.make_graph(nodes[::-1] if reverse else nodes, "g", [], [])
    )


def test_sort_nodes_orders_a_reversed_graph_topologically():
    model, modified = sort_nodes(_chain_graph(reverse=True))
    order = [n.name for n in model.graph.node]
    assert modified
    assert order.index("first") < order.index("second") < order.index("last")
    assert order.index("independent") < order.index("last")


def test_sort_nodes_keeps_an_already_sorted_graph_unchanged():
    model, modified = sort_nodes(_chain_graph(reverse=False))
    assert not modified
    assert [n.name for n in model.graph.node] == ["first", "second", "independent", "last"]


def test_sort_nodes_names_a_cycle():
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("Relu", ["b"], ["a"], name="r"),
            onnx.helper.make_node("Neg", ["a"], ["b"], name="n"),
        ],
        "g",
        [],
        [],
    )
    with pytest.raises(ConversionError, match="cycle"):
        sort_nodes(onnx.helper.make_model(graph))


@pytest.mark.parametrize("opset", [7, 12, 27, 99])
def test_opsets_outside_what_the_converters_emit_are_refused(opset):
    model = onnx.helper.make_model(onnx.helper.make_graph([], "g", [], []))
    with pytest.raises(InputError, match=f"opset {opset}"):
        set_opset_imports(model, opset=opset)


def test_the_newest_accepted_opset_loads_in_onnxruntime():
    """MAX_OPSET is what the pinned onnxruntime runs (onnx itself writes one more)."""
    import onnxruntime as ort

    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])
    relu = onnx.helper.make_node("Relu", ["x"], ["y"])
    model = finish_model(onnx.helper.make_model(onnx.helper.make_graph([relu], "g", [x], [y])),
                         opset=MAX_OPSET)[0]  # fmt: skip
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {"x": np.array([-1.0, 2.0], np.float32)})
    np.testing.assert_array_equal(out, [0.0, 2.0])


@pytest.mark.parametrize("opset", [13, MAX_OPSET])
def test_ir_version_is_the_opsets_own_so_onnxruntime_loads_a_newer_onnxs_output(opset):
    """onnx 1.23 (what a base install may resolve) stamps IR 14, which onnxruntime 1.31
    refuses; a finished model carries the IR version its opsets need (ONNX's version table)."""
    import onnxruntime as ort

    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])
    relu = onnx.helper.make_node("Relu", ["x"], ["y"])
    model = onnx.helper.make_model(onnx.helper.make_graph([relu], "g", [x], [y]))
    model.ir_version = 14  # as onnx 1.23 writes it
    finished = finish_model(model, opset=opset)[0]
    assert finished.ir_version == {13: 7, 26: 13}[opset]  # onnx.helper.VERSION_TABLE
    session = ort.InferenceSession(finished.SerializeToString(), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {"x": np.array([-1.0, 2.0], np.float32)})
    np.testing.assert_array_equal(out, [0.0, 2.0])


def _activation_shapes(model: onnx.ModelProto) -> dict[str, str]:
    inits = {t.name for t in model.graph.initializer}
    return {
        v.name: str(v.type) for v in model.graph.value_info if v.name not in inits
    }  # fmt: skip


@pytest.mark.parametrize("batch", ["N", 3])
def test_linear_shape_inference_agrees_with_qonnx_infer_shapes(batch):
    """The same shapes and types on every activation as qonnx's (quadratic) InferShapes, with a
    quantizer on a dynamic-batch activation and one on a constant."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.infer_shapes import InferShapes

    model = quantized_matmul_graph(batch)
    make_quant("y", "y_q", 0.5, 1, 6, rounding_mode="HALF_UP").add_to(model.graph)
    model.graph.output[0].name = "y_q"
    set_opset_imports(model, opset=13)
    ours = infer_shapes(model)
    theirs = ModelWrapper(model).transform(InferShapes(), cleanup=False).model
    assert _activation_shapes(ours) == _activation_shapes(theirs)
    assert set(_activation_shapes(ours)) == {"w_sum", "w_q", "y"}  # y_q: a graph output
    assert [n.op_type for n in ours.graph.node] == [n.op_type for n in model.graph.node]


def test_outer_tensors_an_if_branch_reads_keep_their_names_and_values():
    """An If branch reads outer tensors by name: renaming or dropping them cuts it off. Here
    the branch reads a computed tensor and a constant nothing else reads; y = x * 2 + 3."""
    branch = helper.make_graph(
        [helper.make_node("Add", ["doubled", "three"], ["b_out"])],
        "branch",
        [],
        [helper.make_tensor_value_info("b_out", TensorProto.FLOAT, [1, 2])],
    )
    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "two"], ["doubled"], name="mul"),
            helper.make_node("If", ["cond"], ["y"], then_branch=branch, else_branch=branch),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
        [
            numpy_helper.from_array(np.array(True), "cond"),
            numpy_helper.from_array(np.array(2.0, np.float32), "two"),
            numpy_helper.from_array(np.array(3.0, np.float32), "three"),
        ],
    )
    finished = finish_model(helper.make_model(graph))[0]
    assert "three" in {t.name for t in finished.graph.initializer}
    import onnxruntime as ort

    session = ort.InferenceSession(finished.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.array([[1.5, -4.0]], np.float32)
    (y,) = session.run(None, {"x": x})
    np.testing.assert_array_equal(y, x * 2 + 3)


def test_a_custom_op_refusing_shape_inference_is_named():
    """qonnx's channels-last MaxPool asserts "Uneven padding not supported" inside qonnx's
    InferShapes, which names no node: finishing finds the node and names it."""
    pool = helper.make_node(
        "MaxPool",
        ["x"],
        ["y"],
        name="pool_uneven",
        domain="qonnx.custom_op.channels_last",
        kernel_shape=[2],
        strides=[2],
        pads=[0, 1],
    )
    graph = helper.make_graph(
        [pool],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 7, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    with pytest.raises(ConversionError, match="Uneven padding not supported") as caught:
        finish_model(helper.make_model(graph))
    assert caught.value.where == "pool_uneven"
