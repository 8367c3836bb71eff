"""RESIZE_BILINEAR (uint8) as TFLite's builtin kernel computes it: in float32, not fixed point.

uint8 does not run ResizeBilinearInteger (int8 / int16, ``exact_resize``) but the float template
reference_ops::ResizeBilinear<uint8_t>: per output row ``input_y = y * scale`` (half_pixel_centers:
``(y + 0.5f) * scale - 0.5f``) with the float32 ``scale = in / out`` (align_corners: ``(in - 1) /
(out - 1)``), corners ``y0 = max(floor(input_y), 0)``, ``y1 = min(ceil(input_y), in - 1)``, then
per element, in this order and each step rounded to float32,
``q00 * (1 - dy) * (1 - dx) + q10 * dy * (1 - dx) + q01 * (1 - dy) * dx + q11 * dy * dx + 0.5f``
truncated to uint8 (``dy = input_y - y0``). The optimized resolver's kernel sums the corners in
another order with the weight products formed first: a step apart on ~1% of half-pixel and
align-corners outputs (measured); --verify and the tests run the reference resolver.

In ONNX: the weights are float32 constants computed here with the kernel's float32 steps; the
graph repeats the per-element float32 products and sums in the kernel's order (IEEE float32
Mul / Add are exact replicas), then Floor (the sum is never below -0.5: truncation is floor).
"""

from __future__ import annotations

import numpy as np

from tflite2qonnx.fixed_point import Grid
from tflite2qonnx.graph import GraphBuilder

F32 = np.float32


def axis_weights(
    in_size: int, out_size: int, align_corners: bool, half_pixel: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(lower index, upper index, 1 - d, d) per output position, d = input_y - y0 in float32."""
    scale = F32(in_size) / F32(out_size)
    if align_corners and out_size > 1:
        scale = F32(in_size - 1) / F32(out_size - 1)
    v = np.arange(out_size).astype(F32)
    scaled = (v + F32(0.5)) * scale - F32(0.5) if half_pixel else v * scale
    lower = np.maximum(np.floor(scaled).astype(np.int64), 0)
    upper = np.minimum(np.ceil(scaled).astype(np.int64), in_size - 1)
    d = (scaled - lower.astype(F32)).astype(F32)
    return lower, upper, (F32(1) - d).astype(F32), d


def resize_bilinear(
    b: GraphBuilder, x_raw: str, in_hw, out_hw, align: bool, half: bool, g_out: Grid
) -> str:
    """The output's real values from the input's stored integers ``x_raw`` (float32, NHWC)."""
    ys = axis_weights(in_hw[0], out_hw[0], align, half)
    xs = axis_weights(in_hw[1], out_hw[1], align, half)
    rows = {k: b.emit("Gather", [x_raw, b.const(ys[k], "rows")], axis=1)[0] for k in (0, 1)}
    total = None
    # the kernel's order: (y0, x0), (y1, x0), (y0, x1), (y1, x1)
    for xk, yk in ((0, 0), (0, 1), (1, 0), (1, 1)):
        corner = b.emit("Gather", [rows[yk], b.const(xs[xk], "columns")], axis=2)[0]
        wy = b.const(ys[2 + yk].reshape(1, -1, 1, 1), "row_weight")
        wx = b.const(xs[2 + xk].reshape(1, 1, -1, 1), "column_weight")
        term = b.emit("Mul", [b.emit("Mul", [corner, wy])[0], wx])[0]
        total = term if total is None else b.emit("Add", [total, term])[0]
    total = b.emit("Add", [total, b.const(np.array(0.5, F32), "half")])[0]
    k = b.emit("Floor", [total])[0]
    if g_out.zero_point:
        k = b.emit("Sub", [k, b.const(np.array(g_out.zero_point, F32), "zero_point")])[0]
    return b.emit("Mul", [k, b.const(np.array(g_out.scale, F32), "output_scale")])[0]
