"""A quantized convolution's / fully-connected layer's bias in the units its kernel adds it.

TFLite's integer kernels add the stored int32 bias to the accumulator ``sum (x - zp) * w``,
whose unit is ``s_in * s_w[c]``, whatever scale the bias tensor records. Converters write
that scale, and so read the bias as ``q * s_bias``; exporters that share one bias tensor among
layers on different input grids (MediaPipe Model Maker's RetinaNet heads) record a scale that
fits only one of them, and the others computed wrong numbers (up to 33 steps). Here the bias
is the stored integers on the grid ``s_in * s_w[c]``, as the builtin kernels and XNNPACK
both read it.
"""

from __future__ import annotations

import numpy as np

from tflite2qonnx.dtypes import INT8_TYPES
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import ROUNDING_MODE, Operator


def kernel_bias(b: GraphBuilder, op: Operator, bias_idx: int, weights_idx: int) -> str:
    """The bias operand: its own Quant where its recorded scale is the kernel's unit (or the
    op is no integer kernel's), else its integers on the grid ``s_in * s_w``."""
    unit = _kernel_unit(b, op.inputs[0], weights_idx, bias_idx)
    if unit is None:
        return b.input(bias_idx)
    q = np.asarray(b.tensor(bias_idx).data).astype(np.float64).reshape(-1)
    real = (q * unit.astype(np.float64)).astype(np.float32)
    raw = b.const(real, f"{b.tensor_name(bias_idx)}_float")
    per_axis = unit.size > 1
    return b.quant(
        raw,
        b.tensor_name(bias_idx),
        (q.size,),
        scale=unit if per_axis else unit.reshape(()),
        zero_point=0.0,
        bit_width=32,
        signed=True,
        narrow=False,
        axis=0 if per_axis else None,
        rounding_mode=ROUNDING_MODE,
    )


def _kernel_unit(b: GraphBuilder, x_idx: int, w_idx: int, bias_idx: int) -> np.ndarray | None:
    """``s_in * s_w`` (float32, one per output channel or one) where the bias is a constant
    integer tensor of an integer kernel and its recorded scale differs from it, else None."""
    x, w, bias = b.tensor(x_idx), b.tensor(w_idx), b.tensor(bias_idx)
    if bias.dtype != "int32" or bias.data is None or bias.quantization is None:
        return None
    if x.dtype not in INT8_TYPES or x.quantization is None or w.quantization is None:
        return None
    if len(x.quantization.scale) != 1:
        return None
    s_w = np.asarray(w.quantization.scale, np.float64).reshape(-1)
    unit = (float(np.float32(x.quantization.scale[0])) * s_w.astype(np.float32)).astype(np.float32)
    recorded = np.asarray(bias.quantization.scale, np.float32).reshape(-1)
    n = int(np.prod(bias.shape)) if bias.shape else 1
    if unit.size not in (1, n) or recorded.size not in (1, n):
        return None
    if np.allclose(np.broadcast_to(recorded, unit.shape), unit, rtol=1e-5, atol=0.0):
        return None  # the usual file: converted as written
    return unit
