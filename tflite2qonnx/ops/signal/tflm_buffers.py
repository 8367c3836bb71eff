"""TFLite Micro's buffering Signal ops: SignalDelay, SignalFramer, SignalStacker and
SignalOverlapAdd. Each keeps a circular buffer (or an overlap buffer) in the kernel between
invocations; what persists is written as a fixed-size state (``tflm_int.KernelState``): the
last samples or frames the buffer holds, plus a fill count where the kernel's output validity
depends on how much it has seen. One call is then a Concat of the state and the input and
static Slices / Gathers of the result, so the ops are exact (OverlapAdd's int16 sum saturates
and its float sum is one float32 Add per frame, as the kernel's).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.signal.tflm_int import (
    Int64,
    KernelState,
    check_operand,
    int_option,
    options,
)

_MAX_LEN = 1 << 20


def _state_name(b: GraphBuilder, op: Operator, what: str) -> str:
    return f"{b.tensor_name(op.outputs[0])}_{what}"  # unique: one state per op


def _slice(m: Int64, x: str, start: int, end: int) -> str:
    return m.op("Slice", x, m.c([start]), m.c([end]), m.c([-1]))


def delay(b: GraphBuilder, op: Operator) -> None:
    """Each row delayed by ``delay_length`` samples: the state is the row's last samples."""
    length = int_option(options(op), "delay_length", op, 0, _MAX_LEN)
    shape = check_operand(b, op.inputs[0], "int16", None, op, "the input")
    x = b.input(op.inputs[0])
    if length == 0:
        b.set_output(op.outputs[0], b.emit("Identity", [x])[0])
        return
    m = Int64(b)
    rows = (*shape[:-1], length)
    state = KernelState(b, op, _state_name(b, op, "delay"), np.zeros(rows, np.int16))
    stream = m.op("Concat", state.before, x, axis=-1)
    b.set_output(op.outputs[0], _slice(m, stream, 0, shape[-1]))
    state.after(_slice(m, stream, shape[-1], shape[-1] + length))


