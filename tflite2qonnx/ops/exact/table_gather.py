"""Lookup tables for --bit-exact: an int8 / uint8 kernel whose output element depends on one
input element only is a function of 256 integers, so it becomes a Gather on a constant table
indexed by the stored input integer (TFLite itself evaluates LOGISTIC, TANH, HARD_SWISH, ...
per element, some through its own tables).

The table holds the output's real values ``s_out * (q_out - zp_out)``; the output's Quant node
is then the identity. Each kernel's table comes from that kernel's arithmetic in numpy
(``tflite2qonnx.ops.exact_kernels``), never from running TFLite.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable
from functools import cache

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.fixed_point import Grid, cast, grid, raw_integers
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator


def storage_range(g: Grid) -> np.ndarray:
    """Every stored integer of grid ``g``, ascending, as int64."""
    lo = -(1 << (g.bits - 1)) if g.signed else 0
    return np.arange(lo, lo + (1 << g.bits), dtype=np.int64)


def lookup(b: GraphBuilder, x_raw: str, first: int, values: np.ndarray, hint: str) -> str:
    """``values[x_raw - first]`` for an integer-valued float32 ``x_raw``: a Gather."""
    idx = x_raw
    if first:
        idx = b.emit("Sub", [x_raw, b.const(np.array(first, np.float32), f"{hint}_first")])[0]
    idx = cast(b, idx, TensorProto.INT64)
    table = b.const(np.asarray(values, np.float32), f"{hint}_table")
    return b.emit("Gather", [table, idx], axis=0)[0]


def unary_table(
    b: GraphBuilder, op: Operator, kernel: Callable[[np.ndarray, Grid, Grid], np.ndarray]
) -> None:
    """Convert ``op`` as ``q_out = kernel(q_in, g_in, g_out)`` over every stored input."""
    where = op.where
    x_raw, g_in = raw_integers(b, op.inputs[0], where)
    g_out = grid(b, op.outputs[0], where)
    q_in = storage_range(g_in)
    try:
        q_out = np.asarray(kernel(q_in, g_in, g_out), np.int64)
    except ConversionError as exc:
        raise ConversionError(exc.message, where) from None
    lo, hi = storage_range(g_out)[[0, -1]]
    if q_out.shape != q_in.shape or q_out.min() < lo or q_out.max() > hi:
        raise ConversionError(f"bit_exact: {op.name} table leaves the output range", where)
    real = np.float32(g_out.scale) * (q_out - g_out.zero_point).astype(np.float32)
    b.set_output(op.outputs[0], lookup(b, x_raw, int(q_in[0]), real, op.name.lower()))


@cache
def libm():
    """The C math library, for the kernels' float functions (expf, logf, erf, tanhf)."""
    name = ctypes.util.find_library("m") or "libm.so.6"
    try:
        lib = ctypes.CDLL(name)
    except OSError as exc:  # pragma: no cover - every libc-based platform has one
        raise ConversionError(f"bit_exact: cannot load the C math library ({exc})") from None
    for fn in ("expf", "tanhf", "logf"):
        getattr(lib, fn).restype = ctypes.c_float
        getattr(lib, fn).argtypes = [ctypes.c_float]
    return lib


def c_float_fn(name: str, x: np.ndarray) -> np.ndarray:
    """The C library's float function ``name`` (expf, tanhf, logf) on each float32 of ``x``.

    TFLite's float tables call these; they are not correctly rounded (glibc's expf differs
    from the correctly rounded value on about 1 float in 2,000), so numpy's cannot stand in.
    """
    fn = getattr(libm(), name)
    flat = np.asarray(x, np.float32).reshape(-1)
    return np.array([fn(float(v)) for v in flat], np.float32).reshape(np.shape(x))
