"""STABLEHLO_COMPOSITE (litert-torch's ``odml.*`` ops) converted by inlining its
decomposition subgraph, against the interpreter, which runs that same subgraph (it has no
kernel for the composites' names)."""

from __future__ import annotations

import warnings

import pytest
from composite_models import float_conv_composite, int8_add_composite
from litert_compare import compare, reference_interpreter

import tflite2qonnx
from qonnx_ingest.errors import ConversionError, ConversionWarning


@pytest.fixture(scope="module")
def float_conv() -> bytes:
    return float_conv_composite()


def test_float_composite_with_a_conv_matches_interpreter(float_conv: bytes) -> None:
    """The inlined CONV_2D goes through the layout pass like a main-graph one."""
    model = tflite2qonnx.convert(float_conv)
    assert "Conv" in [n.op_type for n in model.graph.node]
    pairs = compare(model, reference_interpreter(float_conv), n_inputs=3)
    assert pairs and all(p.float_error_ok() for p in pairs)


def test_int8_composite_matches_interpreter_within_a_step() -> None:
    data = int8_add_composite()
    model = tflite2qonnx.convert(data)
    assert any(n.op_type == "Quant" for n in model.graph.node)
    pairs = compare(model, reference_interpreter(data), n_inputs=4)
    assert pairs and all(p.steps().max() <= 1 for p in pairs)


def test_int8_composite_bit_exact_matches_interpreter() -> None:
    """--bit-exact emulates the inlined ADD's kernel and warns of nothing rounding once."""
    data = int8_add_composite()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConversionWarning)
        model = tflite2qonnx.convert(data, bit_exact=True)
    pairs = compare(model, reference_interpreter(data), n_inputs=4)
    assert pairs and all(p.steps().max() == 0 for p in pairs)


def test_decomposition_on_another_grid_is_refused() -> None:
    """TFLite copies the result's bytes: an inner grid unlike the outer one would reinterpret
    them, so it is refused naming both tensors."""
    with pytest.raises(ConversionError, match="tensor 'y' and its decomposition tensor 'sum'"):
        tflite2qonnx.convert(int8_add_composite(inner_out_grid=(0.05, 0)))


def test_decomposition_index_out_of_range_is_refused() -> None:
    with pytest.raises(ConversionError, match="decomposition_subgraph_index 7 names no"):
        tflite2qonnx.convert(float_conv_composite(decomposition=7))
