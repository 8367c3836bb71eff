"""Keras GRU and SimpleRNN through TF's converter: each layer is a WHILE over rank-3 values
(TF fuses only LSTM into a builtin), converted to an ONNX Loop; a graph with no convolution
permutes nothing; after a convolution the layout pass hands the Loop its input in source
order (the Loop is a terminate op). Float and dynamic-range (int8
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
from qonnx_ingest.errors import ConversionError
from tflite2qonnx.reader import read_model

pytestmark = pytest.mark.keras


@pytest.fixture(scope="module")
def models() -> dict[str, bytes]:
    specs = {mode: ("recurrent_model", {"mode": mode}) for mode in ("float", "dynamic")}
    specs |= {"conv": ("conv_gru_model", {}), "conv body": ("conv_in_while_model", {})}
    return in_fresh_process(specs, module="while_rnn_models")


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


@pytest.mark.parametrize("keep_io_layout", [True, False])
def test_convolutions_feeding_gru_loops_match_the_interpreter(models, keep_io_layout) -> None:
    """Conv1D -> GRU and Conv2D -> Reshape -> GRU: the convolutions run channels-first, a
    Transpose back to source order precedes each Loop's input."""
    model = tflite2qonnx.convert(models["conv"], keep_io_layout=keep_io_layout)
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("Loop") == 2 and ops.count("Conv") == 2 and "Transpose" in ops
    pairs = compare(model, reference_interpreter(models["conv"]), n_inputs=3)
    assert len({p.name for p in pairs}) == 2
    assert all(p.float_error_ok(1e-4) for p in pairs)


def test_a_convolution_inside_a_while_body_is_refused_naming_it(models) -> None:
    """The layout pass does not enter ONNX subgraphs, so a Conv in a Loop body would run on
    channels-last values: refused, naming the WHILE and the Conv."""
    with pytest.raises(ConversionError, match="WHILE subgraph .* holds Conv"):
        tflite2qonnx.convert(models["conv body"])
