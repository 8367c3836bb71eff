"""int16 EXP, LOG, GELU and RSQRT as TFLite's builtin kernels compute them: an interpolated table.

Their Prepare fills a 513-entry int16 table with LUTPopulate<int16_t> (``lut_populate``: the
float function at 512 steps over the input range, each entry biased by half the interpolation
error at the step's midpoint, all in float32) and Eval reads it with LUTLookup:

    i = 256 + (q >> 7);  t = q & 127                     q: the stored int16 input
    out = int16(lut[i] + ((int16(lut[i + 1] - lut[i]) * t + 64) >> 7))

The functions: EXP ``std::exp``; LOG ``x <= 0 ? -32768 * s_out : std::log(x)``; RSQRT
``x <= 0 ? 32767 * s_out : 1.0f / std::sqrt(x)``; GELU
``0.5f * x * (1.f + std::erf(x * M_SQRT1_2))`` (``approximate``: the tanh form), the int8
tables' (``exact_tables_extra``); the C library's expf / logf / erf / tanhf. Rounding the
function once instead was up to 163 (EXP), 17290 (LOG), 9755 (RSQRT) and 2 (GELU) steps off.

In the graph: the table built here from the op's scales; ``i`` and ``t`` from Floor(q / 128),
two Gathers (``128 lut[i] + 64`` and the int16-wrapped slope), ``Floor((B + S t) / 128)``,
every value an integer below 2^23 in float32 (exact), then the int16 wrap where the table's
steps make the kernel's sum leave int16 (found over every input here; steep tables only).
It runs by default too (their records' ``int16`` kernel runs BY_DEFAULT).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.fixed_point import Grid, cast, grid, raw_integers
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.exact.int8_math_tables import gelu_erf, gelu_tanh
from tflite2qonnx.ops.exact.int8_tables import std_round
from tflite2qonnx.ops.exact.table_gather import c_float_fn

_F32 = np.float32
_ALL_INT16 = np.arange(-(1 << 15), 1 << 15, dtype=np.int64)


def lut_populate(fn, in_scale: float, in_zp: int, out_scale: float, out_zp: int) -> np.ndarray:
    """TFLite's int16 LUTPopulate: 512 samples of ``fn`` over the int16 input range, each
    biased by half the error of linear interpolation at the step's midpoint, plus the value at
    the range's end (for the last slope). Every step in float32, as the kernel's.

    Where ``fn`` overflows (expf past 88.7) the entry follows IEEE arithmetic: inf clamps to
    the table's ends, and a NaN (inf - inf) converts to 0, as x86's and Arm's float-to-int
    conversions leave it after the kernel's cast to int16."""
    in_scale, out_scale = _F32(in_scale), _F32(out_scale)
    in_min, in_max = (_F32(in_scale * _F32(q - in_zp)) for q in (-32768, 32767))
    out_min, out_max = (_F32(out_scale * _F32(q - out_zp)) for q in (-32768, 32767))
    step = _F32((in_max - in_min) / _F32(512))
    half = _F32(step / _F32(2))
    inv = _F32(_F32(65536) / _F32(out_max - out_min))
    i = np.arange(513).astype(_F32)
    x = (in_min + (i * step).astype(_F32)).astype(_F32)
    with np.errstate(over="ignore", invalid="ignore"):
        val, nxt = fn(x[:-1]), fn(x[1:])
        mid = fn((x[:-1] + half).astype(_F32))
        sample = std_round((val * inv).astype(_F32))
        interp = ((nxt * inv).astype(_F32) + sample).astype(_F32)
        interp = std_round((interp / _F32(2)).astype(_F32))
        bias = std_round(((interp - std_round((mid * inv).astype(_F32))) / 2).astype(_F32))
        last = std_round((fn(np.array([in_max], _F32)) * inv).astype(_F32))
        lut = np.clip(np.concatenate([sample - bias, last]), -32768, 32767)
    return np.where(np.isnan(lut), 0, lut).astype(np.int64)


def _wrap16(x: np.ndarray) -> np.ndarray:
    """The int16 a C cast keeps of each integer (two's complement)."""
    return ((np.asarray(x, np.int64) + 32768) % 65536) - 32768


