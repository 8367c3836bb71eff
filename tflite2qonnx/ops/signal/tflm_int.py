"""Integer arithmetic for the TFLM Signal kernels, written with standard ONNX ops on int64.

TFLM's audio front end computes in C integer types (int16 storage that wraps, uint32 / uint64
accumulators, arithmetic right shifts). ONNX integer Div truncates towards zero and has no
signed shift, so every C operation is spelled here once: a floor shift adds a multiple of the
divisor that makes the operand non-negative, a store to int16 / uint32 wraps with Mod. Values
stay within int64 (each caller states the bound that makes it so).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.detection.mediapipe_transform import _number, _options
from tflite2qonnx.ops.int64_order import extreme
from tflite2qonnx.state import resource_state, resource_value

_ONNX = {
    "int16": TensorProto.INT16,
    "int32": TensorProto.INT32,
    "uint32": TensorProto.UINT32,
    "uint64": TensorProto.UINT64,
    "int64": TensorProto.INT64,
}
_OFFSET_BITS = 48  # floor shifts take operands in (-2^48, 2^62)


class Int64:
    """Emits int64 arithmetic into ``b``, with C's shifts and wrapping stores."""

    def __init__(self, b: GraphBuilder) -> None:
        self.b = b
        self._consts: dict[tuple, str] = {}

    def c(self, value: Any) -> str:
        """An int64 constant (scalars and small arrays shared within one operator)."""
        arr = np.asarray(value, np.int64)
        key = (arr.shape, arr.tobytes()) if arr.size <= 16 else None
        if key is not None and key in self._consts:
            return self._consts[key]
        name = self.b.const(arr, "tflm_int")
        if key is not None:
            self._consts[key] = name
        return name

    def op(self, kind: str, *xs: str, **attrs) -> str:
        return self.b.emit(kind, list(xs), **attrs)[0]

    def add(self, a: str, b: str | int) -> str:
        return self.op("Add", a, b if isinstance(b, str) else self.c(b))

    def sub(self, a: str, b: str | int) -> str:
        return self.op("Sub", a, b if isinstance(b, str) else self.c(b))

    def mul(self, a: str, b: str | int) -> str:
        return self.op("Mul", a, b if isinstance(b, str) else self.c(b))

    def where(self, cond: str, a: str | int, b: str | int) -> str:
        a = a if isinstance(a, str) else self.c(a)
        b = b if isinstance(b, str) else self.c(b)
        return self.op("Where", cond, a, b)

    # onnxruntime's int64 Max / Min misorder some values past 2^31: ``int64_order``
    def max(self, a: str, b: str | int) -> str:
        return extreme(self.b, "Max", a, b if isinstance(b, str) else self.c(b), TensorProto.INT64)

    def min(self, a: str, b: str | int) -> str:
        return extreme(self.b, "Min", a, b if isinstance(b, str) else self.c(b), TensorProto.INT64)

    def clip(self, x: str, low: int, high: int) -> str:
        return self.min(self.max(x, low), high)

    def shr(self, x: str, bits: int, add: int = 0) -> str:
        """``(x + add) >> bits`` (arithmetic: a floor division), x in (-2^48, 2^62)."""
        if bits == 0:
            return self.add(x, add) if add else x
        offset = 1 << _OFFSET_BITS
        shifted = self.op("Div", self.add(x, offset + add), self.c(1 << bits))
        return self.sub(shifted, offset >> bits)

    def shr_nonneg(self, x: str, bits: int) -> str:
        """``x >> bits`` for x >= 0 (truncation is the floor)."""
        return x if bits == 0 else self.op("Div", x, self.c(1 << bits))

    def wrap(self, x: str, bits: int, signed: bool = True) -> str:
        """``x`` stored to a ``bits``-wide C integer: modulo 2^bits (two's complement)."""
        size = 1 << bits
        if not signed:
            return self.op("Mod", x, self.c(size), fmod=0)
        half = size >> 1
        return self.sub(self.op("Mod", self.add(x, half), self.c(size), fmod=0), half)

    def bit_length(self, x: str, bits: int) -> str:
        """The number of significant bits of non-negative ``x`` < 2^bits (0 for 0): the
        count of powers of two not above it, over a trailing axis."""
        powers = self.c(1 << np.arange(bits, dtype=np.int64))
        ge = self.op("GreaterOrEqual", self.op("Unsqueeze", x, self.c([-1])), powers)
        count = self.op("Cast", ge, to=TensorProto.INT64)
        return self.op("ReduceSum", count, self.c([-1]), keepdims=0)

    def pow2(self, e: str, bits: int) -> str:
        """``1 << e`` for 0 <= e < bits, by a table lookup."""
        return self.op("Gather", self.c(1 << np.arange(bits, dtype=np.int64)), e, axis=0)

    def cast_in(self, idx: int) -> str:
        return self.op("Cast", self.b.input(idx), to=TensorProto.INT64)

    def set_output(self, idx: int, x: str) -> None:
        dtype = self.b.tensor(idx).dtype
        self.b.set_output(idx, self.op("Cast", x, to=_ONNX[dtype]))


