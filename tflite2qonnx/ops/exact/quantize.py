"""--bit-exact for QUANTIZE from float onto a grid with a zero point: TFLite computes
``zp + round(x / s)`` (half away from zero), Quant ``round(x / s + zp)``, which differ on the
ties between 0 and -zp (x / s = -2.5, zp = 5: 2 against 3)."""

from __future__ import annotations

import numpy as np

from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator


def rounds_first(b: GraphBuilder, op: Operator) -> bool:
    """Whether ``op`` quantizes a float onto a per-tensor grid with a nonzero zero point
    (elsewhere Quant's rounding is TFLite's)."""
    src, dst = b.tensor(op.inputs[0]), b.tensor(op.outputs[0])
    args = dst.quant
    if src.quant is not None or args is None or args.axis is not None:
        return False
    return bool(np.any(np.asarray(args.zero_point) != 0))


def quantize(b: GraphBuilder, op: Operator) -> None:
    """The rounding first, on the output's scale with no zero point and 32 bits; the output's
    Quant is then the identity on its result."""
    dst = b.tensor(op.outputs[0])
    rounded = b.quant(
        b.input(op.inputs[0]),
        "rounded",
        dst.shape,
        scale=np.float32(np.asarray(dst.quant.scale).reshape(())),
        bit_width=32,
        signed=True,
        rounding_mode="HALF_UP",
    )
    b.set_output(op.outputs[0], rounded)
