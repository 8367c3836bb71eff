"""tf.signal models generated with TF's converter, each built once per session.

TF's converter lowers ``tf.signal.rfft`` to RESHAPE -> RFFT2D -> RESHAPE (TFLite has no 1-D
RFFT), ``stft`` / ``frame`` to GATHER and a window MUL, ``tf.abs`` of a complex tensor to
COMPLEX_ABS and ``tf.math.real`` / ``imag`` to REAL / IMAG; a complex product is MUL on
complex64. RFFT2D takes power-of-two fft lengths only (the kernel refuses others).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from tf_models import _tf
from tflite_writer import build_model


@dataclass(frozen=True)
class SignalCase:
    """A float model: its function, input shape (None: dynamic) and the ops TF must emit."""

    fn: Callable  # (tf, x) -> output
    shape: tuple[int | None, ...]
    ops: frozenset[str]


def _case(fn, shape, *ops: str) -> SignalCase:
    return SignalCase(fn, shape, frozenset(ops))


SIGNAL_CASES: dict[str, SignalCase] = {
    "rfft_abs": _case(
        lambda tf, x: tf.abs(tf.signal.rfft(x)), (2, 32), "RFFT2D", "COMPLEX_ABS", "RESHAPE"
    ),
    "rfft_real": _case(lambda tf, x: tf.math.real(tf.signal.rfft(x)), (2, 32), "RFFT2D", "REAL"),
    "rfft_imag": _case(lambda tf, x: tf.math.imag(tf.signal.rfft(x)), (2, 32), "RFFT2D", "IMAG"),
    # fft_length beyond the input: TF pads (PAD), the kernel transforms 64 points
    "rfft_padded": _case(
        lambda tf, x: tf.abs(tf.signal.rfft(x, fft_length=[64])), (3, 40), "RFFT2D", "PAD"
    ),
    "rfft_dynamic_batch": _case(
        lambda tf, x: tf.math.imag(tf.signal.rfft(x)), (None, 16), "RFFT2D", "IMAG"
    ),
    "rfft2d_abs": _case(
        lambda tf, x: tf.abs(tf.signal.rfft2d(x)), (2, 8, 16), "RFFT2D", "COMPLEX_ABS"
    ),
    "rfft2d_real": _case(lambda tf, x: tf.math.real(tf.signal.rfft2d(x)), (2, 8, 16), "REAL"),
    "rfft2d_imag": _case(lambda tf, x: tf.math.imag(tf.signal.rfft2d(x)), (2, 8, 16), "IMAG"),
    # fft_length shorter than the input: the kernel crops it (no op of TF's does)
    "rfft2d_cropped": _case(
        lambda tf, x: tf.math.imag(tf.signal.rfft2d(x, fft_length=[4, 8])), (2, 8, 16), "RFFT2D"
    ),
    "rfft2d_padded": _case(
        lambda tf, x: tf.math.real(tf.signal.rfft2d(x, fft_length=[16, 32])), (2, 5, 12), "RFFT2D"
    ),
    "complex_mul": _case(
        lambda tf, x: tf.math.imag(tf.signal.rfft(x) * tf.signal.rfft(x * x)), (2, 32), "MUL"
    ),
    "cast_to_float": _case(
        lambda tf, x: tf.cast(tf.signal.rfft(x), tf.float32), (2, 32), "RFFT2D", "CAST"
    ),
    "cast_from_float": _case(
        lambda tf, v: tf.math.imag(tf.signal.rfft(v) * tf.cast(v[:, :17], tf.complex64)),
        (2, 32),
        "CAST",
        "MUL",
    ),
    "magnitude_by_parts": _case(
        lambda tf, x: tf.sqrt(
            tf.math.real(tf.signal.rfft(x)) ** 2 + tf.math.imag(tf.signal.rfft(x)) ** 2
        ),
        (2, 32),
        "REAL",
        "IMAG",
        "SQRT",
    ),
}


def _spectrogram(tf, x, window: int, stride: int, squared: bool):
    return tf.raw_ops.AudioSpectrogram(
        input=x, window_size=window, stride=stride, magnitude_squared=squared
    )


def _mfcc(tf, x, window: int, stride: int, high: float, channels: int, coefficients: int):
    return tf.raw_ops.Mfcc(
        spectrogram=_spectrogram(tf, x, window, stride, True),
        sample_rate=16000,
        upper_frequency_limit=high,
        lower_frequency_limit=20.0,
        filterbank_channel_count=channels,
        dct_coefficient_count=coefficients,
    )


# TFLite's audio custom ops (in the builtin resolver), written with custom ops allowed
AUDIO_CASES: dict[str, SignalCase] = {
    "spectrogram_magnitude": _case(
        lambda tf, x: _spectrogram(tf, x, 100, 50, False), (1000, 1), "AudioSpectrogram"
    ),
    # two channels; a window that is no power of two, zero-padded to 64
    "spectrogram_squared_two_channels": _case(
        lambda tf, x: _spectrogram(tf, x, 60, 30, True), (700, 2), "AudioSpectrogram"
    ),
    "mfcc": _case(lambda tf, x: _mfcc(tf, x, 100, 50, 4000.0, 20, 13), (1000, 1), "Mfcc"),
    # TF's speech-commands front end: 30 ms windows, 10 ms stride, 40 bands, 40 coefficients
    "mfcc_speech_commands": _case(
        lambda tf, x: _mfcc(tf, x, 480, 160, 7600.0, 40, 40), (16000, 1), "Mfcc"
    ),
}


def _log_mel(tf, x, mel):
    """|STFT| (128-sample Hann frames, hop 64) -> mel matrix -> log, as YAMNet's front end."""
    spectrum = tf.abs(tf.signal.stft(x, 128, 64, 128))
    return tf.math.log(tf.matmul(spectrum, mel) + 1e-3)


