"""TFLite Micro's Signal custom ops of the audio front end (``signal/src`` in tflite-micro):
SignalWindow, SignalFftAutoScale, SignalEnergy, SignalFilterBank, SignalFilterBankSquareRoot,
SignalFilterBankSpectralSubtraction, SignalPCAN and SignalFilterBankLog.

Each is its C kernel's integer arithmetic written with ONNX int64 ops (``tflm_int``), so the
graph is bit exact against TFLM's interpreter: the uint32 / uint64 stores wrap as in C, the
right shifts are floor divisions, the square root and the log are the kernels' own integer
algorithms (an exact integer square root with the kernel's rounding; the log's 128-segment
table), PCAN's gain is a table of every value its interpolation can give. Bounds that keep
int64 exact (weights times the largest uint32 input) are checked on the constant operands;
beyond them the op is refused. SpectralSubtraction's noise estimate persists in TFLM between
invocations: a state (``tflite2qonnx.state``), zero at the start unless --state-io.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.common import table_size
from tflite2qonnx.ops.signal.tflm_int import (
    Int64,
    KernelState,
    check_operand,
    check_operands,
    constant,
    int_option,
    options,
)

_INT16_MIN, _INT16_MAX = -(1 << 15), (1 << 15) - 1
_U32 = (1 << 32) - 1
_I31 = (1 << 31) - 1


def window(b: GraphBuilder, op: Operator) -> None:
    """int16 ``(x * w) >> shift`` saturated to int16, the window applied to each run of
    len(w) values of the flattened input."""
    shift = int_option(options(op), "shift", op, 0, 31)
    shape = check_operand(b, op.inputs[0], "int16", None, op, "the input")
    width = check_operand(b, op.inputs[1], "int16", 1, op, "the window")[0]
    if int(np.prod(shape)) % width:
        raise ConversionError(
            f"SignalWindow: the input's {int(np.prod(shape))} values are not whole windows of "
            f"{width} (TFLM would read past the window)",
            op.where,
        )
    m = Int64(b)
    x = m.op("Reshape", m.cast_in(op.inputs[0]), m.c([-1, width]))
    y = m.shr(m.mul(x, m.op("Cast", b.input(op.inputs[1]), to=TensorProto.INT64)), shift)
    y = m.clip(y, _INT16_MIN, _INT16_MAX)
    m.set_output(op.outputs[0], m.op("Reshape", y, m.c(list(shape))))


def fft_auto_scale(b: GraphBuilder, op: Operator) -> None:
    """Shift left by the headroom of MaxAbs16: ``15 - bit_length(max)`` bits (0 when the
    maximum is 0 or negative; MaxAbs16's running maximum goes negative after an INT16_MIN,
    reproduced in closed form), output wrapped to int16, the shift as the int32 output."""
    check_operands(op)
    n = check_operand(b, op.inputs[0], "int16", 1, op, "the input")[0]
    m = Int64(b)
    x = m.cast_in(op.inputs[0])
    idx = m.c(np.arange(n))
    absx = m.op("Abs", x)
    is_min = m.op("Equal", x, m.c(_INT16_MIN))
    # (the reductions here see values below 2^16, where onnxruntime reduces int64 right)
    last_min = m.op("ReduceMax", m.where(is_min, idx, -1), keepdims=0)
    # after the last INT16_MIN the running max follows a strictly increasing run of negative
    # values; the first value that breaks it makes the max its magnitude, a plain max-abs after
    prev = m.op("Concat", m.c([_INT16_MIN]), m.op("Slice", x, m.c([0]), m.c([n - 1])), axis=0)
    breaks = m.op(
        "Or",
        m.op("GreaterOrEqual", x, m.c(0)),
        m.op("LessOrEqual", x, prev),
    )
    breaks = m.op("And", breaks, m.op("Greater", idx, last_min))
    first = m.op("ReduceMin", m.where(breaks, idx, n), keepdims=0)
    tail_max = m.op("ReduceMax", m.where(m.op("GreaterOrEqual", idx, first), absx, 0), keepdims=0)
    last = m.op("Gather", x, m.c(n - 1), axis=0)
    special = m.where(m.op("Less", first, m.c(n)), tail_max, last)
    peak = m.where(
        m.op("GreaterOrEqual", last_min, m.c(0)), special, m.op("ReduceMax", absx, keepdims=0)
    )
    bits = m.sub(m.c(15), m.bit_length(m.max(peak, 0), 16))
    scale = m.where(m.op("Greater", peak, m.c(0)), bits, 0)
    m.set_output(op.outputs[0], m.wrap(m.mul(x, m.pow2(scale, 16)), 16))
    m.set_output(op.outputs[1], scale)


def energy(b: GraphBuilder, op: Operator) -> None:
    """uint32 ``re^2 + im^2`` of the complex int16 pairs in [start_index, end_index); TFLM
    leaves the other outputs unwritten (arena memory), written here as 0."""
    opts = options(op)
    length = check_operand(b, op.inputs[0], "int16", 1, op, "the spectrum")[0]
    out = check_operand(b, op.outputs[0], "uint32", 1, op, "the output")[0]
    if length % 2 or out * 2 != length:
        raise ConversionError(
            f"SignalEnergy: a spectrum of {length} int16 (complex pairs) and {out} outputs",
            op.where,
        )
    start = int_option(opts, "start_index", op, 0, out)
    end = int_option(opts, "end_index", op, start, out)
    m = Int64(b)
    pairs = m.op("Reshape", m.cast_in(op.inputs[0]), m.c([out, 2]))
    power = m.op("ReduceSum", m.mul(pairs, pairs), m.c([1]), keepdims=0)
    inside = ((np.arange(out) >= start) & (np.arange(out) < end)).astype(np.int64)
    m.set_output(op.outputs[0], m.mul(power, m.c(inside)))


def filter_bank(b: GraphBuilder, op: Operator) -> None:
    """uint64 channel sums: output c = weights over channel c+1's band + unweights over
    channel c's (FilterbankAccumulateChannels), one constant [bins, channels] matrix."""
    channels = int_option(options(op), "num_channels", op, 1, 1 << 15)
    bins = check_operand(b, op.inputs[0], "uint32", 1, op, "the input")[0]
    names = ("weights", "unweights", "channel frequency starts", "channel weight starts",
             "channel widths")  # fmt: skip
    w, u, freq, wstart, width = (
        constant(b, i, "int16", op, what) for i, what in zip(op.inputs[1:6], names, strict=True)
    )
    out = check_operand(b, op.outputs[0], "uint64", 1, op, "the output")[0]
    if out != channels or min(len(freq), len(wstart), len(width)) < channels + 1:
        raise ConversionError(
            f"SignalFilterBank: {channels} channels need {channels + 1} band starts and widths "
            f"and {channels} outputs, got {len(freq)}, {len(wstart)}, {len(width)} and {out}",
            op.where,
        )
    table_size(bins * channels, "SignalFilterBank's matrix", op.where)
    matrix = np.zeros((bins, channels + 1), np.int64)
    for i in range(channels + 1):
        f0, w0, n = int(freq[i]), int(wstart[i]), int(width[i])
        if n <= 0:  # the kernel's loop runs no step
            continue
        if f0 < 0 or w0 < 0 or f0 + n > bins or w0 + n > min(len(w), len(u)):
            raise ConversionError(
                f"SignalFilterBank: channel {i}'s band (start {f0}, weights from {w0}, width "
                f"{n}) reaches past the {bins} inputs or {len(w)} weights",
                op.where,
            )
        matrix[f0 : f0 + n, i] += w[w0 : w0 + n]  # output i - 1, weighted
        if i < channels:
            matrix[f0 : f0 + n, i + 1] += u[w0 : w0 + n]  # output i, the rest of the band
    matrix = matrix[:, 1:]
    if int(np.abs(matrix).sum(axis=0).max(initial=0)) * _U32 >= 1 << 63:
        raise ConversionError(
            "SignalFilterBank: the weights are too large for an exact int64 sum", op.where
        )
    m = Int64(b)
    x = m.op("Unsqueeze", m.cast_in(op.inputs[0]), m.c([1]))
    sums = m.op("ReduceSum", m.mul(x, b.const(matrix, "filter_bank_matrix")), m.c([0]), keepdims=0)
    m.set_output(op.outputs[0], sums)  # a negative weight's sum casts modulo 2^64, as in C


