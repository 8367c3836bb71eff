"""TFLite's audio custom ops, AudioSpectrogram and Mfcc (registered in the builtin op resolver;
TF's converter writes them for ``tf.raw_ops.AudioSpectrogram`` / ``Mfcc`` with custom ops
allowed, as in TF's speech-commands models).

Both kernels compute in double and store float32, so the graph does too: framing (Gather),
the periodic Hann window and the DFT (``signal.dft``) in double, the squared magnitude cast
once to float (AudioSpectrogram's sqrt is then float, as the kernel's); Mfcc's filterbank,
log floor and DCT are double matrices built as TF's MfccMelFilterbank and MfccDct build them.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.common import one_int, table_size
from tflite2qonnx.ops.detection.mediapipe_transform import _number, _options
from tflite2qonnx.ops.signal.complex_ops import dft

_FILTERBANK_FLOOR = 1e-12  # Mfcc's floor before the log


def _static(b: GraphBuilder, idx: int, rank: int, op: Operator) -> tuple[int, ...]:
    t = b.tensor(idx)
    shape = tuple(int(d) for d in t.shape_signature)
    if t.dtype != "float32" or len(shape) != rank or min(shape, default=1) < 1:
        raise ConversionError(
            f"{op.name} needs a static float32 input of rank {rank}, got {t.dtype} "
            f"{list(shape)} (tensor {idx} '{t.name}')",
            op.where,
        )
    return shape


def audio_spectrogram(b: GraphBuilder, op: Operator) -> None:
    """[samples, channels] -> [channels, frames, fft_length / 2 + 1]: frames of
    ``window_size`` every ``stride`` samples, periodic Hann window, zero-padded to the next
    power of two; squared magnitude, or its float sqrt unless ``magnitude_squared``."""
    opts = _options(op, required=True)
    window, stride = int(_number(opts, "window_size", op)), int(_number(opts, "stride", op))
    samples, _channels = _static(b, op.inputs[0], 2, op)
    if window < 2 or stride < 1 or window > samples:
        raise ConversionError(
            f"window_size {window} / stride {stride} on {samples} samples: the kernel needs "
            "window_size >= 2, stride >= 1 and one full window",
            op.where,
        )
    length = 1 << (window - 1).bit_length()
    frames = 1 + (samples - window) // stride
    table_size(frames * window + 2 * window * length, "AudioSpectrogram's tables", op.where)
    starts = np.arange(frames, dtype=np.int64)[:, None] * stride
    indices = b.const(starts + np.arange(window, dtype=np.int64)[None, :], "frame_indices")
    x = b.emit("Transpose", [b.input(op.inputs[0])], perm=[1, 0])[0]  # [channels, samples]
    framed = b.emit("Gather", [x, indices], axis=1)[0]  # [channels, frames, window]
    framed = b.emit("Cast", [framed], to=TensorProto.DOUBLE)[0]
    hann = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(window) / window)
    framed = b.emit("Mul", [framed, b.const(hann, "hann_window")])[0]
    cos, sin = dft(length, window, length // 2 + 1, 1.0)
    parts = [b.emit("MatMul", [framed, b.const(m, "spectrogram_dft")])[0] for m in (cos, sin)]
    squares = [b.emit("Mul", [p, p])[0] for p in parts]
    power = b.emit("Cast", [b.emit("Add", squares)[0]], to=TensorProto.FLOAT)[0]
    if not opts.get("magnitude_squared", False):
        power = b.emit("Sqrt", [power])[0]
    b.set_output(op.outputs[0], power)


def _mel(freq: np.ndarray | float) -> np.ndarray:
    return 1127.0 * np.log1p(np.asarray(freq, np.float64) / 700.0)


def _filterbank(bins: int, rate: float, channels: int, low: float, high: float, where: str):
    """[bins, channels]: triangular mel bands on the magnitudes, each bin split between the
    channel below it (``weight``) and the one above (1 - weight), as MfccMelFilterbank."""
    mel_low = _mel(low)
    spacing = (_mel(high) - mel_low) / (channels + 1)
    centers = mel_low + spacing * np.arange(1, channels + 2)
    hz_per_bin = 0.5 * rate / (bins - 1)
    start, end = int(1.5 + low / hz_per_bin), int(high / hz_per_bin)
    if end >= bins:
        raise ConversionError(
            f"upper_frequency_limit {high} is above the spectrum's top frequency "
            f"{hz_per_bin * (bins - 1)}",
            where,
        )
    matrix = np.zeros((bins, channels))
    channel = 0
    for i in range(start, end + 1):
        melf = float(_mel(i * hz_per_bin))
        while channel < channels and centers[channel] < melf:
            channel += 1
        band = channel - 1
        if band >= 0:
            weight = (centers[band + 1] - melf) / (centers[band + 1] - centers[band])
            matrix[i, band] += weight
        else:
            weight = (centers[0] - melf) / (centers[0] - mel_low)
        if band + 1 < channels:
            matrix[i, band + 1] += 1.0 - weight
    return matrix


def mfcc(b: GraphBuilder, op: Operator) -> None:
    """[channels, frames, bins] squared magnitudes -> [channels, frames, dct_coefficient_count]:
    sqrt, mel filterbank, log(max(., 1e-12)), DCT-II scaled by sqrt(2 / channels)."""
    opts = _options(op, required=True)
    low = _number(opts, "lower_frequency_limit", op)
    high = _number(opts, "upper_frequency_limit", op)
    channels = int(_number(opts, "filterbank_channel_count", op))
    coefficients = int(_number(opts, "dct_coefficient_count", op))
    bins = _static(b, op.inputs[0], 3, op)[2]
    rate = one_int(b, op.inputs[1], "sample_rate", op.where)
    if not (rate > 0 and bins > 1 and 0 <= low < high and 1 <= coefficients <= channels <= 4096):
        raise ConversionError(
            f"Mfcc options {opts} on {bins} bins at {rate} Hz: the kernel needs a positive "
            "rate, 0 <= lower < upper limit and 1 <= dct_coefficient_count <= channels",
            op.where,
        )
    table_size((bins + coefficients) * channels, "Mfcc's filterbank and DCT", op.where)
    bank = _filterbank(bins, float(rate), channels, low, high, op.where)
    arg = math.pi / channels
    j = np.arange(channels)[:, None] + 0.5
    dct = math.sqrt(2.0 / channels) * np.cos(np.arange(coefficients)[None, :] * arg * j)
    x = b.emit("Cast", [b.input(op.inputs[0])], to=TensorProto.DOUBLE)[0]
    energy = b.emit("MatMul", [b.emit("Sqrt", [x])[0], b.const(bank, "mel_filterbank")])[0]
    floor = b.const(np.array(_FILTERBANK_FLOOR), "filterbank_floor")
    logs = b.emit("Log", [b.emit("Max", [energy, floor])[0]])[0]
    y = b.emit("MatMul", [logs, b.const(dct, "mfcc_dct")])[0]
    b.set_output(op.outputs[0], b.emit("Cast", [y], to=TensorProto.FLOAT)[0])
