"""UNIDIRECTIONAL_SEQUENCE_LSTM against the TFLite interpreter: float (Keras LSTMs from TF's
converter and edited variants of them) within 1e-4 relative, int8 with int16 cell state
(TFLite's 8x8_16 kernel) integer for integer, and the Coral int8 LSTM corpus model end to end
(in onnxruntime) and op by op.

The interpreter carries the LSTM's state variables from one invocation to the next; the
converted graph starts from the initial (zero) state, so every comparison resets the
interpreter's variables first (``litert_compare``).
"""

from __future__ import annotations

import numpy as np
import pytest
from litert_compare import compare, random_input, real_value, reference_interpreter
from lstm_models import keras_lstm, lstm_variant

import tflite2qonnx
from qonnx_ingest.errors import ConversionError
from qonnx_ingest.verification import run_converted
from support import CORPUS, requires_corpus
from tflite2qonnx.api import convert_subgraph, slice_subgraph
from tflite2qonnx.reader import read_model

OP = "UNIDIRECTIONAL_SEQUENCE_LSTM"
CORAL_LSTM = CORPUS / "tflite" / "coral__keras_lstm_mnist_ptq.tflite"

_BUILT: dict[tuple, bytes] = {}


def generated(quantized: bool = False, **kw) -> bytes:
    key = (quantized, tuple(sorted(kw.items())))
    if key not in _BUILT:
        _BUILT[key] = keras_lstm(quantized=quantized, **kw)
    return _BUILT[key]


def op_names(data) -> list[str]:
    return [op.name for op in read_model(data).subgraphs[0].operators]


def assert_float_matches(data: bytes, low: float = -2.0, high: float = 2.0) -> None:
    assert OP in op_names(data)
    model = tflite2qonnx.convert(data)
    for xnnpack in (False, True):
        pairs = compare(model, reference_interpreter(data, xnnpack=xnnpack), n_inputs=4,
                        low=low, high=high)  # fmt: skip
        worst = max(float(np.max(np.abs(p.ours - p.reference))) for p in pairs)
        assert all(p.float_error_ok() for p in pairs), f"max error {worst}"


@pytest.mark.keras
@pytest.mark.parametrize("return_sequences", [True, False])
def test_float_keras_lstm_matches_interpreter(return_sequences: bool) -> None:
    assert_float_matches(generated(return_sequences=return_sequences))


VARIANTS = {
    "peephole": {"peephole": True},
    "cifg": {"cifg": True},
    "cifg_peephole": {"cifg": True, "peephole": True},
    "layer_norm": {"layer_norm": True},
    "projection": {"projection": 3},
    "projection_clipped": {"projection": 3, "options": {"projClip": 0.3}},
    "cell_clip": {"options": {"cellClip": 0.2}},
    "time_major": {"options": {"timeMajor": True}},
    "relu_activation": {"options": {"fusedActivationFunction": 1}},
    "relu6_activation": {"options": {"fusedActivationFunction": 3}},
    "everything": {
        "cifg": True,
        "peephole": True,
        "layer_norm": True,
        "projection": 4,
        "options": {"cellClip": 0.5, "projClip": 0.4},
    },
}


@pytest.mark.keras
@pytest.mark.parametrize("variant", VARIANTS)
def test_float_lstm_variant_matches_interpreter(variant: str) -> None:
    """Peepholes (the output gate's on the updated cell), CIFG, layer norm (bias after it),
    projection, clips, time_major and the fused activation, as the interpreter runs them."""
    data = lstm_variant(generated(return_sequences=True), **VARIANTS[variant], seed=3)
    assert_float_matches(data)


def interpreter_integers(data, inputs: list[np.ndarray], xnnpack: bool) -> list[np.ndarray]:
    """The interpreter's output integers on each input, from the initial state."""
    it = reference_interpreter(data, xnnpack=xnnpack)
    (inp,), (out,) = it.get_input_details(), it.get_output_details()
    results = []
    for x in inputs:
        it.reset_all_variables()
        it.set_tensor(inp["index"], x)
        it.invoke()
        results.append(it.get_tensor(out["index"]).astype(np.float64))
    return results


