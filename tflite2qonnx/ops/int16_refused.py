"""int16 kernels converted neither exactly nor within a step: refused by default too.

On hand-built 16x8 models (``tests/tflite2qonnx/int16_op_models.py``) rounding the real
function once was this far from TFLite's builtin int16 kernels, which interpolate their own
lookup tables (EXP, LOG, GELU); the default resolver's kernels agree with the reference ones.
A converted model would be silently wrong, so it is a ConversionError naming the operator
instead (int16 RSQRT, PRELU and DIV are emulated: ``exact_lut16``, ``exact_prelu16``,
``exact_div16``). (int16 SUM is not here: the reference kernel's output is wrong, as for
int8, and the default resolver's equals the single rounding.)
"""

from __future__ import annotations

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.record import Converter

# operator -> (measured max steps off, what the kernel does)
_WHY = {
    "EXP": (163, "its int16 lookup table"),
    "LOG": (17290, "its int16 lookup table"),
    "GELU": (2, "its int16 lookup table"),
}


def unless_int16(name: str, convert: Converter) -> Converter:
    """``convert``, refusing an operator whose first input is a quantized int16 tensor."""
    steps, what = _WHY[name]

    def guarded(b: GraphBuilder, op: Operator) -> None:
        t = b.tensor(op.inputs[0]) if op.inputs and op.inputs[0] >= 0 else None
        if t is not None and t.dtype == "int16" and t.integer_quantized:
            raise ConversionError(
                f"int16 {name} is not supported: {what} is not emulated, and rounding the "
                f"real function once was up to {steps} steps off it",
                op.where,
            )
        convert(b, op)

    guarded.__doc__ = convert.__doc__
    return guarded
