"""TFLite Micro's Signal ops converted bit exact: every case runs the same seeded inputs
through TFLM's own interpreter (PyPI tflite-micro, whose op resolver registers the Signal
ops) and through onnxruntime on the converted graph, and asserts equal integers."""

from __future__ import annotations

import warnings

import numpy as np
import onnxruntime as ort
import pytest
import tflm_signal_models as models

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.api import convert
from tflite2qonnx.state import initial_state, read_pairs

runtime = pytest.importorskip(
    "tflite_micro.python.tflite_micro.runtime",
    reason="tflite-micro (TFLM's Python interpreter, the reference) is not installed",
)


class Pair:
    """A model in TFLM and converted: ``run`` feeds both one call's inputs."""

    def __init__(self, data: bytes, state_io: bool = False) -> None:
        self.tflm = runtime.Interpreter.from_bytes(data, arena_size=1 << 20)
        with warnings.catch_warnings(record=True) as self.warnings:
            warnings.simplefilter("always")
            model = convert(data, state_io=state_io)
        self.pairs = read_pairs(model)
        self.sess = ort.InferenceSession(model.SerializeToString())
        self.inputs = [i.name for i in self.sess.get_inputs()]
        self.outputs = [o.name for o in self.sess.get_outputs()]
        self.states = {p["input"]: initial_state(p) for p in self.pairs}

    def run(self, *xs: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
        for k, x in enumerate(xs):
            self.tflm.set_input(x, k)
        self.tflm.invoke()
        n_out = len(self.outputs) - len(self.pairs)
        ref = [self.tflm.get_output(k) for k in range(n_out)]
        feed = dict(zip(self.inputs, xs, strict=False)) | self.states
        got = self.sess.run(None, feed)
        for p in self.pairs:
            self.states[p["input"]] = got[self.outputs.index(p["output"])]
        return ref, got[:n_out]


def assert_same(ref: np.ndarray, got: np.ndarray) -> None:
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_array_equal(got, ref)


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(20261128)


def _int16(rng, shape, amp=32768) -> np.ndarray:
    return rng.integers(-amp, amp, shape).astype(np.int16)


@pytest.mark.parametrize("shift", [12, 0])
def test_window_saturates_shifted_products_like_tflm(rng, shift):
    weights = _int16(rng, 64)
    pair = Pair(models.window((2, 64), weights, shift))
    for amp in (100, 32768):
        assert_same(*(v[0] for v in pair.run(_int16(rng, (2, 64), amp))))


def _auto_scale_inputs(rng) -> list[np.ndarray]:
    """Ordinary frames, silence, full scale and MaxAbs16's INT16_MIN cases: the running
    maximum goes negative after an INT16_MIN and follows an increasing negative run."""
    xs = [_int16(rng, 48, a) for a in (1, 7, 300, 20000)]
    xs += [np.zeros(48, np.int16), np.full(48, 32767, np.int16)]
    for tail in ([], [5], [-5, -3, -1], [-5, -6], [0, 2], [-3, 4, -100], [-7, -2, 9000]):
        x = _int16(rng, 48, 50)
        x[len(x) - len(tail) - 1] = -32768
        x[len(x) - len(tail) :] = tail
        xs.append(x)
    return xs


def test_fft_auto_scale_matches_tflm_including_int16_min(rng):
    pair = Pair(models.fft_auto_scale(48))
    for x in _auto_scale_inputs(rng):
        ref, got = pair.run(x)
        assert_same(ref[0], got[0])
        assert int(got[1]) == int(ref[1])


@pytest.mark.parametrize(
    ("shape", "fft_length"),
    [((480,), 512), ((2, 256), 256), ((5,), 8)],
    ids=["micro_speech_radix4", "batched_radix2_stage", "tiny"],
)
def test_rfft_int16_is_kissfft_fixed_point_bit_exact(rng, shape, fft_length):
    pair = Pair(models.rfft(shape, fft_length))
    for amp in (50, 3000, 32768):  # full scale wraps int16 inside the butterflies
        ref, got = pair.run(_int16(rng, shape, amp))
        assert_same(ref[0], got[0])


def test_energy_sums_squares_in_range_like_tflm(rng):
    start, end = 3, 200
    pair = Pair(models.energy(257, start, end))
    x = _int16(rng, 514)
    x[10:14] = -32768  # 2 * 2^30: the int32 sum wraps, the uint32 store does not lose it
    ref, got = pair.run(x)
    assert_same(ref[0][start:end], got[0][start:end])  # TFLM leaves the rest unwritten
    assert not got[0][:start].any() and not got[0][end:].any()


@pytest.mark.parametrize("negative", [False, True], ids=["weights", "negative_weights"])
def test_filter_bank_accumulates_uint64_channels_like_tflm(rng, negative):
    w, u, *bands = models.filter_bank_constants(rng, 257, 40, 5, 241)
    if negative:  # int16 weights times uint64 inputs: the sums wrap modulo 2^64
        w, u = w - 3000, -u
    pair = Pair(models.filter_bank(257, (w, u, *bands)))
    for high in (1 << 16, 1 << 32):
        x = rng.integers(0, high, 257, dtype=np.uint64).astype(np.uint32)
        assert_same(*(v[0] for v in pair.run(x)))


def test_filter_bank_square_root_rounds_and_caps_like_tflm(rng):
    roots = rng.integers(0, 1 << 32, 20, dtype=np.uint64)
    near = np.concatenate([roots * roots, roots * roots + roots, roots * roots + roots + 1])
    edges = np.array([0, 1, 2, 3, 0xFFFF * 0xFFFF + 0xFFFF + 1, (1 << 32) - 1, 1 << 32,
                      (1 << 64) - 1, ((1 << 32) - 1) ** 2 + (1 << 32) - 1], np.uint64)  # fmt: skip
    spread = (rng.random(40) * 2.0**64).astype(np.uint64) >> rng.integers(0, 64, 40).astype(
        np.uint64
    )
    x = np.concatenate([near, edges, spread])
    pair = Pair(models.filter_bank_square_root(len(x)))
    for shift in (0, 3, 15):
        ref, got = pair.run(x, np.array(shift, np.int32))
        assert_same(ref[0], got[0])


@pytest.mark.parametrize("clamping", [False, True])
def test_spectral_subtraction_streams_its_noise_estimate_under_state_io(rng, clamping):
    pair = Pair(models.spectral_subtraction(40, clamping), state_io=True)
    assert [p["kind"] for p in pair.pairs] == ["kernel_state"]
    for step in range(12):
        high = 1 << (8 if step < 6 else 31)  # loud after quiet: the estimate above the signal
        ref, got = pair.run(rng.integers(0, high, 40, dtype=np.uint64).astype(np.uint32))
        assert_same(ref[0], got[0])
        assert_same(ref[1], got[1])


def test_spectral_subtraction_without_state_io_is_the_first_call_and_warns(rng):
    pair = Pair(models.spectral_subtraction(40, False))
    assert any("noise" in str(w.message) for w in pair.warnings)
    ref, got = pair.run(rng.integers(0, 1 << 20, 40, dtype=np.uint64).astype(np.uint32))
    assert_same(ref[0], got[0])
    assert_same(ref[1], got[1])


def test_pcan_gain_control_matches_tflm_over_every_interval(rng):
    lut = models.pcan_lut(rng)
    n = 99
    pair = Pair(models.pcan(n, lut, 6))
    bits = np.arange(n) % 33  # noise estimates of every bit length 0..32
    noise = rng.integers(0, 1 << 32, n, dtype=np.uint64) >> (32 - bits).astype(np.uint64)
    for high in (1 << 12, 1 << 32):
        x = rng.integers(0, high, n, dtype=np.uint64).astype(np.uint32)
        ref, got = pair.run(x, noise.astype(np.uint32))
        assert_same(ref[0], got[0])


@pytest.mark.parametrize(("correction", "scale"), [(3, 64), (0, 1 << 14)])
def test_filter_bank_log_matches_tflm(rng, correction, scale):
    bits = np.arange(96) % 33
    x = rng.integers(0, 1 << 32, 96, dtype=np.uint64) >> (32 - bits).astype(np.uint64)
    x[:4] = [0, 1, 2, 3]
    pair = Pair(models.filter_bank_log(96, correction, scale))
    ref, got = pair.run(x.astype(np.uint32))
    assert_same(ref[0], got[0])


def test_front_end_chain_streams_bit_exact_over_frames(rng):
    """The micro_speech preprocessor's Signal chain, frame after frame with its state."""
    pair = Pair(models.front_end(rng), state_io=True)
    t = np.arange(480)
    for frame in range(10):
        amp = (200, 3000, 30000)[frame % 3]
        tone = amp * np.sin(2 * np.pi * (250 + 120 * frame) * (t + 480 * frame) / 16000)
        x = np.clip(np.round(tone) + rng.integers(-50, 50, 480), -32768, 32767).astype(np.int16)
        ref, got = pair.run(x)
        assert_same(ref[0], got[0])


def test_delay_streams_rows_delayed_by_delay_length(rng):
    pair = Pair(models.delay((2, 16), 5), state_io=True)
    for _ in range(4):
        assert_same(*(v[0] for v in pair.run(_int16(rng, (2, 16)))))


@pytest.mark.parametrize(
    ("size", "step", "prefill"),
    [(8, 4, False), (8, 4, True), (5, 2, False), (5, 2, True), (3, 4, False)],
)
def test_framer_streams_frames_and_validity_like_tflm(rng, size, step, prefill):
    pair = Pair(models.framer((2, 12), size, step, prefill), state_io=True)
    for _ in range(5):
        ref, got = pair.run(_int16(rng, (2, 12)))
        assert bool(got[1]) == bool(ref[1])
        if ref[1]:  # TFLM leaves an invalid call's frames unwritten
            assert_same(ref[0], got[0])


@pytest.mark.parametrize(("left", "right", "step"), [(2, 1, 1), (1, 2, 2), (0, 1, 2), (3, 0, 4)])
def test_stacker_streams_stacked_frames_and_validity_like_tflm(rng, left, right, step):
    pair = Pair(models.stacker(4, left, right, step), state_io=True)
    for _ in range(9):
        ref, got = pair.run(_int16(rng, 4))
        assert bool(got[1]) == bool(ref[1])
        if ref[1]:
            assert_same(ref[0], got[0])


@pytest.mark.parametrize("dtype", ["int16", "float32"])
def test_overlap_add_streams_its_buffer_like_tflm(rng, dtype):
    shape = (2, 3, 8)
    pair = Pair(models.overlap_add(shape, 4, dtype), state_io=True)
    for _ in range(4):
        if dtype == "int16":
            x = _int16(rng, shape)  # full scale: the sums saturate
        else:
            x = rng.standard_normal(shape).astype(np.float32)
        assert_same(*(v[0] for v in pair.run(x)))


def test_buffer_ops_without_state_io_are_the_first_call_and_warn(rng):
    pair = Pair(models.delay((1, 8), 3))
    assert any("delay" in str(w.message) for w in pair.warnings)
    assert_same(*(v[0] for v in pair.run(_int16(rng, (1, 8)))))


@pytest.mark.parametrize(
    ("shape", "fft_length"), [((480,), 512), ((2, 64), 128), ((6,), 8)], ids=["512", "128", "8"]
)
def test_rfft_float_is_kissfft_float_bit_exact(rng, shape, fft_length):
    pair = Pair(models.rfft(shape, fft_length, models.FLOAT32))
    for scale in (1.0, 3e4):
        x = (scale * rng.standard_normal(shape)).astype(np.float32)
        assert_same(*(v[0] for v in pair.run(x)))


@pytest.mark.parametrize("kind", [models.INT16, models.FLOAT32], ids=["int16", "float"])
@pytest.mark.parametrize(("rows", "fft_length"), [((), 512), ((2,), 128), ((), 8)])
def test_irfft_is_kissfft_inverse_bit_exact(rng, kind, rows, fft_length):
    shape = (*rows, fft_length + 2)
    pair = Pair(models.irfft(shape, fft_length, kind))
    for amp in (300, 32768):
        if kind == models.INT16:
            x = _int16(rng, shape, amp)
        else:
            x = (amp * rng.standard_normal(shape)).astype(np.float32)
        assert_same(*(v[0] for v in pair.run(x)))


@pytest.mark.parametrize("fft_length", [512, 32])
def test_rfft_and_irfft_int32_are_kissfft_fixed32_bit_exact(rng, fft_length):
    """int32 kissfft: 31 fraction bits, int64 products up to 2^63 - 2^32, int32 stores."""
    forward = Pair(models.fft_int32("SignalRfft", fft_length))
    inverse = Pair(models.fft_int32("SignalIrfft", fft_length))
    for high in (1 << 20, 1 << 31):
        x = rng.integers(-high, high, fft_length).astype(np.int32)
        assert_same(*(v[0] for v in forward.run(x)))
        y = rng.integers(-high, high, fft_length + 2).astype(np.int32)
        assert_same(*(v[0] for v in inverse.run(y)))


def test_rfft_unknown_type_is_refused_by_name():
    with pytest.raises(ConversionError, match="SignalRfft with T=9"):
        convert(models.rfft((16,), 16, kind=9))


def test_rfft_non_power_of_two_is_refused_naming_the_radix():
    with pytest.raises(ConversionError, match="fft_length 24 is not a power of two"):
        convert(models.rfft((24,), 24))


@pytest.mark.parametrize("opts", [{}, {"shift": 12, "extra": 1}], ids=["missing", "extra"])
def test_option_keys_other_than_the_kernels_are_refused(opts):
    """TFLM reads the options by position in key order: another key set shifts them."""
    tensors = [models._t("x", (4,), "int16"), models._t("w", (4,), "int16", np.ones(4, np.int16)),
               models._t("y", (4,), "int16")]  # fmt: skip
    data = models._one("SignalWindow", tensors, 2, opts)
    with pytest.raises(ConversionError, match=r"SignalWindow: options .*TFLM reads \['shift'\]"):
        convert(data)


def test_filter_bank_band_past_the_input_is_refused_naming_the_channel(rng):
    w, u, starts, wstarts, widths = models.filter_bank_constants(rng, 257, 4, 5, 241)
    starts = starts.copy()
    starts[2] = 250  # channel 2 would read past the 257 bins
    with pytest.raises(ConversionError, match="channel 2's band"):
        convert(models.filter_bank(257, (w, u, starts, wstarts, widths)))


def test_filter_bank_negative_width_adds_nothing_like_tflm(rng):
    w, u, starts, wstarts, widths = models.filter_bank_constants(rng, 257, 8, 5, 241)
    widths = widths.copy()
    widths[3] = -2  # the kernel's loop over the band runs no step
    pair = Pair(models.filter_bank(257, (w, u, starts, wstarts, widths)))
    x = rng.integers(0, 1 << 32, 257, dtype=np.uint64).astype(np.uint32)
    assert_same(*(v[0] for v in pair.run(x)))


def test_framer_without_its_valid_output_is_refused_by_name():
    tensors = [models._t("x", (1, 8), "int16"), models._t("frames", (1, 2, 4), "int16")]
    data = models._one("SignalFramer", tensors, 1, {"frame_size": 4, "frame_step": 4})
    with pytest.raises(ConversionError, match="SignalFramer has 1 inputs and 1 outputs"):
        convert(data)


@pytest.mark.parametrize("state_io", [False, True], ids=["reset_each_call", "stream"])
def test_verify_uses_tflm_interpreter_for_signal_ops(rng, state_io):
    """--verify: the TFLite interpreter has no Signal ops; TFLM's is the reference, reset
    before each sample by default, one stream with --state-io."""
    from tflite2qonnx.verified import convert_and_verify

    _, figures = convert_and_verify(models.front_end(rng), state_io=state_io)
    assert figures.passed
    assert "TFLM interpreter" in figures.runner
    assert all(a.max_abs_error == 0 for a in figures.outputs)


def test_verify_checks_framer_frames_and_valid_flag():
    from tflite2qonnx.verified import convert_and_verify

    _, figures = convert_and_verify(models.framer((1, 8), 4, 4, True), state_io=True)
    assert figures.passed and len(figures.outputs) == 2