def filter_bank_square_root(b: GraphBuilder, op: Operator) -> None:
    """uint32 ``Sqrt64(x) >> scale_bits``: the floor square root (a double estimate corrected
    with exact uint64 squares), rounded up when the remainder exceeds it (except at the
    kernel's caps 0xFFFF and 0xFFFFFFFF); the shift a runtime int32 in [0, 31]."""
    check_operands(op)
    check_operand(b, op.inputs[0], "uint64", 1, op, "the input")
    check_operand(b, op.inputs[1], "int32", None, op, "the scale bits")
    m = Int64(b)
    n = b.input(op.inputs[0])

    def u64(v: int) -> str:
        return b.const(np.array(v, np.uint64), "tflm_u64")

    guess = m.op("Floor", m.op("Sqrt", m.op("Cast", n, to=TensorProto.DOUBLE)))
    root = m.op("Cast", m.op("Min", guess, b.const(np.array(float(_U32)), "u32_max")),
                to=TensorProto.UINT64)  # fmt: skip
    too_big = m.op("Greater", m.op("Mul", root, root), n)
    root = m.op("Sub", root, m.op("Cast", too_big, to=TensorProto.UINT64))
    up = m.op("Add", root, u64(1))  # squared only where root < 0xFFFFFFFF
    fits = m.op("And", m.op("Less", root, u64(_U32)), m.op("LessOrEqual", m.op("Mul", up, up), n))
    root = m.op("Add", root, m.op("Cast", fits, to=TensorProto.UINT64))  # no uint64 Where
    rest = m.op("Sub", n, m.op("Mul", root, root))
    capped = m.op("Or", m.op("Equal", root, u64(0xFFFF)), m.op("Equal", root, u64(_U32)))
    bump = m.op("And", m.op("Greater", rest, root), m.op("Not", capped))
    root = m.op("Cast", m.op("Add", root, m.op("Cast", bump, to=TensorProto.UINT64)),
                to=TensorProto.INT64)  # fmt: skip
    shift = m.op("Reshape", m.op("Cast", b.input(op.inputs[1]), to=TensorProto.INT64), m.c([]))
    m.set_output(op.outputs[0], m.op("Div", root, m.pow2(shift, 32)))


