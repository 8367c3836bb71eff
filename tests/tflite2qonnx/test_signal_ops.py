"""The signal ops (RFFT2D, COMPLEX_ABS, REAL, IMAG, complex MUL, CAST and RESHAPE) and the audio
custom ops (AudioSpectrogram, Mfcc) against the TFLite interpreter, alone and as an audio front
end before an int8 body (YAMNet's form), and the refusals that keep a complex tensor from being
read as a real one."""

from __future__ import annotations

import numpy as np
import pytest
from hand_built import edit_operator
from litert_compare import compare
from signal_models import (
    AUDIO_CASES,
    SIGNAL_CASES,
    audio_model,
    complex_constant_model,
    complex_output_model,
    conv_rfft_conv_model,
    fft_length_12_model,
    front_end_int8_body_model,
    log_mel_model,
    mfcc_above_nyquist_model,
    signal_model,
)
from test_tflite_ops import interpreter, op_names

import tflite2qonnx
from qonnx_ingest.errors import ConversionError
from support import assert_cli_fails
from tflite2qonnx.cli import main
from tflite2qonnx.reader import read_model

pytestmark = pytest.mark.keras


def _within_one_ulp(pairs) -> None:
    """Every element within one float32 ulp of the interpreter's, and >= 99% bit-equal: the
    kernel transforms in double and rounds once, as the converted graph does."""
    for p in pairs:
        assert p.ours.shape == p.reference.shape, p.name
        ulp = np.spacing(np.abs(p.reference).astype(np.float32))
        assert np.all(np.abs(p.ours - p.reference) <= ulp), p.name
    assert np.mean(np.concatenate([(p.ours == p.reference).ravel() for p in pairs])) >= 0.99


@pytest.mark.parametrize("name", list(SIGNAL_CASES))
def test_signal_op_matches_interpreter_to_one_ulp(name: str) -> None:
    data = signal_model(name)
    assert SIGNAL_CASES[name].ops <= op_names(data), "TF's converter emitted other ops"
    _within_one_ulp(compare(tflite2qonnx.convert(data), interpreter(data), n_inputs=4))


@pytest.mark.parametrize("name", list(AUDIO_CASES))
def test_audio_custom_op_matches_interpreter_to_one_ulp(name: str) -> None:
    """AudioSpectrogram and Mfcc compute in double and store float32, as the graph does."""
    data = audio_model(name)
    assert AUDIO_CASES[name].ops <= op_names(data), "TF's converter emitted other ops"
    _within_one_ulp(compare(tflite2qonnx.convert(data), interpreter(data), n_inputs=3))


def test_rfft_keeps_exact_zero_imaginary_parts_at_dc_and_nyquist() -> None:
    """sin(pi) is not 0 in floating point; the DFT matrices take quarter turns exactly."""
    data = signal_model("rfft_imag")
    (pair, *_) = compare(tflite2qonnx.convert(data), interpreter(data), n_inputs=1)
    assert np.all(pair.reference[:, [0, -1]] == 0)
    assert np.all(pair.ours[:, [0, -1]] == 0)


def test_complex_constants_are_split_into_pairs_and_match_interpreter() -> None:
    """A constant filter multiplied onto a spectrum, REAL / IMAG of a constant table."""
    data = complex_constant_model()
    _within_one_ulp(compare(tflite2qonnx.convert(data), interpreter(data), n_inputs=4))


def test_log_mel_front_end_matches_interpreter() -> None:
    """Framing (GATHER), Hann window, RFFT2D, COMPLEX_ABS, mel FULLY_CONNECTED, LOG: float
    within 1e-5 relative (the FC's sum order and LOG round differently in onnxruntime)."""
    data = log_mel_model()
    assert {"GATHER", "RFFT2D", "COMPLEX_ABS", "FULLY_CONNECTED", "LOG"} <= op_names(data)
    pairs = compare(tflite2qonnx.convert(data), interpreter(data), n_inputs=4)
    assert all(p.float_error_ok(1e-5) for p in pairs)


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels-last"])
def test_rfft2d_between_nhwc_convs_matches_interpreter(channels_last: bool) -> None:
    data = conv_rfft_conv_model()
    model = tflite2qonnx.convert(data, channels_last=channels_last)
    pairs = compare(model, interpreter(data), n_inputs=3)
    assert all(p.float_error_ok(1e-5) for p in pairs)


