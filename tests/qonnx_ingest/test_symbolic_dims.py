"""Finishing names dynamic dims from the graph it finishes, not from an earlier form of it: the
mitbih corpus model came out with other value_info one conversion in about 40 because tf2onnx
wrote one layout move as a Transpose or as a Reshape to [-1, ...], and the symbols inferred on
that form outlived it (qonnx_ingest.symbolic_dims)."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from quant_models import zero_state_model

from qonnx_ingest.finish import finish_model
from qonnx_ingest.symbolic_dims import dynamic_dim_name, forget_generated_dims


def _move(form: str) -> tuple[list, list]:
    """[N, 3, 1] -> [N, 1, 3] written as tf2onnx writes it in one run or another."""
    if form == "transpose":
        return [helper.make_node("Transpose", ["r"], ["m"], name="move", perm=[0, 2, 1])], []
    shape = numpy_helper.from_array(np.int64([-1, 1, 3]), "shape")
    return [helper.make_node("Reshape", ["r", "shape"], ["m"], name="move")], [shape]


def _model(form: str) -> onnx.ModelProto:
    """x[batch, 3, 1] -> Relu -> move -> Neg -> Reshape [-1, 3] (a Flatten) -> Relu -> y."""
    move, inits = _move(form)
    flat = numpy_helper.from_array(np.int64([-1, 3]), "flat")
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        *move,
        helper.make_node("Neg", ["m"], ["n"], name="neg"),
        helper.make_node("Reshape", ["n", "flat"], ["f"], name="flatten"),
        helper.make_node("Relu", ["f"], ["y"], name="last"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [*inits, flat],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _unified(model: onnx.ModelProto) -> onnx.ModelProto:
    """What the 1-D-convolution rewrite does to both forms: one Transpose, its output's stale
    value_info dropped, the rest of the value_info kept."""
    graph = model.graph
    move = next(n for n in graph.node if n.name == "move")
    move.op_type = "Transpose"
    del move.input[1:]
    del move.attribute[:]
    move.attribute.append(helper.make_attribute("perm", [0, 2, 1]))
    kept = [v for v in graph.value_info if v.name != "move_out0"]
    del graph.value_info[:]
    graph.value_info.extend(kept)
    kept_inits = [t for t in graph.initializer if any(t.name in n.input for n in graph.node)]
    del graph.initializer[:]
    graph.initializer.extend(kept_inits)
    return model


def _dims(model: onnx.ModelProto) -> dict[str, list]:
    return {
        v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in model.graph.value_info
    }


def test_refinishing_two_forms_of_one_graph_gives_the_same_bytes():
    finished = []
    for form in ("transpose", "reshape"):
        first, _ = finish_model(_model(form))
        again, _ = finish_model(_unified(first))
        finished.append(again.SerializeToString())
    assert finished[0] == finished[1]


def test_the_reshape_form_loses_the_batch_symbol_until_refinished():
    """The mechanism itself: inference cannot carry ``batch`` through Reshape [-1, 1, 3]."""
    first, _ = finish_model(_model("reshape"))
    assert _dims(first)["move_out0"][0] != "batch"
    again, _ = finish_model(_unified(first))
    dims = _dims(again)
    assert dims["move_out0"] == ["batch", 1, 3]
    assert dims["neg_out0"] == ["batch", 1, 3]


def test_refinished_value_info_claims_no_equality_the_graph_does_not_prove():
    """After the flattening Reshape [-1, 3] the size is not provably the batch (a [N, 1, 3]
    tensor flattens to N rows, but inference cannot know): that dim keeps a name of its own."""
    for form in ("transpose", "reshape"):
        first, _ = finish_model(_model(form))
        again, _ = finish_model(_unified(first))
        flat = _dims(again)["flatten_out0"]
        assert flat[0] != "batch" and flat[1] == 3
        assert flat[0] not in {d[0] for name, d in _dims(again).items() if name != "flatten_out0"}


def test_forget_generated_dims_clears_only_made_up_names_in_value_info():
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["unk__4", 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["unk__5", 2])],
        value_info=[
            helper.make_tensor_value_info("r", TensorProto.FLOAT, ["unk__12", "x_dim1"]),
        ],
    )
    assert forget_generated_dims(graph)
    dims = graph.value_info[0].type.tensor_type.shape.dim
    assert not dims[0].HasField("dim_param") and not dims[0].HasField("dim_value")
    assert dims[1].dim_param == "x_dim1"
    assert graph.input[0].type.tensor_type.shape.dim[0].dim_param == "unk__4"
    assert graph.output[0].type.tensor_type.shape.dim[0].dim_param == "unk__5"
    assert not forget_generated_dims(graph)


def test_dynamic_dim_names_are_batch_then_per_tensor():
    assert dynamic_dim_name("input_1", 0) == "batch"
    assert dynamic_dim_name("input_1", 2) == "input_1_dim2"


def test_a_static_batch_reaches_every_shape_after_a_folded_zero_state():
    """Inferred before folding, the zero state's batch is unknown and so is every shape after
    it; folding makes it a [4, 5] constant and finishing infers the rest again."""
    finished, _ = finish_model(zero_state_model(4))
    dims = _dims(finished)
    assert dims["state_out0"] == dims["h_out0"] == [4, 5]
    assert all(all(isinstance(d, int) for d in shape) for shape in dims.values()), dims
    assert "ConstantOfShape" not in {n.op_type for n in finished.graph.node}


def test_stale_after_static_inputs_only_when_every_input_is_static():
    from qonnx_ingest.symbolic_dims import stale_after_static_inputs

    static = zero_state_model(4)
    static.graph.value_info.append(helper.make_tensor_value_info("h", TensorProto.FLOAT, [None, 5]))
    assert stale_after_static_inputs(static.graph)
    dynamic = zero_state_model(None)
    dynamic.graph.value_info.append(
        helper.make_tensor_value_info("h", TensorProto.FLOAT, [None, 5])
    )
    assert not stale_after_static_inputs(dynamic.graph)
    del static.graph.value_info[:]
    assert not stale_after_static_inputs(static.graph)