def spectral_subtraction(b: GraphBuilder, op: Operator) -> None:
    """The noise estimate's low-pass filter (even / odd channels' smoothing), the signal minus
    it floored at ``min_signal_remaining``; outputs the result and the new estimate."""
    opts = options(op)
    channels = int_option(opts, "num_channels", op, 1, 1 << 15)
    smooth_bits = int_option(opts, "smoothing_bits", op, 0, 31)
    bits = int_option(opts, "spectral_subtraction_bits", op, 0, 62)
    coeffs = {k: int_option(opts, k, op, 0, _I31) for k in (
        "smoothing", "one_minus_smoothing", "alternate_smoothing",
        "alternate_one_minus_smoothing", "min_signal_remaining")}  # fmt: skip
    clamping = opts.get("clamping", False)
    for i in (op.inputs[0], *op.outputs):
        if check_operand(b, i, "uint32", 1, op, "the input and outputs")[0] != channels:
            raise ConversionError(
                f"SignalFilterBankSpectralSubtraction: tensor {i} is not {channels} long",
                op.where,
            )
    odd = np.arange(channels) % 2 == 1
    smooth = np.where(odd, coeffs["alternate_smoothing"], coeffs["smoothing"])
    keep = np.where(odd, coeffs["alternate_one_minus_smoothing"], coeffs["one_minus_smoothing"])
    if int((smooth + keep).max()) * _U32 >= 1 << 63:
        raise ConversionError(
            "SignalFilterBankSpectralSubtraction: smoothing coefficients too large for an exact "
            "int64 sum",
            op.where,
        )
    m = Int64(b)
    name = f"{b.tensor_name(op.outputs[1])}_state"  # unique: one state per op
    state = KernelState(b, op, name, np.zeros(channels, np.uint32))
    noise = m.op("Cast", state.before, to=TensorProto.INT64)
    x = m.cast_in(op.inputs[0])
    signal = m.wrap(m.mul(x, 1 << smooth_bits), 32, signed=False)
    mixed = m.add(m.mul(signal, m.c(smooth)), m.mul(noise, m.c(keep)))
    noise = m.wrap(m.shr_nonneg(mixed, bits), 32, signed=False)
    above = m.op("Greater", noise, signal)
    estimate = m.where(above, signal, noise)
    if clamping:
        noise = estimate
    floor = m.wrap(m.shr_nonneg(m.mul(x, coeffs["min_signal_remaining"]), bits), 32, False)
    left = m.shr_nonneg(m.sub(signal, estimate), smooth_bits)
    m.set_output(op.outputs[0], m.max(left, floor))
    m.set_output(op.outputs[1], noise)
    state.after(b.input(op.outputs[1]))


