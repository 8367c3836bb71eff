"""--format qcdq on --bit-exact conversions: the exact kernels round their 32-bit
accumulators with Quant nodes (FLOOR, HALF_UP) that no QuantizeLinear holds; they become the
standard ops that compute them, and the QCDQ model still equals the builtin kernels."""

from __future__ import annotations

import warnings

import pytest
from litert_compare import compare, reference_interpreter

import tflite2qonnx
from qonnx_ingest.errors import ConversionWarning
from qonnx_ingest.qcdq import to_qcdq
from support import CORPUS, requires_corpus

pytestmark = requires_corpus


@pytest.mark.parametrize("name", ["tflm__hello_world_int8", "t2o__conv.uint8"])
def test_bit_exact_model_in_qcdq_form_equals_the_builtin_kernels(name):
    path = CORPUS / "tflite" / f"{name}.tflite"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConversionWarning)  # HALF_UP ties: none on these inputs
        model = to_qcdq(tflite2qonnx.convert(path, bit_exact=True))
    ops = {n.op_type for n in model.graph.node}
    assert "QuantizeLinear" in ops and "Floor" in ops  # the rounding Quants as standard ops
    assert not {"Quant", "BipolarQuant", "Trunc"} & ops
    pairs = compare(model, reference_interpreter(path), n_inputs=16)
    assert len(pairs) == 16
    for pair in pairs:
        assert pair.steps().max() == 0