_SUBTRACTION_KEYS = (
    "alternate_one_minus_smoothing", "alternate_smoothing", "clamping", "min_signal_remaining",
    "num_channels", "one_minus_smoothing", "smoothing", "smoothing_bits",
    "spectral_subtraction_bits",
)  # fmt: skip
# (inputs, outputs) each kernel reads and writes, and the option keys it reads: TFLM reads
# the flexbuffer map by position in key order, so a map with other keys would shift them
_KERNELS: dict[str, tuple[int, int, tuple[str, ...]]] = {
    "SignalWindow": (2, 1, ("shift",)),
    "SignalFftAutoScale": (1, 2, ()),
    "SignalRfft": (1, 1, ("T", "fft_length")),
    "SignalIrfft": (1, 1, ("T", "fft_length")),
    "SignalEnergy": (1, 1, ("end_index", "start_index")),
    "SignalFilterBank": (6, 1, ("num_channels",)),
    "SignalFilterBankSquareRoot": (2, 1, ()),
    "SignalFilterBankSpectralSubtraction": (1, 2, _SUBTRACTION_KEYS),
    "SignalPCAN": (3, 1, ("snr_shift",)),
    "SignalFilterBankLog": (1, 1, ("input_correction_bits", "output_scale")),
    "SignalDelay": (1, 1, ("delay_length",)),
    "SignalFramer": (1, 2, ("frame_size", "frame_step", "prefill")),
    "SignalStacker": (1, 2, ("num_channels", "stacker_left_context", "stacker_right_context",
                             "stacker_step")),
    "SignalOverlapAdd": (1, 1, ("T", "frame_step")),
}  # fmt: skip


def options(op: Operator) -> dict[str, Any]:
    """The flexbuffer map of a Signal op, read by name, after checking the op has the
    operands its kernel uses and exactly the keys it reads by position."""
    check_operands(op)
    opts = _options(op, required=True)
    keys = _KERNELS.get(op.name, (0, 0, ()))[2]
    if sorted(opts) != sorted(keys):
        raise ConversionError(
            f"{op.name}: options {sorted(opts)}; TFLM reads {list(keys)} by position in key "
            "order, so other keys would change what it reads",
            op.where,
        )
    return opts


def check_operands(op: Operator) -> None:
    """A ConversionError unless ``op`` has the operands its kernel reads and writes."""
    n_in, n_out, _keys = _KERNELS.get(op.name, (0, 0, ()))
    if len(op.inputs) < n_in or len(op.outputs) < n_out or min((*op.inputs, *op.outputs)) < 0:
        raise ConversionError(
            f"{op.name} has {len(op.inputs)} inputs and {len(op.outputs)} outputs; its kernel "
            f"uses {n_in} and {n_out}, none omitted",
            op.where,
        )


def int_option(opts: dict[str, Any], key: str, op: Operator, low: int, high: int) -> int:
    """An integer option within [low, high] (beyond it the kernel's C shifts are undefined or
    its int64 emulation would not be exact)."""
    if key not in opts:
        raise ConversionError(f"{op.name}: option '{key}' is missing", op.where)
    value = _number(opts, key, op)
    if value != int(value) or not low <= value <= high:
        raise ConversionError(
            f"{op.name}: option '{key}' = {opts[key]!r} is outside [{low}, {high}]", op.where
        )
    return int(value)


def check_operand(
    b: GraphBuilder, idx: int, dtype: str, rank: int | None, op: Operator, what: str
) -> tuple[int, ...]:
    """A static, unquantized operand of TFLM's type: its shape."""
    t = b.tensor(idx)
    shape = tuple(int(d) for d in t.shape_signature)
    if t.dtype != dtype or t.quant is not None or min(shape, default=1) < 1:
        raise ConversionError(
            f"{op.name}: {what} (tensor {idx} '{t.name}') must be a static unquantized {dtype} "
            f"tensor, got {t.dtype} {list(shape)}" + (" (quantized)" if t.quant else ""),
            op.where,
        )
    if rank is not None and len(shape) != rank:
        raise ConversionError(
            f"{op.name}: {what} (tensor {idx} '{t.name}') must have rank {rank}, got {list(shape)}",
            op.where,
        )
    return shape


def constant(b: GraphBuilder, idx: int, dtype: str, op: Operator, what: str) -> np.ndarray:
    """A constant operand the emulation unrolls into tables (TFLM reads it each call)."""
    check_operand(b, idx, dtype, 1, op, what)
    value = b.constant(idx)
    if value is None:
        raise ConversionError(
            f"{op.name}: {what} (tensor {idx} '{b.tensor(idx).name}') must be a constant",
            op.where,
        )
    return np.asarray(value).astype(np.int64)


class KernelState:
    """State a TFLM kernel keeps in its own buffers between invocations (a noise estimate, a
    circular buffer): under --state-io a graph input ``name`` and an output ``<name>_next``
    (``tflite2qonnx.state``, record kind ``kernel_state``), else the reset value ``initial``
    as a constant and the model reported stateful."""

    def __init__(self, b: GraphBuilder, op: Operator, name: str, initial: np.ndarray) -> None:
        tensors = {b.tensor_name(t.index) for t in b.subgraph.tensors}
        while name in tensors:  # a TFLite tensor's name is bound to it at the end
            name += "_state"
        self.b, self.key = b, ("tflm_signal", name)
        if b.states.enabled and b.nested:
            raise ConversionError(
                f"{op.name} inside an IF or WHILE subgraph: its state cannot be a graph input "
                "and output (--state-io)",
                op.where,
            )
        if b.states.enabled:
            if self.key in b.states.resources:
                raise ConversionError(f"{op.name}: a second state named '{name}'", op.where)
            self.before = resource_state(b, self.key, initial, kind="kernel_state")
        else:
            b.states.kernel_states.append(name)
            self.before = b.const(initial, name)

    def after(self, value: str) -> None:
        """The state's value after the call (of the initial value's type)."""
        if self.b.states.enabled:
            resource_value(self.b, self.key, value)
