"""RESIZE_BILINEAR (int8, and int16 by default too) as TFLite's builtin kernel computes it
(uint8 runs a float32 kernel: ``exact.resize_uint8``).

reference_ops::ResizeBilinearInteger works in 10-bit fixed point: per output row (and column)
``scaled = y * scale_10`` (half_pixel_centers: ``+ scale_10 / 2 - 512``) with ``scale_10 =
round(1024 * in / out)`` (align_corners: ``(in - 1) / (out - 1)``), corners ``y0 = max(scaled /
1024, 0)`` and ``y1 = min((scaled + 1023) / 1024, in - 1)`` (C division), weights ``1024 -
(scaled - 1024 y0)`` and ``scaled - 1024 y0``. The four corner products of the raw integers sum
to a 2^20-scaled value, rounded half away from zero; the integers are copied onto the output's
grid without requantization. int16 runs the same ResizeBilinearInteger (its four products
stay below 2^35, exact in float64); rounding the real interpolation once was up to 68 steps
off it (the kernel's 10-bit weights), so int16 runs it by default too.

In ONNX: Gathers of the corner rows and columns (constant indices), products with the
constant integer weights and their sum in float64 (below 2^29: exact), and the rounding.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.fixed_point import cast, f64, grid, raw_integers
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.exact import resize_uint8 as exact_resize_uint8


def _c_div(a: np.ndarray, d: int) -> np.ndarray:
    """C integer division (truncates toward zero)."""
    return np.where(a >= 0, a // d, -((-a) // d))


def axis_corners(
    in_size: int, out_size: int, align_corners: bool, half_pixel: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(lower index, upper index, lower weight, upper weight) per output position."""
    scale_10 = ((1 << 10) * in_size + out_size // 2) // out_size
    if align_corners and out_size > 1:
        scale_10 = ((1 << 10) * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    v = np.arange(out_size, dtype=np.int64)
    scaled = v * scale_10 + (scale_10 // 2 - (1 << 9) if half_pixel else 0)
    lower = np.maximum(_c_div(scaled, 1 << 10), 0)
    upper = np.minimum(_c_div(scaled + (1 << 10) - 1, 1 << 10), in_size - 1)
    frac = scaled - (1 << 10) * lower
    return lower, upper, (1 << 10) - frac, frac


def resize_bilinear(b: GraphBuilder, op: Operator) -> None:
    where = op.where
    dtype = b.tensor(op.inputs[0]).dtype
    if dtype not in ("int8", "int16", "uint8"):
        raise ConversionError(f"bit_exact: {dtype} RESIZE_BILINEAR is not emulated", where)
    x_raw, _ = raw_integers(b, op.inputs[0], where)
    g_out = grid(b, op.outputs[0], where)
    in_shape, out_shape = b.tensor(op.inputs[0]).shape, b.tensor(op.outputs[0]).shape
    if min(*in_shape[1:3], *out_shape[1:3]) <= 0:
        raise ConversionError("bit_exact: RESIZE_BILINEAR needs static spatial dims", where)
    align = bool(op.options.get("align_corners", False))
    half = bool(op.options.get("half_pixel_centers", False))
    if dtype == "uint8":  # another kernel: float32 arithmetic
        y = exact_resize_uint8.resize_bilinear(
            b, x_raw, in_shape[1:3], out_shape[1:3], align, half, g_out
        )
        b.set_output(op.outputs[0], y)
        return
    ys = axis_corners(in_shape[1], out_shape[1], align, half)
    xs = axis_corners(in_shape[2], out_shape[2], align, half)
    x64 = cast(b, x_raw, TensorProto.DOUBLE)
    rows = [b.emit("Gather", [x64, b.const(idx, "rows")], axis=1)[0] for idx in (ys[0], ys[1])]
    terms = []
    for row, wy in zip(rows, (ys[2], ys[3]), strict=True):
        for idx, wx in ((xs[0], xs[2]), (xs[1], xs[3])):
            corner = b.emit("Gather", [row, b.const(idx, "columns")], axis=2)[0]
            weight = (wy[:, None] * wx[None, :]).reshape(1, len(wy), len(wx), 1)
            terms.append(b.emit("Mul", [corner, f64(b, weight, "weight")])[0])
    total = b.emit("Sum", terms)[0]
    scaled = b.emit("Mul", [total, f64(b, 2.0**-20, "pot")])[0]
    magnitude = b.emit("Add", [b.emit("Abs", [scaled])[0], f64(b, 0.5, "half")])[0]
    k = b.emit("Mul", [b.emit("Sign", [scaled])[0], b.emit("Floor", [magnitude])[0]])[0]
    k = cast(b, k, TensorProto.FLOAT)
    if g_out.zero_point:
        zp = b.const(np.array(g_out.zero_point, np.float32), "zero_point")
        k = b.emit("Sub", [k, zp])[0]
    y = b.emit("Mul", [k, b.const(np.array(g_out.scale, np.float32), "output_scale")])[0]
    b.set_output(op.outputs[0], y)
