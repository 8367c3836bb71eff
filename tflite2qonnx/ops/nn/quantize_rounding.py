"""QUANTIZE's default int8 / uint8 kernel: the requantization between int8 / uint8 grids rounded
as the builtin kernel's ``MultiplyByQuantizedMultiplier`` rounds it, twice where ``s_in / s_out``
shifts right (``ops.kernel_rounding``; XNNPACK rounds once: 58% equal to the builtin kernel
where the ratio is 0.5). Its record runs it by default where ``requantize_rounds_twice`` holds
(``ops.dispatch``), so the converter holds the single Quant only; --bit-exact runs the
emulated table before it.
"""

from __future__ import annotations

import numpy as np

from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.kernel_rounding import int8_scales, round_as_kernel, shifts_right


def _multiplier(b: GraphBuilder, op: Operator) -> tuple[float, float] | None:
    """``s_in / s_out`` (in double) and ``s_out`` from an int8 / uint8 per-tensor input onto
    an int8 / uint8 per-tensor output, else None."""
    scales = int8_scales(b, op, 1) if b.tensor(op.inputs[0]).integer_quantized else None
    if scales is None:
        return None
    s_in, s_out = scales
    return float(np.float64(s_in) / np.float64(s_out)), s_out


def requantize_rounds_twice(b: GraphBuilder, op: Operator) -> bool:
    """The kernel's ``when``: an int8 / uint8 requantization whose multiplier shifts right."""
    m = _multiplier(b, op)
    return m is not None and shifts_right(m[0])


def quantize(b: GraphBuilder, op: Operator) -> None:
    """int8 / uint8 to int8 / uint8, rounded twice as the kernel rounds it."""
    x = b.input(op.inputs[0])
    multiplier, s_out = _multiplier(b, op)
    b.set_output(op.outputs[0], round_as_kernel(b, x, multiplier, s_out, "requantized"))
