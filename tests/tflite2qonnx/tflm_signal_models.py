"""Single-op and chained models of TFLite Micro's Signal custom ops (the micro_speech audio
front end), written with tflite_writer; options are flexbuffer maps as TFLM's Python API
writes them."""

from __future__ import annotations

import numpy as np
from hand_built import flex_options
from tflite_writer import build_model

INT16 = 7  # tflite.TensorType.INT16, SignalRfft's 'T'
FLOAT32 = 0


def _t(name: str, shape, dtype: str, data=None) -> dict:
    t = {"name": name, "shape": tuple(shape), "dtype": dtype}
    if data is not None:
        t["data"] = np.asarray(data)
    return t


def _one(code: str, tensors: list[dict], n_in: int, options: dict) -> bytes:
    """One op: the first ``n_in`` tensors without data are graph inputs, the rest outputs."""
    ins = list(range(n_in))
    outs = list(range(n_in, len(tensors)))
    op = {"op": code, "inputs": ins, "outputs": outs, "custom_options": flex_options(**options)}
    graph_inputs = [i for i in ins if "data" not in tensors[i]]
    return build_model(tensors, [op], graph_inputs, outs)


def window(shape, weights: np.ndarray, shift: int) -> bytes:
    tensors = [_t("x", shape, "int16"), _t("w", weights.shape, "int16", weights.astype(np.int16)),
               _t("y", shape, "int16")]  # fmt: skip
    return _one("SignalWindow", tensors, 2, {"shift": shift})


def fft_auto_scale(n: int) -> bytes:
    tensors = [_t("x", (n,), "int16"), _t("y", (n,), "int16"), _t("scale", (), "int32")]
    return _one("SignalFftAutoScale", tensors, 1, {})


def rfft(shape, fft_length: int, kind: int = INT16) -> bytes:
    dtype = "float32" if kind == FLOAT32 else "int16"
    out = (*shape[:-1], fft_length + 2)
    tensors = [_t("x", shape, dtype), _t("y", out, dtype)]
    return _one("SignalRfft", tensors, 1, {"T": kind, "fft_length": fft_length})


def energy(bins: int, start: int, end: int) -> bytes:
    tensors = [_t("x", (2 * bins,), "int16"), _t("y", (bins,), "uint32")]
    return _one("SignalEnergy", tensors, 1, {"end_index": end, "start_index": start})


def filter_bank_constants(rng, bins: int, channels: int, low: int, high: int):
    """Overlapping triangular-ish bands in [low, high): weights and unweights in [0, 4096]
    (TFLM's 12-bit weights), one (frequency start, weight start, width) per channel + 1."""
    edges = np.linspace(low, high, channels + 2).astype(int)
    starts, widths = edges[:-1], np.diff(edges)
    wstarts = np.concatenate([[0], np.cumsum(widths)[:-1]])
    w = rng.integers(0, 4097, int(widths.sum()))
    return w, 4096 - w, starts, wstarts, widths


def _bank_tensors(consts) -> list[dict]:
    names = ("weights", "unweights", "freq_starts", "weight_starts", "widths")
    return [
        _t(n, (len(c),), "int16", np.asarray(c, np.int16))
        for n, c in zip(names, consts, strict=True)
    ]


def filter_bank(bins: int, consts) -> bytes:
    channels = len(consts[2]) - 1
    tensors = [_t("x", (bins,), "uint32"), *_bank_tensors(consts),
               _t("y", (channels,), "uint64")]  # fmt: skip
    return _one("SignalFilterBank", tensors, 6, {"num_channels": channels})


def filter_bank_square_root(n: int) -> bytes:
    tensors = [_t("x", (n,), "uint64"), _t("scale", (), "int32"), _t("y", (n,), "uint32")]
    return _one("SignalFilterBankSquareRoot", tensors, 2, {})


SPECTRAL_SUBTRACTION = {  # micro_speech's options
    "alternate_one_minus_smoothing": 15401,
    "alternate_smoothing": 983,
    "min_signal_remaining": 819,
    "one_minus_smoothing": 15975,
    "smoothing": 409,
    "smoothing_bits": 10,
    "spectral_subtraction_bits": 14,
}


def spectral_subtraction(n: int, clamping: bool) -> bytes:
    tensors = [_t("x", (n,), "uint32"), _t("y", (n,), "uint32"), _t("noise", (n,), "uint32")]
    opts = {**SPECTRAL_SUBTRACTION, "clamping": clamping, "num_channels": n}
    return _one("SignalFilterBankSpectralSubtraction", tensors, 1, opts)


def pcan_lut(rng) -> np.ndarray:
    """A positive 125-entry gain table (three coefficients per interval)."""
    return rng.integers(1000, 4000, 125).astype(np.int16)


def pcan(n: int, lut: np.ndarray, snr_shift: int) -> bytes:
    tensors = [_t("x", (n,), "uint32"), _t("noise", (n,), "uint32"),
               _t("lut", lut.shape, "int16", lut), _t("y", (n,), "uint32")]  # fmt: skip
    return _one("SignalPCAN", tensors, 3, {"snr_shift": snr_shift})


def filter_bank_log(n: int, correction: int, scale: int) -> bytes:
    tensors = [_t("x", (n,), "uint32"), _t("y", (n,), "int16")]
    return _one("SignalFilterBankLog", tensors, 1,
                {"input_correction_bits": correction, "output_scale": scale})  # fmt: skip