def _wide_dynamic_table(lut: np.ndarray) -> np.ndarray:
    """WideDynamicFunction's value for x <= 2 (rows 0..2), then for every interval
    (bit length 2..32) and 10-bit fraction: int32 C arithmetic, stored to int16."""
    frac = np.arange(1024, dtype=np.int64)[None, :]
    base = 4 * np.arange(2, 33, dtype=np.int64)[:, None] - 6
    c0, c1, c2 = (lut[base + k] for k in range(3))

    def i32(v: np.ndarray) -> np.ndarray:
        return (v + (1 << 31)) % (1 << 32) - (1 << 31)

    result = i32((c2 * frac >> 5) + c1 * 32)
    result = i32(i32(result * frac) + (1 << 14)) >> 15
    result = (result + c0 + (1 << 15)) % (1 << 16) - (1 << 15)
    return np.concatenate([lut[:3], result.ravel()])


def pcan(b: GraphBuilder, op: Operator) -> None:
    """Per-channel automatic gain control: gain = WideDynamicFunction(noise estimate) read from
    a table of all its values, snr = (x * gain) >> snr_shift, then PcanShrink's quadratic
    below 2 << 12 and linear above."""
    snr_shift = int_option(options(op), "snr_shift", op, 0, 62)
    c = check_operand(b, op.inputs[0], "uint32", 1, op, "the input")[0]
    if check_operand(b, op.inputs[1], "uint32", 1, op, "the noise estimate")[0] != c:
        raise ConversionError("SignalPCAN: input and noise estimate differ in length", op.where)
    lut = constant(b, op.inputs[2], "int16", op, "the gain table")
    if len(lut) < 4 * 32 - 3:
        raise ConversionError(
            f"SignalPCAN: the gain table has {len(lut)} entries; the kernel reads up to 125",
            op.where,
        )
    gains = _wide_dynamic_table(lut)
    if gains.min() < 0:
        raise ConversionError(
            "SignalPCAN: the gain table gives negative gains (a uint32 wrap not emulated)",
            op.where,
        )
    m = Int64(b)
    x, noise = m.cast_in(op.inputs[0]), m.cast_in(op.inputs[1])
    interval = m.bit_length(noise, 32)
    left = m.clip(m.sub(m.c(11), interval), 0, 31)
    right = m.clip(m.sub(interval, m.c(11)), 0, 31)
    frac = m.op("Div", m.mul(noise, m.pow2(left, 32)), m.pow2(right, 32))
    frac = m.op("Mod", frac, m.c(1024), fmod=0)
    row = m.add(m.mul(m.sub(interval, m.c(2)), 1024), m.add(frac, 3))
    index = m.where(m.op("LessOrEqual", noise, m.c(2)), noise, row)
    gain = m.op("Gather", b.const(gains, "pcan_gains"), index, axis=0)
    snr = m.wrap(m.shr_nonneg(m.mul(x, gain), snr_shift), 32, signed=False)
    small = m.shr_nonneg(m.mul(snr, snr), 20)
    large = m.sub(m.shr_nonneg(snr, 6), 64)
    m.set_output(op.outputs[0], m.where(m.op("Less", snr, m.c(2 << 12)), small, large))


