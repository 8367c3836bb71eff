"""Hybrid (dynamic-range) LSTMs, int8 weights on float activations, against the interpreter.

TFLite's hybrid kernel quantizes each step's input rows and output-state rows on the fly
(asymmetric by default from TF's converter, symmetric otherwise); the converted graph does
the same in float32 op for op, so the outputs agree to float32 rounding of the activations
(measured max |diff| ~2e-7 on outputs up to ~1; bound 1e-6 relative to max(1, |output|)).
The interpreter carries the LSTM's state variables between invocations; ``litert_compare``
resets them, the converted graph starting from zero state.
"""

from __future__ import annotations

import numpy as np
import pytest
from litert_compare import compare, reference_interpreter, run_ours
from lstm_hybrid_models import hybrid_lstm, keras_hybrid_lstms, with_lstm_options

import tflite2qonnx
from qonnx_ingest.errors import ConversionError
from tflite2qonnx.cli import main
from tflite2qonnx.reader import read_model

RTOL = 1e-6  # float32 rounding of sigmoid / tanh between the two implementations


def assert_matches(data: bytes, xnnpack: bool = False, n_inputs: int = 4) -> list:
    model = tflite2qonnx.convert(data)
    pairs = compare(model, reference_interpreter(data, xnnpack=xnnpack), n_inputs=n_inputs,
                    low=-2, high=2)  # fmt: skip
    assert pairs
    worst = max(float(np.max(np.abs(p.ours - p.reference))) for p in pairs)
    assert all(p.float_error_ok(RTOL) for p in pairs), f"max error {worst}"
    return pairs


def lstm_ops(data: bytes) -> list:
    sg = read_model(data).subgraphs[0]
    return [(op, sg) for op in sg.operators if op.name.endswith("SEQUENCE_LSTM")]


@pytest.fixture(scope="module")
def keras_model() -> bytes:
    return keras_hybrid_lstms()


@pytest.mark.keras
def test_keras_lstms_convert_to_hybrid_lstms_with_asymmetric_inputs(keras_model) -> None:
    """What the converter emits: three UNIDIRECTIONAL_SEQUENCE_LSTMs (Bidirectional is two),
    int8 weights, float input, asymmetric input quantization."""
    ops = lstm_ops(keras_model)
    assert len(ops) == 3
    for op, sg in ops:
        assert op.name == "UNIDIRECTIONAL_SEQUENCE_LSTM"
        assert sg.tensors[op.inputs[0]].dtype == "float32"
        assert {sg.tensors[op.inputs[k]].dtype for k in range(1, 9)} == {"int8"}
        assert op.options["asymmetric_quantize_inputs"] is True
    assert sum(op.options["time_major"] for op, _ in ops) == 1


@pytest.mark.keras
@pytest.mark.parametrize("xnnpack", [False, True])
def test_keras_hybrid_lstms_match_interpreter(keras_model, xnnpack: bool) -> None:
    """Bidirectional last step and time-major sequences, asymmetric inputs."""
    pairs = assert_matches(keras_model, xnnpack)
    assert len(pairs) == 2 * 4  # two outputs, four inputs


@pytest.mark.keras
def test_keras_hybrid_lstms_with_symmetric_inputs_match_interpreter(keras_model) -> None:
    symmetric = with_lstm_options(keras_model, asymmetricQuantizeInputs=False)
    pairs = assert_matches(symmetric)
    # the quantization mode shows in the interpreter's outputs: matching both means modelling it
    asymmetric = compare(tflite2qonnx.convert(keras_model), reference_interpreter(keras_model),
                         n_inputs=4, low=-2, high=2)  # fmt: skip
    gap = max(float(np.max(np.abs(p.reference - q.reference)))
              for p, q in zip(pairs, asymmetric, strict=True))  # fmt: skip
    assert gap > 1e-4


HAND_BUILT = {
    "symmetric": {"asymmetric": False},
    "time_major": {"time_major": True},
    "cifg": {"cifg": True},
    "layer_norm": {"layer_norm": True},
    "bidirectional_batch1": {"bidirectional": True, "shape": (1, 4, 6)},
    "bidirectional_unmerged": {"bidirectional": True, "merge_outputs": False},
    "bidirectional_unmerged_symmetric": {
        "bidirectional": True,
        "merge_outputs": False,
        "asymmetric": False,
    },
    "bidirectional_time_major_cifg": {"bidirectional": True, "time_major": True, "cifg": True},
}


@pytest.mark.parametrize("variant", sorted(HAND_BUILT))
def test_hand_built_hybrid_lstm_matches_interpreter(variant: str) -> None:
    assert_matches(hybrid_lstm(**HAND_BUILT[variant], seed=len(variant)))


def test_merged_batch_major_bidirectional_hybrid_lstm_is_refused_naming_the_kernel_bug() -> None:
    """Rows after the first read their output state past the state tensor in TFLite's kernel
    (its outputs there are not a function of the input), so there is nothing to reproduce."""
    data = hybrid_lstm(bidirectional=True, shape=(2, 4, 6))
    with pytest.raises(ConversionError, match="merge_outputs on a batch-major input of batch 2"):
        tflite2qonnx.convert(data)


def test_hybrid_lstm_with_per_channel_weights_is_refused() -> None:
    data = hybrid_lstm(per_channel=True)
    with pytest.raises(ConversionError, match="per-tensor int8 weights"):
        tflite2qonnx.convert(data)


def test_cli_verify_passes_on_a_hybrid_lstm(tmp_path, capsys) -> None:
    src = tmp_path / "hybrid_lstm.tflite"
    src.write_bytes(hybrid_lstm(seed=3))
    out = tmp_path / "hybrid_lstm.onnx"
    assert main([str(src), "-o", str(out), "--verify"]) == 0
    assert out.exists()


@pytest.mark.parametrize("asymmetric", [True, False])
def test_hybrid_lstm_with_zero_rows_matches_interpreter(asymmetric: bool) -> None:
    """Zero rows quantize to q = 0 with factor 1 (zero point 0), and an all-zero step input
    is skipped by the kernel: both add exactly nothing, as the graph's products do."""
    data = hybrid_lstm(asymmetric=asymmetric, shape=(3, 4, 6), seed=11)
    model = tflite2qonnx.convert(data)
    it = reference_interpreter(data)
    (inp,), (out,) = it.get_input_details(), it.get_output_details()
    x = np.random.default_rng(2).uniform(-2, 2, inp["shape"]).astype(np.float32)
    x[0] = 0.0  # one batch row zero throughout
    x[:, 1] = 0.0  # every row zero at step 1 (the kernel skips the input product)
    x[2, 3, :3] = 0.0  # part of a row
    it.reset_all_variables()
    it.set_tensor(inp["index"], x)
    it.invoke()
    theirs = it.get_tensor(out["index"])
    ours = run_ours(model, {model.graph.input[0].name: x})[model.graph.output[0].name]
    assert np.max(np.abs(ours - theirs)) <= RTOL * max(1.0, float(np.max(np.abs(theirs))))
