"""--state-io: streaming models (LSTM, RNN and SVDF state in variable tensors) against the
interpreter over a stream of 8 calls, the interpreter never reset between them and ours fed
its own state outputs back. Every call's output and every state after it are compared (the
interpreter's variable tensors hold the state), quantized ones on their integer grids.

Models: SVDF float / hybrid / int8 (svdf_models), integer LSTM with a zero-pointed int8
output state (lstm_int_models), hybrid LSTM and RNN (lstm_hybrid_models, rnn_models), a Keras
float LSTM and the RNN made of it (lstm_models, TF's converter, built once), and the corpus's
TFLite Micro keyword spotter (7 int8 SVDF) and DTLN (2 int8 LSTM).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from litert_compare import random_input, real_value, reference_interpreter
from lstm_hybrid_models import hybrid_lstm
from lstm_int_models import integer_lstm
from rnn_models import hybrid_rnn
from state_stream import assert_stream_agrees, session, stream
from state_stream import grid as _grid
from state_stream import steps as _steps
from svdf_models import float_svdf, hybrid_svdf, int8_svdf, keyword_like_svdf

import tflite2qonnx
from qonnx_ingest.errors import ConversionWarning
from support import CORPUS, requires_corpus, run_module
from tflite2qonnx.reader import read_model
from tflite2qonnx.state import STATE_IO_KEY, read_pairs

KEYWORD = CORPUS / "tflite" / "tflm__keyword_scrambled.tflite"
DTLN = CORPUS / "tflite" / "tflm__dtln_noise_suppression.tflite"
CORAL_LSTM = CORPUS / "tflite" / "coral__keras_lstm_mnist_ptq.tflite"

MODELS = {
    "svdf_float": lambda: float_svdf(2, "RELU", seed=1),
    "svdf_hybrid": lambda: hybrid_svdf(2, "RELU", seed=2),
    "svdf_int8": lambda: int8_svdf(2, seed=3),
    "lstm_int8": lambda: integer_lstm(steps=2, seed=4),
    "lstm_int8_projection": lambda: integer_lstm(steps=2, projection=4, cell_clip=3.0, seed=5),
    # i ~ 1, f ~ 1, g ~ -1: the int16 cell state falls to -32768 by the fourth call, which the
    # kernel's cell clip (100 / 2^-11 clamped to 32767) makes -32767 (was a step off)
    "lstm_int8_cell_saturating": lambda: integer_lstm(
        steps=5, cell_clip=100.0, bias_offsets=(4.0, 6.0, -4.0, 0.0), seed=8
    ),
    "lstm_hybrid_bidirectional": lambda: hybrid_lstm(
        bidirectional=True, merge_outputs=False, seed=6
    ),
    "rnn_hybrid": lambda: hybrid_rnn(seed=7),
}
EXACT = {"svdf_int8", "lstm_int8", "lstm_int8_projection", "lstm_int8_cell_saturating"}


@pytest.fixture(scope="module")
def keras_float_lstm() -> bytes:
    from lstm_models import keras_lstm

    return keras_lstm(units=5, shape=(2, 3, 4))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_stream_of_calls_equals_interpreter_with_state_io(name: str) -> None:
    model, rows = stream(MODELS[name]())
    assert len(read_pairs(model)) >= 1
    assert_stream_agrees(rows, exact=name in EXACT)


def test_keras_float_lstm_and_rnn_streams_equal_interpreter(keras_float_lstm: bytes) -> None:
    from lstm_models import sequence_rnn

    for data in (keras_float_lstm, sequence_rnn(keras_float_lstm)):
        model, rows = stream(data)
        assert len(read_pairs(model)) == (2 if data is keras_float_lstm else 1)
        assert_stream_agrees(rows, exact=False)


def test_without_state_io_only_the_first_call_agrees_and_a_warning_says_so() -> None:
    """What the default graph computes (every run from the reset state), measured: call 1
    equal, the later calls not; one ConversionWarning names the state tensor."""
    data = int8_svdf(2, seed=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = tflite2qonnx.convert(data)
    messages = [str(w.message) for w in caught if issubclass(w.category, ConversionWarning)]
    assert len(messages) == 1, messages
    assert "stateful (variable tensors state carry over" in messages[0]
    assert "starts from their initial state on every run" in messages[0]
    assert [i.name for i in model.graph.input] == ["x"]
    it = reference_interpreter(data)
    (inp,), (out,) = it.get_input_details(), it.get_output_details()
    rng = np.random.default_rng(0)
    steps = []
    for _ in range(3):
        x = random_input(inp, rng)
        it.set_tensor(inp["index"], x)
        it.invoke()
        ref = real_value(it.get_tensor(out["index"]), _grid(out))
        ours = session(model)({"x": real_value(x, _grid(inp))})["y"]
        steps.append(_steps(ref, ours, _grid(out)))
    assert steps[0] == 0 and min(steps[1:]) > 0, steps


def test_state_io_warns_nothing_and_records_each_state_with_its_grid() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConversionWarning)
        model = tflite2qonnx.convert(integer_lstm(steps=2, seed=4), state_io=True)
    records = {r["tensor"]: r for r in read_pairs(model)}
    assert set(records) == {"h_state", "c_state"}
    h, c = records["h_state"], records["c_state"]
    assert (h["input"], h["output"], h["dtype"], h["zero_point"]) == (
        "h_state", "h_state_next", "int8", [-2],
    )  # fmt: skip
    assert (c["dtype"], c["zero_point"], c["shape"]) == ("int16", [0], [2, 8])
    tensors = {t.name: t for t in read_model(integer_lstm(steps=2, seed=4)).subgraphs[0].tensors}
    assert c["scale"] == [float(s) for s in tensors["c_state"].quantization.scale]
    graph_inputs = [i.name for i in model.graph.input]
    graph_outputs = [o.name for o in model.graph.output]
    assert graph_inputs[1:] == ["h_state", "c_state"]
    assert graph_outputs[1:] == ["h_state_next", "c_state_next"]
    meta = {p.key: p.value for p in model.metadata_props}
    io = json.loads(meta["tflite2qonnx.io_quantization"])
    assert io["h_state"]["zero_point"] == [-2]  # fed as real values, like the other inputs
    assert STATE_IO_KEY in meta


@pytest.mark.parametrize(
    "options",
    [{"bit_exact": True}, {"channels_last": True}, {"int_quant": True}],
    ids=["bit_exact", "channels_last", "int_quant"],
)
def test_state_io_streams_with_other_options(options: dict) -> None:
    """The states keep their TFLite layout and grid whatever the form of the graph."""
    for name in ("svdf_int8", "lstm_int8"):
        model, rows = stream(MODELS[name](), **options)
        if options.get("channels_last"):
            assert [r["shape"] for r in read_pairs(model)][0][0] == 2  # batch first, unchanged
        assert_stream_agrees(rows, exact=True)


def test_keyword_pattern_stream_has_exact_states_and_scores_within_a_step() -> None:
    """The keyword model's pattern with outputs that are not ties: the SVDF state is exact on
    every call; by default the int8 -> int16 SOFTMAX (gemmlowp's fixed-point kernel) rounds
    once, so the int32 scores are within a step (TFLite's XNNPACK path is as far off)."""
    _, rows = stream(keyword_like_svdf())
    off = []
    for row in rows:
        (_, ref, ours, grid), (_, state_ref, state_ours, state_grid) = row
        off.append(_steps(ref, ours, grid))
        assert _steps(state_ref, state_ours, state_grid) == 0
    assert max(off) <= 1 and off.count(0) >= len(off) // 2, off


def test_keyword_pattern_stream_is_exact_under_bit_exact() -> None:
    """--bit-exact emulates that SOFTMAX too: scores and states equal on every call."""
    _, rows = stream(keyword_like_svdf(), bit_exact=True)
    assert_stream_agrees(rows, exact=True)


@requires_corpus
@pytest.mark.parametrize(
    "path, options",
    [
        (KEYWORD, {}),
        (KEYWORD, {"bit_exact": True}),
        (DTLN, {}),
        (DTLN, {"bit_exact": True}),
        (CORAL_LSTM, {}),
    ],
    ids=["keyword", "keyword_bit_exact", "dtln_lstm", "dtln_lstm_bit_exact", "coral_lstm"],
)
def test_corpus_streaming_models_equal_interpreter_over_8_frames(path, options) -> None:
    """Coral's int8 LSTM (28 steps a call) drives its int16 cell state to -32768 by the
    second call, where the kernel's cell clip (10 / 2^-12, clamped to 32767) makes it -32767:
    the state was a step off there while the outputs agreed."""
    model, rows = stream(path.read_bytes(), **options)
    assert len(read_pairs(model)) == {KEYWORD: 7, DTLN: 4, CORAL_LSTM: 2}[path]
    assert_stream_agrees(rows, exact=True)


@requires_corpus
def test_cli_verify_with_state_io_runs_one_stream_in_qcdq_form(tmp_path) -> None:
    out = tmp_path / "keyword.onnx"
    result = run_module(
        "tflite2qonnx", KEYWORD, "-o", out, "--state-io", "--verify", "--format", "qcdq",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    text = result.stdout + result.stderr
    assert "one stream of 16 calls, state carried over" in text
    assert "FAILED" not in text and out.is_file()


def test_verify_with_state_io_runs_one_stream_of_at_least_8_calls_and_catches_a_stuck_state():
    """The interpreter is not reset between the calls, so a graph whose state output merely
    repeats its input (a state that never advances) fails the check."""
    from tflite2qonnx.reference import verify

    data = int8_svdf(2, seed=3)
    model = tflite2qonnx.convert(data, state_io=True)
    result = verify(data, model, inputs=2)
    assert result.passed and result.inputs == 8
    assert "one stream of 8 calls, state carried over" in result.runner
    (identity,) = [n for n in model.graph.node if list(n.output) == ["state_next"]]
    identity.input[0] = "state"
    assert not verify(data, model, inputs=2).passed
