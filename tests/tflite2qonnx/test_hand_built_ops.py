"""Ops TF's converter does not emit alone, on hand-built models, against the interpreter's
reference kernels (DENSIFY: sparse constants expanded at conversion time)."""

from __future__ import annotations

import pytest
from hand_built import MODELS
from litert_compare import compare, reference_interpreter

import tflite2qonnx


@pytest.mark.parametrize("name", list(MODELS))
def test_hand_built_model_matches_interpreter(name: str) -> None:
    data = MODELS[name]()
    pairs = compare(
        tflite2qonnx.convert(data), reference_interpreter(data), n_inputs=3, low=-2, high=2
    )
    assert pairs and all(p.float_error_ok() for p in pairs)


def test_densify_folds_to_a_constant() -> None:
    """No sparse data reaches the ONNX graph: DENSIFY leaves an initializer, no node."""
    model = tflite2qonnx.convert(MODELS["densify_blocked_2x2"]())
    assert [n.op_type for n in model.graph.node] == ["Add"]