@pytest.fixture(scope="module")
def body_model() -> bytes:
    data = front_end_int8_body_model()
    # float RFFT2D / COMPLEX_ABS between int8 framing and an int8 body
    assert {"RFFT2D", "COMPLEX_ABS", "QUANTIZE", "DEQUANTIZE", "CONV_2D"} <= op_names(data)
    return data


@pytest.mark.parametrize(
    "options",
    [{}, {"format": "qcdq"}, {"channels_last": True}, {"bit_exact": True}],
    ids=["default", "qcdq", "channels-last", "bit-exact"],
)
def test_front_end_then_int8_body_matches_interpreter(body_model: bytes, options) -> None:
    """The softmax output (dequantized from int8): each element within one step of the output
    grid and >= 99% equal by default (XNNPACK's rule); equal everywhere under --bit-exact."""
    model = tflite2qonnx.convert(body_model, **options)
    n_inputs = 3 if options.get("channels_last") else 8  # qonnx's executor: node by node
    pairs = compare(model, interpreter(body_model), n_inputs=n_inputs)
    subgraph = read_model(body_model).subgraphs[0]
    (last,) = (op for op in subgraph.operators if op.outputs[0] == subgraph.outputs[0])
    assert last.name == "DEQUANTIZE"
    step = float(subgraph.tensors[last.inputs[0]].quantization.scale[0])
    errors = np.concatenate([np.abs(p.ours - p.reference).ravel() for p in pairs])
    if options.get("bit_exact"):
        assert errors.max() == 0
    else:
        assert errors.max() <= step * 1.001 and np.mean(errors == 0) >= 0.99


def test_complex_graph_output_is_refused_naming_the_tensor() -> None:
    with pytest.raises(ConversionError, match=r"complex64 tensor \d+ 'Identity' is a graph output"):
        tflite2qonnx.convert(complex_output_model())


def test_complex_operand_of_an_op_without_complex_support_is_refused_naming_it() -> None:
    """COMPLEX_ABS recoded as ABS: ABS's converter would read the [real, imag] pairs as reals."""
    data = edit_operator(signal_model("rfft2d_abs"), "COMPLEX_ABS", new_op="ABS")
    with pytest.raises(ConversionError, match=r"operator 1 \(ABS\).*complex64 tensor \d+ '.*'"):
        tflite2qonnx.convert(data)


def test_fft_length_not_a_power_of_two_is_refused_as_the_kernel_does() -> None:
    data = fft_length_12_model()
    with pytest.raises(RuntimeError, match="IsPowerOfTwo"):
        interpreter(data)
    with pytest.raises(ConversionError, match=r"fft_length \[1, 12\].*powers of two"):
        tflite2qonnx.convert(data)


def test_mfcc_band_above_nyquist_is_refused_where_the_kernel_returns_zeros() -> None:
    data = mfcc_above_nyquist_model()
    it = interpreter(data)
    it.set_tensor(it.get_input_details()[0]["index"], np.ones((1000, 1), np.float32))
    it.invoke()
    assert not it.get_tensor(it.get_output_details()[0]["index"]).any()
    with pytest.raises(ConversionError, match=r"\(Mfcc\).*upper_frequency_limit 9000"):
        tflite2qonnx.convert(data)


def test_cli_refuses_complex_output_in_one_line_without_writing(tmp_path, capsys) -> None:
    source = tmp_path / "rfft2d.tflite"
    source.write_bytes(complex_output_model())
    argv = [source, "-o", tmp_path / "out.onnx"]
    assert_cli_fails(capsys, main, "tflite2qonnx", argv, 1, "complex64 tensor", "'Identity'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rfft2d.tflite"]


def test_cli_verify_passes_on_front_end_with_int8_body(tmp_path, body_model: bytes) -> None:
    source = tmp_path / "audio.tflite"
    source.write_bytes(body_model)
    assert main([str(source), "-o", str(tmp_path / "audio.onnx"), "--verify", "-q"]) == 0
    assert (tmp_path / "audio.onnx").exists()
