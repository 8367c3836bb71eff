"""--verify's reference and spread come from the TFLite runtimes that run the model:

* TILE version 3 (stm32zoo's SSD-FPN), which the builtin reference resolver registers only up
  to version 2 (the same kernel): verify runs the builtin reference kernels on a copy with
  version 2 and --bit-exact is 0 error there;
* XNNPACK failing to build a runtime (OSNet): the optimized builtin kernels measure TFLite's
  spread instead, and verify runs rather than being skipped.
"""

from __future__ import annotations

import numpy as np
import pytest
from litert_compare import reference_interpreter
from tflite_writer import build_model

from qonnx_ingest.errors import ReferenceUnavailable
from tflite2qonnx import reference_paths
from tflite2qonnx.api import convert
from tflite2qonnx.reference import verify


def _tile_then_add(version: int) -> bytes:
    """int8 TILE (version ``version``) then ADD: quantized output, so verify needs a spread."""
    q = ([0.02], [3])
    tensors = [
        {"name": "x", "shape": (1, 2, 3, 4), "dtype": "int8", "quant": q},
        {"name": "m", "shape": (4,), "dtype": "int32", "data": np.array([1, 2, 1, 3], np.int32)},
        {"name": "t", "shape": (1, 4, 3, 12), "dtype": "int8", "quant": q},
        {"name": "y", "shape": (1, 4, 3, 12), "dtype": "int8", "quant": ([0.03], [-2])},
    ]
    ops = [
        {"op": "TILE", "inputs": [0, 1], "outputs": [2], "version": version},
        {"op": "ADD", "inputs": [2, 2], "outputs": [3], "options": ("AddOptions", {})},
    ]
    return build_model(tensors, ops, [0], [3])


def test_tile_version_3_verifies_against_the_builtin_reference_kernels():
    data = _tile_then_add(3)
    with pytest.raises((RuntimeError, ValueError), match="TILE"):  # the plain resolver
        reference_interpreter(data)
    figures = verify(data, convert(data, bit_exact=True))
    assert figures.runner.endswith("TFLite reference: builtin kernels"), figures.runner
    assert figures.passed and figures.outputs[0].equal_fraction == 1.0


def test_spread_from_the_optimized_builtin_kernels_when_xnnpack_fails(monkeypatch):
    opened = reference_paths.open_path

    def no_xnnpack(source, kind, model=None):
        if kind == reference_paths.XNNPACK:
            raise ReferenceUnavailable("failed to create XNNPACK runtime")
        return opened(source, kind, model)

    monkeypatch.setattr("tflite2qonnx.reference.open_path", no_xnnpack)
    data = _tile_then_add(1)
    figures = verify(data, convert(data))
    agreement = figures.outputs[0]
    assert agreement.baseline_name == "TFLite's own CPU paths (optimized builtin, builtin)"
    assert figures.passed and "equal_fraction" in agreement.baseline