@functools.cache
def _mel(tf):
    return tf.signal.linear_to_mel_weight_matrix(16, 65, 8000, 50.0, 3000.0)


def _convert(tf, fn, shape, representative=None, custom: bool = False) -> bytes:
    function = tf.function(fn, input_signature=[tf.TensorSpec(shape, tf.float32)])
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [function.get_concrete_function()], function
    )
    converter.allow_custom_ops = custom
    if representative is not None:  # int8 where TFLite has int8 kernels, float elsewhere
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative
    return converter.convert()


@functools.cache
def signal_model(name: str) -> bytes:
    tf, case = _tf(), SIGNAL_CASES[name]
    return _convert(tf, lambda x: case.fn(tf, x), case.shape)


@functools.cache
def audio_model(name: str) -> bytes:
    tf, case = _tf(), AUDIO_CASES[name]
    return _convert(tf, lambda x: case.fn(tf, x), case.shape, custom=True)


@functools.cache
def log_mel_model() -> bytes:
    """The float front end alone: SLICE/GATHER framing, window MUL, RFFT2D, COMPLEX_ABS,
    FULLY_CONNECTED (mel), ADD, LOG."""
    tf = _tf()
    mel = _mel(tf)
    return _convert(tf, lambda x: _log_mel(tf, x, mel), (1, 1024))


@functools.cache
def front_end_int8_body_model() -> bytes:
    """The front end, then a conv / mean / dense / softmax body, quantized with a seeded
    representative set: TF keeps RFFT2D and COMPLEX_ABS float between a DEQUANTIZE and a
    QUANTIZE (no int8 kernels) and makes the rest int8."""
    tf = _tf()
    rng = np.random.default_rng(3)
    mel = _mel(tf)
    conv = tf.constant(rng.normal(0, 0.3, (3, 3, 1, 4)).astype(np.float32))
    dense = tf.constant(rng.normal(0, 0.3, (4, 5)).astype(np.float32))

    def model(x):
        features = _log_mel(tf, x, mel)[..., None]
        h = tf.nn.relu(tf.nn.conv2d(features, conv, 1, "SAME"))
        return tf.nn.softmax(tf.matmul(tf.reduce_mean(h, [1, 2]), dense))

    def representative():
        r = np.random.default_rng(0)
        for _ in range(32):
            yield [r.uniform(-1, 1, (1, 1024)).astype(np.float32)]

    return _convert(tf, model, (1, 1024), representative)


