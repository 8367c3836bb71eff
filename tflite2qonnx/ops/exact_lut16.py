"""int16 kernels that read an interpolated LUTPopulate table (RSQRT), exactly.

TFLite's int16 table kernels do not evaluate their function per input: Prepare samples it
513 times over the input range (LUTPopulate<int16_t>, float32 arithmetic, each sample nudged
by half its interpolation error at the segment's midpoint) and Eval interpolates linearly
between two entries (LUTLookup: ``lut[256 + (q >> 7)]`` plus ``(slope * (q & 127) + 64) >> 7``,
the slope and the sum wrapped to int16). Rounding the real function once was up to 9755 steps
off int16 RSQRT: the interpolation is nowhere near the function where it is steep.

The kernel's output depends on the stored input only, so it converts as a Gather on the
65,536-entry table computed here in numpy from that arithmetic (never from running TFLite),
by default and under --bit-exact (``fixed_point.INT16_KERNELS``). Measured: 100% equal to the
interpreter over every int16 input (``tests/tflite2qonnx/test_int16_lut_kernels.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tflite2qonnx.fixed_point import Grid
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.exact_lut import unary_table

_F32 = np.float32
_STEPS = 512  # LUTPopulate<int16_t>'s segments (513 entries: the last one for the slope)


def _round(x) -> np.float32:
    """TfLiteRound (std::round) of a float32: half away from zero (exact in float64)."""
    v = float(_F32(x))
    return _F32(np.sign(v) * np.floor(abs(v) + 0.5))


def populate(fn: Callable[[np.float32], np.float32], g_in: Grid, g_out: Grid) -> np.ndarray:
    """LUTPopulate<int16_t>(s_in, zp_in, s_out, zp_out, fn): the 513 entries, as int64.

    Every step is float32 as in the kernel (``i * step`` is a float product, ``fn`` a float
    function); ``fn`` gets and returns np.float32 scalars.
    """
    s_in, s_out = _F32(g_in.scale), _F32(g_out.scale)
    in_min = _F32(s_in * _F32(-32768 - g_in.zero_point))
    in_max = _F32(s_in * _F32(32767 - g_in.zero_point))
    out_min = _F32(s_out * _F32(-32768 - g_out.zero_point))
    out_max = _F32(s_out * _F32(32767 - g_out.zero_point))
    step = _F32((in_max - in_min) / _F32(_STEPS))
    half_step = _F32(step / _F32(2))
    scaling_inv = _F32(_F32(65536) / _F32(out_max - out_min))
    lut = np.empty(_STEPS + 1, np.int64)
    for i in range(_STEPS):
        x = _F32(in_min + _F32(_F32(i) * step))
        val = fn(x)
        val_mid = fn(_F32(x + half_step))
        val_next = fn(_F32(in_min + _F32(_F32(i + 1) * step)))
        sample = _round(_F32(val * scaling_inv))
        interp = _round(_F32(_F32(_F32(val_next * scaling_inv) + sample) / _F32(2)))
        bias = _round(_F32(_F32(interp - _round(_F32(val_mid * scaling_inv))) / _F32(2)))
        lut[i] = int(min(max(float(_F32(sample - bias)), -32768.0), 32767.0))
    last = _round(_F32(fn(in_max) * scaling_inv))
    lut[_STEPS] = int(min(max(float(last), -32768.0), 32767.0))
    return lut


def _wrap16(v: np.ndarray) -> np.ndarray:
    return ((np.asarray(v, np.int64) + 32768) % 65536) - 32768


def lookup(q: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """LUTLookup on int16 inputs: the interpolated entry, wrapped to int16 as the kernel's
    int16 slope and result are."""
    q = np.asarray(q, np.int64)
    index = 256 + (q >> 7)
    slope = _wrap16(lut[index + 1] - lut[index])
    return _wrap16(lut[index] + ((slope * (q & 0x7F) + 64) >> 7))


def _rsqrt(s_out: float) -> Callable[[np.float32], np.float32]:
    """RSQRT's table function: ``1.0f / std::sqrt(x)``; ``x <= 0`` gives ``32767 * s_out``."""
    at_zero = _F32(_F32(32767) * _F32(s_out))

    def fn(x: np.float32) -> np.float32:
        return at_zero if x <= 0 else _F32(_F32(1) / np.sqrt(_F32(x)))

    return fn


def rsqrt_table(q: np.ndarray, g_in: Grid, g_out: Grid) -> np.ndarray:
    """int16 RSQRT (RsqrtEvalQuantizedInt16) on each stored input. Negative inputs make the
    kernel fail, so their entries are never read by a model the interpreter runs."""
    return lookup(q, populate(_rsqrt(g_out.scale), g_in, g_out))


_TABLES = {"RSQRT": rsqrt_table}


def convert(b: GraphBuilder, op: Operator) -> None:
    """``op`` (int16 in and out, zero points 0: ``fixed_point.grid`` checks them) as its table."""
    unary_table(b, op, _TABLES[op.name])
