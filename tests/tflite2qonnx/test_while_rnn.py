"""Keras GRU and SimpleRNN through TF's converter: each layer is a WHILE over rank-3 values
(TF fuses only LSTM into a builtin), converted to an ONNX Loop; a graph with no convolution
permutes nothing, so the layout pass leaves the Loops alone. Float and dynamic-range (int8
weights: the bodies' FULLY_CONNECTEDs are hybrid, their on-the-fly input quantization
written with standard ops) against the interpreter's reference kernels.

Measured: max |diff| ~5e-7 (float) and ~4e-7 (dynamic) on outputs up to ~1.
"""

from __future__ import annotations

import numpy as np
import pytest
from control_flow_models import in_fresh_process
from litert_compare import compare, reference_interpreter

import tflite2qonnx
from tflite2qonnx.reader import read_model

pytestmark = pytest.mark.keras


@pytest.fixture(scope="module")
def models() -> dict[str, bytes]:
    return in_fresh_process(
        {mode: ("recurrent_model", {"mode": mode}) for mode in ("float", "dynamic")},
        module="while_rnn_models",
    )


def _loops(model):
    return [n for n in model.graph.node if n.op_type == "Loop"]


def _pairs(data: bytes):
    model = tflite2qonnx.convert(data)
    return model, compare(model, reference_interpreter(data), n_inputs=3, low=-2, high=2)


@pytest.mark.parametrize(("mode", "rtol"), [("float", 1e-4), ("dynamic", 1e-6)])
def test_keras_gru_and_simple_rnn_convert_to_loops_matching_the_interpreter(
    models, mode: str, rtol: float
) -> None:
    """GRU (reset_after both ways, return_sequences both ways) and stacked SimpleRNN: four
    Loops whose bodies hold default-domain ops only, all three outputs within ``rtol`` of
    max(1, |output|)."""
    model, pairs = _pairs(models[mode])
    loops = _loops(model)
    assert len(loops) == 4
    for loop in loops:
        (body,) = (a.g for a in loop.attribute if a.name == "body")
        assert {n.domain for n in body.node} <= {"", "ai.onnx"}
    assert len({p.name for p in pairs}) == 3
    worst = max(float(np.max(np.abs(p.ours - p.reference))) for p in pairs)
    assert all(p.float_error_ok(rtol) for p in pairs), f"max error {worst}"


def test_dynamic_range_while_bodies_quantize_inputs_on_the_fly(models) -> None:
    """The dynamic-range file's WHILE bodies hold FULLY_CONNECTEDs with int8 weights on float
    inputs, and its outputs differ from the float model's by more than the bound the
    conversion meets: the hybrid rounding is what the Loops reproduce."""
    tfl = read_model(models["dynamic"])
    hybrid = [
        op
        for sg in tfl.subgraphs[1:]
        for op in sg.operators
        if op.name == "FULLY_CONNECTED" and sg.tensors[op.inputs[1]].dtype == "int8"
    ]
    assert len(hybrid) >= 4
    x = np.random.default_rng(5).uniform(-2, 2, (1, 5, 32)).astype(np.float32)
    outputs = []
    for mode in ("float", "dynamic"):  # the interpreters on one input
        it = reference_interpreter(models[mode])
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        found = [it.get_tensor(o["index"]) for o in it.get_output_details()]
        outputs.append(sorted(found, key=lambda a: a.shape))
    gaps = [
        np.max(np.abs(f - d)) / max(1.0, np.max(np.abs(f))) for f, d in zip(*outputs, strict=True)
    ]
    assert max(gaps) > 1e-3