def framer(b: GraphBuilder, op: Operator) -> None:
    """Frames of ``frame_size`` every ``frame_step`` samples, ``frame_step`` new samples per
    frame. With ``prefill`` the buffer starts with frame_size - step zeros and every frame is
    valid; without, the first frame is output once the buffer's capacity (frame_size rounded
    up to whole steps) has been written, and each frame ends capacity - frame_size samples
    before the newest (the kernel reads the oldest samples). Invalid frames: TFLM leaves the
    output unwritten; here they hold what the zero state gives."""
    opts = options(op)
    size = int_option(opts, "frame_size", op, 1, _MAX_LEN)
    step = int_option(opts, "frame_step", op, 1, _MAX_LEN)
    prefill = bool(opts.get("prefill", False))
    shape = check_operand(b, op.inputs[0], "int16", None, op, "the input")
    frames = shape[-1] // step
    out = (*shape[:-1], frames, size)
    output = check_operand(b, op.outputs[0], "int16", None, op, "the output")
    if output != out or frames < 1 or shape[-1] % step or (prefill and size < step):
        raise ConversionError(
            f"SignalFramer: input {list(shape)}, frame_size {size}, frame_step {step}"
            f"{', prefill' if prefill else ''} and output {list(output)}: the kernel needs "
            f"rows of whole steps, output {list(out)} and (with prefill) size >= step",
            op.where,
        )
    capacity = -(-size // step) * step
    kept = size - step if prefill else capacity - step
    m = Int64(b)
    x = b.input(op.inputs[0])
    if kept > 0:
        rows = (*shape[:-1], kept)
        state = KernelState(b, op, _state_name(b, op, "frames"), np.zeros(rows, np.int16))
        stream = m.op("Concat", state.before, x, axis=-1)
    else:
        state, stream = None, x
    starts = np.arange(frames)[:, None] * step + np.arange(size)[None, :]
    b.set_output(op.outputs[0], m.op("Gather", stream, m.c(starts), axis=-1))
    if state is not None:
        total = kept + frames * step
        state.after(_slice(m, stream, total - kept, total))
    valid = b.const(np.array(True), "tflm_always_valid")
    needed = capacity // step  # steps written before the first valid frame
    if not prefill and needed > 1:
        count = KernelState(b, op, _state_name(b, op, "steps"), np.zeros((), np.int32))
        seen = m.op("Cast", count.before, to=TensorProto.INT64)
        valid = m.op("GreaterOrEqual", m.add(seen, 1), m.c(needed))
        count.after(m.op("Cast", m.min(m.add(seen, frames), needed), to=TensorProto.INT32))
    b.set_output(op.outputs[1], m.op("Identity", valid))


def stacker(b: GraphBuilder, op: Operator) -> None:
    """One frame of ``num_channels`` in, the last left + right + 1 frames out (flat) when the
    buffer holds them, then ``stacker_step`` frames dropped; the first frame is repeated
    ``stacker_left_context`` times. The state: the last left + right frames and how many of
    them the buffer holds (-1 before the first frame)."""
    opts = options(op)
    channels = int_option(opts, "num_channels", op, 1, _MAX_LEN)
    left = int_option(opts, "stacker_left_context", op, 0, 1 << 12)
    right = int_option(opts, "stacker_right_context", op, 0, 1 << 12)
    window = left + right + 1
    drop = int_option(opts, "stacker_step", op, 1, window)
    if check_operand(b, op.inputs[0], "int16", 1, op, "the input")[0] != channels:
        raise ConversionError(f"SignalStacker: the input is not {channels} long", op.where)
    if check_operand(b, op.outputs[0], "int16", 1, op, "the output")[0] != channels * window:
        raise ConversionError(
            f"SignalStacker: the output is not {channels} x {window} long", op.where
        )
    m = Int64(b)
    if window == 1:
        b.set_output(op.outputs[0], m.op("Identity", b.input(op.inputs[0])))
        b.set_output(op.outputs[1], m.op("Identity", b.const(np.array(True), "tflm_always_valid")))
        return
    x = m.op("Unsqueeze", m.cast_in(op.inputs[0]), m.c([0]))  # [1, channels]
    k = window - 1
    frames = KernelState(b, op, _state_name(b, op, "frames"), np.zeros((k, channels), np.int16))
    count = KernelState(b, op, _state_name(b, op, "count"), np.array(-1, np.int32))
    held = m.op("Cast", count.before, to=TensorProto.INT64)
    first = m.op("Less", held, m.c(0))
    repeated = m.op("Tile", x, m.c([window, 1]))
    before = m.op("Cast", frames.before, to=TensorProto.INT64)
    stacked = m.op("Where", first, repeated, m.op("Concat", before, x, axis=0))
    held = m.where(first, left + 1, m.add(held, 1))
    valid = m.op("GreaterOrEqual", held, m.c(window))
    m.set_output(op.outputs[0], m.op("Reshape", stacked, m.c([channels * window])))
    b.set_output(op.outputs[1], valid)
    kept = m.op("Slice", stacked, m.c([1]), m.c([window]), m.c([0]))
    frames.after(m.op("Cast", kept, to=TensorProto.INT16))
    count.after(m.op("Cast", m.where(valid, m.sub(held, drop), held), to=TensorProto.INT32))


def overlap_add(b: GraphBuilder, op: Operator) -> None:
    """[..., frames, frame_size] -> [..., frames * frame_step]: each frame added into the
    frame_size buffer (int16 saturating, or float32), its first frame_step samples output and
    the buffer shifted left with zeros; the buffer is the state."""
    opts = options(op)
    step = int_option(opts, "frame_step", op, 1, _MAX_LEN)
    dtype = b.tensor(op.inputs[0]).dtype
    if dtype not in ("int16", "float32"):
        raise ConversionError(f"SignalOverlapAdd on {dtype}: TFLM has int16 and float", op.where)
    shape = check_operand(b, op.inputs[0], dtype, None, op, "the input")
    if len(shape) < 2 or shape[-1] < step:
        raise ConversionError(
            f"SignalOverlapAdd: input {list(shape)} needs [..., frames, frame_size >= "
            f"frame_step {step}]",
            op.where,
        )
    frames, size = shape[-2], shape[-1]
    if check_operand(b, op.outputs[0], dtype, None, op, "the output") != (
        *shape[:-2],
        frames * step,
    ):
        raise ConversionError(
            f"SignalOverlapAdd: the output must be {[*shape[:-2], frames * step]}", op.where
        )
    m = Int64(b)
    rows = (*shape[:-2], size)
    state = KernelState(b, op, _state_name(b, op, "buffer"), np.zeros(rows, dtype))
    buffer = state.before
    x = b.input(op.inputs[0])
    if dtype == "int16":
        buffer, x = (m.op("Cast", v, to=TensorProto.INT64) for v in (buffer, x))
    zeros = b.const(np.zeros((*shape[:-2], step), _NP[dtype]), "zeros")
    outs = []
    for f in range(frames):
        frame = m.op("Gather", x, m.c(f), axis=-2)
        buffer = m.op("Add", buffer, frame)
        if dtype == "int16":
            buffer = m.clip(buffer, -(1 << 15), (1 << 15) - 1)
        outs.append(_slice(m, buffer, 0, step))
        buffer = m.op("Concat", _slice(m, buffer, step, size), zeros, axis=-1)
    y = m.op("Concat", *outs, axis=-1) if len(outs) > 1 else outs[0]
    if dtype == "int16":
        y, buffer = (m.op("Cast", v, to=TensorProto.INT16) for v in (y, buffer))
    b.set_output(op.outputs[0], y)
    state.after(buffer)


_NP = {"int16": np.int64, "float32": np.float32}