@functools.cache
def conv_rfft_conv_model() -> bytes:
    """RFFT2D over the last two axes (W, C) of an NHWC conv output, its magnitude into another
    conv: the layout pass moves the convs to NCHW around the DFT's MatMuls."""
    tf = _tf()
    rng = np.random.default_rng(5)
    w1 = tf.constant(rng.normal(0, 0.3, (3, 3, 2, 4)).astype(np.float32))
    w2 = tf.constant(rng.normal(0, 0.3, (3, 3, 3, 2)).astype(np.float32))

    def model(x):
        spectrum = tf.abs(tf.signal.rfft2d(tf.nn.conv2d(x, w1, 1, "SAME")))  # [1, 8, 16, 3]
        return tf.nn.conv2d(spectrum, w2, 1, "SAME")

    return _convert(tf, model, (1, 8, 16, 2))


@functools.cache
def complex_output_model() -> bytes:
    """RFFT2D's complex64 result is the graph output."""
    tf = _tf()
    return _convert(tf, lambda x: tf.signal.rfft2d(x), (2, 8, 16))


@functools.cache
def fft_length_12_model() -> bytes:
    """fft_length 12: TF's converter writes it, TFLite's kernel refuses it (not a power of 2)."""
    tf = _tf()
    return _convert(tf, lambda x: tf.abs(tf.signal.rfft(x, fft_length=[12])), (2, 16))


def complex_constant_model() -> bytes:
    """Complex64 constants (TF's converter folds them away, so written by hand): x [1, 16] ->
    RFFT2D -> MUL by a constant -> COMPLEX_ABS, and REAL / IMAG of a constant added to x."""
    rng = np.random.default_rng(11)
    pairs = rng.uniform(-1, 1, (2, 1, 9)).astype(np.float32)
    filt = (pairs[0] + 1j * pairs[1]).astype(np.complex64)
    table = (rng.uniform(-1, 1, (1, 16)) + 1j * rng.uniform(-1, 1, (1, 16))).astype(np.complex64)
    tensors = [
        {"name": "x", "shape": (1, 16)},
        {
            "name": "fft_length",
            "shape": (2,),
            "dtype": "int32",
            "data": np.array([1, 16], np.int32),
        },
        {"name": "spectrum", "shape": (1, 9), "dtype": "complex64"},
        {"name": "filter", "shape": (1, 9), "dtype": "complex64", "data": filt},
        {"name": "filtered", "shape": (1, 9), "dtype": "complex64"},
        {"name": "magnitude", "shape": (1, 9)},
        {"name": "table", "shape": (1, 16), "dtype": "complex64", "data": table},
        {"name": "table_real", "shape": (1, 16)},
        {"name": "table_imag", "shape": (1, 16)},
        {"name": "shifted", "shape": (1, 16)},
        {"name": "both", "shape": (1, 16)},
    ]
    operators = [
        {"op": "RFFT2D", "inputs": [0, 1], "outputs": [2]},
        {"op": "MUL", "inputs": [2, 3], "outputs": [4]},
        {"op": "COMPLEX_ABS", "inputs": [4], "outputs": [5]},
        {"op": "REAL", "inputs": [6], "outputs": [7]},
        {"op": "IMAG", "inputs": [6], "outputs": [8]},
        {"op": "ADD", "inputs": [0, 7], "outputs": [9]},
        {"op": "MUL", "inputs": [9, 8], "outputs": [10]},
    ]
    return build_model(tensors, operators, [0], [5, 10])


@functools.cache
def mfcc_above_nyquist_model() -> bytes:
    """upper_frequency_limit 9000 Hz at 16 kHz: TF's filterbank refuses the spectrum as too
    short and the interpreter returns zeros."""
    tf = _tf()
    return _convert(tf, lambda x: _mfcc(tf, x, 100, 50, 9000.0, 20, 13), (1000, 1), custom=True)
