"""The builtins closing the gap to tf2onnx's TFLite handler table (scripts/tflite_op_gap.py),
each alone against the TFLite interpreter: float, and int8 where TFLite quantizes the op."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from litert_compare import compare
from test_tflite_ops import interpreter, op_names, xnnpack_agreement
from tf_models import build_tflite
from tf_models_gap import GAP_CASES
from tflite_writer import build_model

import tflite2qonnx
from qonnx_ingest.errors import ConversionError

pytestmark = pytest.mark.keras

PARAMS = [pytest.param(name, False, id=f"{name}-float") for name in GAP_CASES] + [
    pytest.param(name, True, id=f"{name}-int8")
    for name, case in GAP_CASES.items()
    if case.quantized
]


@pytest.mark.parametrize("name, quantized", PARAMS)
def test_gap_op_model_matches_interpreter(name: str, quantized: bool) -> None:
    """Same shapes as the interpreter's outputs (WHERE, UNIQUE: data-dependent); float within
    1e-4 relative, int8 within one step and equal on >= 99% of elements (or XNNPACK's share)."""
    case = GAP_CASES[name]
    data = build_tflite(case, quantized, seed=zlib.crc32(name.encode()) % 1000)
    assert case.op in op_names(data), f"TF's converter did not emit {case.op}"
    it = interpreter(data, xnnpack=case.interpreter == "default")
    pairs = compare(tflite2qonnx.convert(data), it, n_inputs=8, low=case.low, high=case.high)
    for p in pairs:
        assert p.ours.shape == p.reference.shape, p.name
    if quantized:
        steps = np.concatenate([p.steps() for p in pairs])
        assert steps.max() <= 1
        if np.mean(steps == 0) < 0.99:
            assert np.mean(steps == 0) >= xnnpack_agreement(data, case)
    else:
        assert all(p.float_error_ok() for p in pairs)


def _rank_model() -> bytes:
    tensors = [{"name": "x", "shape": (2, 3, 4)}, {"name": "r", "shape": (), "dtype": "int32"}]
    ops = [{"op": "RANK", "inputs": [0], "outputs": [1]}]
    return build_model(tensors, ops, [0], [1])


def test_rank_is_the_interpreters_constant() -> None:
    data = _rank_model()
    it = interpreter(data)
    it.invoke()
    expected = it.get_tensor(it.get_output_details()[0]["index"])
    model = tflite2qonnx.convert(data)
    from litert_compare import run_ours

    x = np.zeros((2, 3, 4), np.float32)
    (ours,) = run_ours(model, {model.graph.input[0].name: x}).values()
    assert ours.dtype == np.int32 and ours.shape == expected.shape and ours == expected == 3


def test_sparse_to_dense_refuses_repeated_indices() -> None:
    """ONNX ScatterND leaves the order of two writes to one cell open: refused, named."""
    from tf_models import OpCase, _fn

    case = OpCase(
        "SPARSE_TO_DENSE",
        _fn(
            lambda tf, x: tf.compat.v1.sparse_to_dense(
                [[0, 1], [0, 1]], [3, 4], x[0], 0.5, validate_indices=False
            )
        ),
        ((1, 2),),
        quantized=False,
    )
    data = build_tflite(case, False)
    with pytest.raises(ConversionError, match="SPARSE_TO_DENSE.*repeated indices|repeated"):
        tflite2qonnx.convert(data)
