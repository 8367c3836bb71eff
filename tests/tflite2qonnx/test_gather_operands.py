"""GATHER's axis must name an axis of its input, as TFLite's kernel requires: a rank-0 input or
an axis out of range is a ConversionError naming the operator and tensor (the fuzzer found a
rank-0 input crashing with ZeroDivisionError; a modulo would have gathered along another axis).
"""

from __future__ import annotations

import numpy as np
import pytest
from tflite_writer import build_model

import tflite2qonnx
from qonnx_ingest.errors import ConversionError


def _gather_model(x_shape: list[int], axis: int) -> bytes:
    tensors = [
        {"name": "params", "shape": x_shape},
        {"name": "indices", "shape": [1], "dtype": "int32", "data": np.array([0], np.int32)},
        {"name": "y", "shape": [1] * max(len(x_shape), 1)},
    ]
    operators = [
        {
            "op": "GATHER",
            "inputs": [0, 1],
            "outputs": [2],
            "options": ("GatherOptions", {"Axis": axis}),
        }
    ]
    return build_model(tensors, operators, [0], [2])


@pytest.mark.parametrize(
    ("x_shape", "axis"), [([], 0), ([2, 3], 2), ([2, 3], -3)], ids=["rank0", "axis2", "axis-3"]
)
def test_gather_axis_outside_its_input_is_refused_naming_the_tensor(x_shape, axis) -> None:
    with pytest.raises(ConversionError, match=rf"GATHER axis {axis} .*tensor 0 'params' of rank"):
        tflite2qonnx.convert(_gather_model(x_shape, axis))


def test_gather_negative_axis_counts_from_the_end() -> None:
    """axis -1 of a [2, 3] input is axis 1: indices [0] pick column 0 (values derived by hand)."""
    from onnx.reference import ReferenceEvaluator

    model = tflite2qonnx.convert(_gather_model([2, 3], -1))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = ReferenceEvaluator(model).run(None, {model.graph.input[0].name: x})
    np.testing.assert_array_equal(y.reshape(-1), [0.0, 3.0])
