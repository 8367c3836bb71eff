"""The pass contract (qonnx_ingest.passes): ``(model) -> (model, modified)``, cleanup after a
modifying pass only, fixed points by rounds, a pass that never settles refused by name."""

from functools import partial

import onnx
import pytest
from onnx import helper

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.finish import name_nodes, sort_nodes, stamp
from qonnx_ingest.passes import apply_until_fixed, run_passes


def _unnamed_chain(reverse: bool) -> onnx.ModelProto:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Neg", ["a"], ["y"]),
    ]
    return helper.make_model(helper.make_graph(nodes[::-1] if reverse else nodes, "g", [], []))


def test_cleanup_runs_after_a_pass_that_modified_the_model():
    model, modified = run_passes([sort_nodes], _unnamed_chain(reverse=True), cleanup=name_nodes)
    assert modified
    assert [n.op_type for n in model.graph.node] == ["Relu", "Neg"]
    assert [n.name for n in model.graph.node] == ["Relu_0", "Neg_0"]  # name_nodes ran


def test_cleanup_is_skipped_after_a_pass_that_changed_nothing():
    model, modified = run_passes([sort_nodes], _unnamed_chain(reverse=False), cleanup=name_nodes)
    assert not modified
    assert [n.name for n in model.graph.node] == ["", ""]


def test_fixed_point_stops_after_the_first_round_that_changes_nothing():
    model, modified = apply_until_fixed([sort_nodes, name_nodes], _unnamed_chain(reverse=True))
    assert modified
    assert [(n.op_type, n.name) for n in model.graph.node] == [("Relu", "Relu_0"), ("Neg", "Neg_0")]
    again, modified = apply_until_fixed([sort_nodes, name_nodes], model)
    assert again is model and not modified


def test_a_pass_that_always_says_modified_is_refused_by_name():
    with pytest.raises(ConversionError, match=r"after 3 rounds: sort_nodes, stamp"):
        apply_until_fixed(
            [sort_nodes, partial(stamp, metadata={"k": "v"})], _unnamed_chain(False), max_rounds=3
        )


def test_a_finished_model_is_a_fixed_point_of_finishings_own_passes():
    """Each idempotent step of finish_model, run again on its result, says it changed nothing
    (and leaves the bytes as they were): the ``modified`` flags are true ones."""
    from quant_models import dense_model

    from qonnx_ingest.finish import (
        drop_shapeless_value_info,
        quant_domains,
        remove_unused_tensors,
        sort_commutative_inputs,
    )
    from qonnx_ingest.fold import fold_constants, share_equal_initializers

    model = dense_model()
    before = model.SerializeToString()
    steps = [
        quant_domains,
        sort_nodes,
        fold_constants,
        sort_commutative_inputs,
        share_equal_initializers,
        remove_unused_tensors,
        drop_shapeless_value_info,
        name_nodes,
    ]
    for step in steps:
        assert step(model) == (model, False), step.__name__
    assert apply_until_fixed(steps, model) == (model, False)
    assert model.SerializeToString() == before