def _interpolate(v: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """LUTLookup before its cast: entry ``256 + v >> 7`` plus the int16 slope to the next
    entry times the low 7 bits, rounded half up at 2^-7."""
    v = np.asarray(v, np.int64)
    base = lut[256 + (v >> 7)]
    slope = _wrap16(lut[257 + (v >> 7)] - base)
    return base + ((slope * (v & 0x7F) + 64) >> 7)


def table_lookup16(v: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """LUTLookup: the interpolated entry, cast to int16."""
    return _wrap16(_interpolate(v, lut))


def c_expf(x: np.ndarray) -> np.ndarray:
    """The C library's expf, as the kernels call it (numpy's exp may differ by an ulp)."""
    return c_float_fn("expf", x)


def _log(out_scale: float) -> Callable[[np.ndarray], np.ndarray]:
    """LogLUTPrepare's function: logf, and the output's lowest real value at x <= 0."""
    lowest = _F32(_F32(-32768) * _F32(out_scale))

    def log(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, _F32)
        positive = c_float_fn("logf", np.where(x > 0, x, _F32(1)))
        return np.where(x > 0, positive, lowest).astype(_F32)

    return log


def _rsqrt(out_scale: float) -> Callable[[np.ndarray], np.ndarray]:
    """RsqrtPrepare's function: 1.0f / sqrtf(x) (both correctly rounded, as numpy's float32
    ops are), and the output's highest real value at x <= 0."""
    highest = _F32(_F32(32767) * _F32(out_scale))

    def rsqrt(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, _F32)
        positive = _F32(1) / np.sqrt(np.where(x > 0, x, _F32(1)))
        return np.where(x > 0, positive, highest).astype(_F32)

    return rsqrt


def kernel_table(op: Operator, g_in: Grid, g_out: Grid) -> np.ndarray:
    """The 513 entries op's Prepare computes for these grids (zero points 0)."""
    if op.name == "EXP":
        fn = c_expf
    elif op.name == "LOG":
        fn = _log(g_out.scale)
    elif op.name == "RSQRT":
        fn = _rsqrt(g_out.scale)
    else:
        fn = gelu_tanh if op.options.get("approximate") else gelu_erf
    return lut_populate(fn, g_in.scale, 0, g_out.scale, 0)


def convert(b: GraphBuilder, op: Operator) -> None:
    where = op.where
    out = b.tensor(op.outputs[0])
    if out.dtype != "int16":  # LOG's Prepare refuses it, EXP's writes int16 into it anyway
        raise ConversionError(f"int16 {op.name}: the output is {out.dtype}, not int16", where)
    q, g_in = raw_integers(b, op.inputs[0], where)
    g_out = grid(b, op.outputs[0], where)
    lut = kernel_table(op, g_in, g_out)
    base, slope = lut[:-1], _wrap16(np.diff(lut))

    def c(value, hint: str) -> str:
        return b.const(np.asarray(value, _F32), hint)

    high = b.emit("Floor", [b.emit("Mul", [q, c(2.0**-7, "inv_step")])[0]])[0]
    low = b.emit("Sub", [q, b.emit("Mul", [high, c(128.0, "step")])[0]])[0]
    idx = cast(b, b.emit("Add", [high, c(256.0, "middle")])[0], TensorProto.INT64)
    name = op.name.lower()
    entry = b.emit("Gather", [c(128 * base + 64, f"{name}_lut_base"), idx], axis=0)[0]
    step = b.emit("Gather", [c(slope, f"{name}_lut_slope"), idx], axis=0)[0]
    total = b.emit("Add", [entry, b.emit("Mul", [step, low])[0]])[0]
    r = b.emit("Floor", [b.emit("Mul", [total, c(2.0**-7, "inv_step")])[0]])[0]
    unwrapped = _interpolate(_ALL_INT16, lut)
    if unwrapped.min() < -32768 or unwrapped.max() > 32767:
        shifted = b.emit("Add", [r, c(32768.0, "half_range")])[0]
        turns = b.emit("Floor", [b.emit("Mul", [shifted, c(2.0**-16, "inv_range")])[0]])[0]
        r = b.emit("Sub", [r, b.emit("Mul", [turns, c(65536.0, "range")])[0]])[0]
    y = b.emit("Mul", [r, c(g_out.scale, "output_scale")])[0]
    b.set_output(op.outputs[0], y)
