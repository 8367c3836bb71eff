"""qonnx's executor on a dynamic-batch model fed a batch: every shape static from the feeds,
sizes computed at run time included (qonnx_ingest.execute.with_static_shapes)."""

import warnings

import numpy as np
from quant_models import zero_state_model

from qonnx_ingest.execute import execute_qonnx, with_static_shapes


def test_a_zero_state_sized_from_the_batch_gets_a_static_shape():
    """ConstantOfShape(Concat(Shape(x)[:1], [5])): onnx's data propagation carries the fed
    batch through; without it qonnx's executor warned "Output shapes disagree" at each node
    after the state (505 such nodes per call in the corpus QLSTM)."""
    model = with_static_shapes(zero_state_model(None), {"x": np.zeros((3, 1), np.float32)})
    for vi in model.graph.value_info:
        assert all(d.HasField("dim_value") for d in vi.type.tensor_type.shape.dim), vi.name


def test_the_executor_runs_it_without_shape_warnings_and_computes_it():
    x = np.array([[-1.0], [0.5], [2.0]], np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = execute_qonnx(zero_state_model(None), {"x": x})["y"]
    assert not [w for w in caught if "Output shapes disagree" in str(w.message)]
    # state = relu(x) on 5 units; h = state @ 0.25 (5x5) = 1.25 relu(x); y = h @ 0.5 (5x2)
    np.testing.assert_allclose(y, np.repeat(3.125 * np.maximum(x, 0), 2, axis=1))