# signal/src/log.cc's 128-segment correction table of log2's fraction
_LOG_LUT = np.array([
    0, 224, 442, 654, 861, 1063, 1259, 1450, 1636, 1817, 1992, 2163, 2329, 2490, 2646, 2797,
    2944, 3087, 3224, 3358, 3487, 3611, 3732, 3848, 3960, 4068, 4172, 4272, 4368, 4460, 4549,
    4633, 4714, 4791, 4864, 4934, 5001, 5063, 5123, 5178, 5231, 5280, 5326, 5368, 5408, 5444,
    5477, 5507, 5533, 5557, 5578, 5595, 5610, 5622, 5631, 5637, 5640, 5641, 5638, 5633, 5626,
    5615, 5602, 5586, 5568, 5547, 5524, 5498, 5470, 5439, 5406, 5370, 5332, 5291, 5249, 5203,
    5156, 5106, 5054, 5000, 4944, 4885, 4825, 4762, 4697, 4630, 4561, 4490, 4416, 4341, 4264,
    4184, 4103, 4020, 3935, 3848, 3759, 3668, 3575, 3481, 3384, 3286, 3186, 3084, 2981, 2875,
    2768, 2659, 2549, 2437, 2323, 2207, 2090, 1971, 1851, 1729, 1605, 1480, 1353, 1224, 1094,
    963, 830, 695, 559, 421, 282, 142, 0, 0], np.int64)  # fmt: skip
_LOG_COEFF = 45426  # ln(2) * 2^16


def filter_bank_log(b: GraphBuilder, op: Operator) -> None:
    """int16 ``min(Log32(x << correction_bits, output_scale), INT16_MAX)``, 0 where the scaled
    input is 0 or 1: log2 as integer part plus the table-corrected fraction (16 fractional
    bits), times ln 2 and the output scale with rounding, in uint32 as the kernel."""
    opts = options(op)
    correction = int_option(opts, "input_correction_bits", op, 0, 31)
    scale = int_option(opts, "output_scale", op, -(1 << 31), _I31) % (1 << 32)
    n = check_operand(b, op.inputs[0], "uint32", 1, op, "the input")[0]
    if check_operand(b, op.outputs[0], "int16", 1, op, "the output")[0] != n:
        raise ConversionError("SignalFilterBankLog: input and output differ in length", op.where)
    m = Int64(b)
    x = m.wrap(m.mul(m.cast_in(op.inputs[0]), 1 << correction), 32, signed=False)
    safe = m.max(x, 2)
    integer = m.sub(m.bit_length(safe, 32), m.c(1))
    frac = m.sub(safe, m.pow2(integer, 32))
    up = m.clip(m.sub(m.c(16), integer), 0, 31)
    down = m.clip(m.sub(integer, m.c(16)), 0, 31)
    frac = m.op("Div", m.mul(frac, m.pow2(up, 32)), m.pow2(down, 32))
    seg = m.shr_nonneg(frac, 9)
    c0 = m.op("Gather", m.c(_LOG_LUT), seg, axis=0)
    c1 = m.op("Gather", m.c(_LOG_LUT), m.add(seg, 1), axis=0)
    rel = m.shr(m.mul(m.sub(c1, c0), m.sub(frac, m.mul(seg, 512))), 16)
    log2 = m.add(m.mul(integer, 1 << 16), m.add(frac, m.add(c0, rel)))
    log2 = m.wrap(log2, 32, signed=False)
    loge = m.wrap(m.shr_nonneg(m.add(m.mul(log2, _LOG_COEFF), 1 << 15), 16), 32, signed=False)
    scaled = m.shr_nonneg(m.wrap(m.add(m.mul(loge, scale), 1 << 15), 32, signed=False), 16)
    y = m.where(m.op("Greater", x, m.c(1)), m.min(scaled, _INT16_MAX), 0)
    m.set_output(op.outputs[0], y)