def assert_equal_to_interpreter(model, data, n_inputs: int = 8, seed: int = 0) -> None:
    """Every output integer equal to both TFLite paths'. The converted model runs in
    onnxruntime (its Quant nodes lowered to standard ops), as --verify runs it."""
    it = reference_interpreter(data)
    (inp,), (out,) = it.get_input_details(), it.get_output_details()
    rng = np.random.default_rng(seed)
    inputs = [random_input(inp, rng) for _ in range(n_inputs)]
    feeds = [{inp["name"]: real_value(x, inp["quantization"])} for x in inputs]
    outputs, runner = run_converted(model, feeds)
    assert runner.startswith("onnxruntime")
    scale, zero_point = out["quantization"]
    ours = [np.round(o[out["name"]].astype(np.float64) / scale) + zero_point for o in outputs]
    for xnnpack in (False, True):
        for mine, theirs in zip(ours, interpreter_integers(data, inputs, xnnpack), strict=True):
            steps = np.abs(mine - theirs)
            assert steps.max() == 0, f"{np.mean(steps == 0):.4f} equal, max {steps.max()} steps"


@pytest.mark.keras
@pytest.mark.parametrize("return_sequences", [True, False])
def test_int8_keras_lstm_equals_interpreter(return_sequences: bool) -> None:
    """TF's full-integer conversion gives the 8x8_16 kernel, here with a 2^-15 cell state
    (tanh of the cell with 0 integer bits): every output integer equal. Before gemmlowp's
    logistic / tanh and the fixed-point rescales were emulated, 4% were a step off."""
    data = generated(quantized=True, return_sequences=return_sequences)
    assert OP in op_names(data)
    assert_equal_to_interpreter(tflite2qonnx.convert(data), data)


@pytest.mark.keras
def test_int8_cifg_lstm_equals_interpreter() -> None:
    """Without an input gate the kernel uses 32767 - f (Sub1Vector) on Q0.15."""
    data = lstm_variant(generated(quantized=True, return_sequences=True), cifg=True)
    assert_equal_to_interpreter(tflite2qonnx.convert(data), data)


@pytest.mark.keras
def test_int8_lstm_with_float_peepholes_is_refused_naming_the_tensor() -> None:
    """The integer kernel takes int16 peephole weights (``test_lstm_int_variants``); float
    ones on an int8 LSTM are no model the interpreter runs."""
    data = lstm_variant(generated(quantized=True, return_sequences=True), peephole=True)
    expected = f"peephole.*integer {OP} needs a per-tensor int16 tensor, got float32"
    with pytest.raises(ConversionError, match=expected):
        tflite2qonnx.convert(data)


# ---------------------------------------------------------------------- the corpus model
@requires_corpus
def test_coral_int8_lstm_agrees_end_to_end_in_onnxruntime() -> None:
    """The converted model runs in onnxruntime (Quant nodes lowered to standard ops) and
    gives the interpreter's uint8 output exactly, on both CPU paths."""
    assert_equal_to_interpreter(tflite2qonnx.convert(CORAL_LSTM), CORAL_LSTM, 16, 20261125)


@requires_corpus
@pytest.mark.parametrize("xnnpack", [False, True], ids=["builtin", "xnnpack"])
def test_coral_int8_lstm_op_equals_interpreter_on_its_own_input(xnnpack: bool) -> None:
    """The LSTM operator alone, fed the interpreter's own int8 input tensor
    (experimental_preserve_all_tensors): its 28-step output equals the interpreter's."""
    subgraph = read_model(CORAL_LSTM).subgraphs[0]
    (lstm,) = (op for op in subgraph.operators if op.name == OP)
    model = convert_subgraph(slice_subgraph(subgraph, [lstm.index]), keep_io_layout=True)
    it = reference_interpreter(CORAL_LSTM, preserve_all=True, xnnpack=xnnpack)
    details = it.get_tensor_details()
    (inp,) = it.get_input_details()
    x_idx, y_idx = lstm.inputs[0], lstm.outputs[0]
    rng = np.random.default_rng(7)
    for _ in range(4):
        it.reset_all_variables()
        it.set_tensor(inp["index"], random_input(inp, rng))
        it.invoke()
        feeds = {
            details[i]["name"]: real_value(it.get_tensor(i), details[i]["quantization"])
            for i in (x_idx, *lstm.inputs[18:20])  # the states: declared inputs, unused
        }
        outputs, _ = run_converted(model, [feeds])
        (y,) = outputs[0].values()
        scale, zero_point = details[y_idx]["quantization"]
        ours = np.round(y.astype(np.float64) / scale) + zero_point
        assert np.array_equal(ours, it.get_tensor(y_idx).astype(np.float64))