def front_end(rng, frame: int = 480, fft_length: int = 512, channels: int = 40) -> bytes:
    """The micro_speech preprocessor's Signal chain on one frame: Window, FftAutoScale,
    Rfft, Energy, FilterBank (bands inside Energy's range), SquareRoot by the auto-scale
    shift, SpectralSubtraction (stateful), PCAN, FilterBankLog."""
    bins = fft_length // 2 + 1
    window_w = np.round(4096 * np.hanning(frame)).astype(np.int16)
    consts = filter_bank_constants(rng, bins, channels, 5, 241)
    c = channels
    tensors = [
        _t("audio", (frame,), "int16"),  # 0
        _t("window", (frame,), "int16", window_w),  # 1
        _t("windowed", (frame,), "int16"),  # 2
        _t("scaled", (frame,), "int16"),  # 3
        _t("shift", (), "int32"),  # 4
        _t("spectrum", (fft_length + 2,), "int16"),  # 5
        _t("energy", (bins,), "uint32"),  # 6
        *_bank_tensors(consts),  # 7..11
        _t("bank", (c,), "uint64"),  # 12
        _t("root", (c,), "uint32"),  # 13
        _t("subtracted", (c,), "uint32"),  # 14
        _t("noise", (c,), "uint32"),  # 15
        _t("lut", (125,), "int16", pcan_lut(rng)),  # 16
        _t("pcan", (c,), "uint32"),  # 17
        _t("log", (c,), "int16"),  # 18
    ]

    def op(code, ins, outs, **opts):
        return {"op": code, "inputs": ins, "outputs": outs, "custom_options": flex_options(**opts)}

    ops = [
        op("SignalWindow", [0, 1], [2], shift=12),
        op("SignalFftAutoScale", [2], [3, 4]),
        op("SignalRfft", [3], [5], T=INT16, fft_length=fft_length),
        op("SignalEnergy", [5], [6], end_index=241, start_index=5),
        op("SignalFilterBank", [6, 7, 8, 9, 10, 11], [12], num_channels=c),
        op("SignalFilterBankSquareRoot", [12, 4], [13]),
        op(
            "SignalFilterBankSpectralSubtraction",
            [13],
            [14, 15],
            clamping=False,
            num_channels=c,
            **{k: v for k, v in SPECTRAL_SUBTRACTION.items()},
        ),  # fmt: skip
        op("SignalPCAN", [14, 15, 16], [17], snr_shift=6),
        op("SignalFilterBankLog", [17], [18], input_correction_bits=3, output_scale=64),
    ]
    return build_model(tensors, ops, [0], [18])


def delay(shape, length: int) -> bytes:
    tensors = [_t("x", shape, "int16"), _t("y", shape, "int16")]
    return _one("SignalDelay", tensors, 1, {"delay_length": length})


def framer(shape, size: int, step: int, prefill: bool) -> bytes:
    out = (*shape[:-1], shape[-1] // step, size)
    tensors = [_t("x", shape, "int16"), _t("frames", out, "int16"), _t("valid", (), "bool")]
    return _one("SignalFramer", tensors, 1,
                {"frame_size": size, "frame_step": step, "prefill": prefill})  # fmt: skip


def stacker(channels: int, left: int, right: int, step: int) -> bytes:
    out = channels * (left + right + 1)
    tensors = [_t("x", (channels,), "int16"), _t("stacked", (out,), "int16"),
               _t("valid", (), "bool")]  # fmt: skip
    opts = {"num_channels": channels, "stacker_left_context": left,
            "stacker_right_context": right, "stacker_step": step}  # fmt: skip
    return _one("SignalStacker", tensors, 1, opts)


def overlap_add(shape, step: int, dtype: str) -> bytes:
    out = (*shape[:-2], shape[-2] * step)
    tensors = [_t("x", shape, dtype), _t("y", out, dtype)]
    kind = INT16 if dtype == "int16" else FLOAT32
    return _one("SignalOverlapAdd", tensors, 1, {"T": kind, "frame_step": step})


def irfft(shape, fft_length: int, kind: int = INT16) -> bytes:
    dtype = "int16" if kind == INT16 else "float32"
    tensors = [_t("x", shape, dtype), _t("y", (*shape[:-1], fft_length), dtype)]
    return _one("SignalIrfft", tensors, 1, {"T": kind, "fft_length": fft_length})


def fft_int32(code: str, fft_length: int) -> bytes:
    """SignalRfft / SignalIrfft on int32 (T = 2)."""
    n_in, n_out = (fft_length, fft_length + 2) if code == "SignalRfft" else (
        fft_length + 2, fft_length)  # fmt: skip
    tensors = [_t("x", (n_in,), "int32"), _t("y", (n_out,), "int32")]
    return _one(code, tensors, 1, {"T": 2, "fft_length": fft_length})


def examples() -> list[bytes]:
    """One model holding each Signal op (the registry test's list of exercised ops)."""
    rng = np.random.default_rng(0)
    return [
        front_end(rng),
        delay((1, 8), 2),
        framer((1, 8), 4, 2, False),
        stacker(2, 1, 1, 1),
        overlap_add((1, 2, 4), 2, "int16"),
        irfft((10,), 8),
    ]
