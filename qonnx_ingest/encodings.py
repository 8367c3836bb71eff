"""AIMET quantization encodings, version 2.0.0 (seed 001), from a QONNX model.

Version 2.0.0 maps each encoding onto an ``onnx::QuantizeLinear``: ``y_scale``,
``y_zero_point`` and ``axis`` as QuantizeLinear reads them, ``output_dtype`` the storage type.
Each entry names the tensor a Quant node quantizes (its input), which is the tensor a runtime
that applies the encodings to the float graph would quantize. The file is
``{"version": "2.0.0", "encodings": [...]}``.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx

from qonnx_ingest.errors import ConversionError, ConversionWarning
from qonnx_ingest.names import name_list, readable
from qonnx_ingest.quant_info import ACTIVATION, INPUT, QuantizedTensor, quantized_tensors

VERSION = "2.0.0"
# The storage widths AIMET 2.0.0 names (int2..int32 / uint2..uint32).
AIMET_WIDTHS = (2, 4, 8, 16, 32)


def aimet_encodings(model: onnx.ModelProto, strict: bool = False) -> dict:
    """The encodings document.

    What AIMET 2.0.0 cannot state exactly is written in the nearest form AIMET has and listed
    in one warning, or refused when ``strict``: a bit width without an AIMET dtype (3, 5, 6
    bits ...) takes the next wider dtype, a narrow activation range loses its clip bound, and a
    bipolar {-s, +s} becomes the int2 custom grid (zero point -0.5 on scale 2s) of which it is a
    subset.
    """
    entries, inexact = [], {}
    for q in quantized_tensors(model):
        entry, why = _entry(q)
        entries.append(entry)
        if why:
            inexact.setdefault(why, []).append(q.tensor)
    if inexact:
        count = sum(len(names) for names in inexact.values())
        message = f"{count} quantized tensors have no exact AIMET encoding: " + "; ".join(
            f"{readable(names[0])} ({why})" if len(names) == 1 else f"{why}: {name_list(names)}"
            for why, names in inexact.items()
        )
        if strict:
            raise ConversionError(message + " (--strict refuses them)", "encodings")
        warnings.warn(message + "; written in the nearest AIMET form", ConversionWarning, 2)
    return {"version": VERSION, "encodings": entries}


def _entry(q: QuantizedTensor) -> tuple[dict, str | None]:
    """The encoding of ``q`` and, where it is not exact, why."""
    where = f"{q.op_type} {readable(q.node or q.output)}"
    bits = q.integer_bits
    why = None
    if q.bipolar:
        width, zero_point, scale = 2, np.full_like(q.scale, -0.5), q.scale * 2.0
        why = "bipolar -> int2 custom grid"
    elif bits is None:
        raise ConversionError(f"fractional bit width {q.bit_width:g} has no encoding", where)
    elif bits > AIMET_WIDTHS[-1]:
        raise ConversionError(f"{bits}-bit quantization has no AIMET dtype", where)
    else:
        width = next(w for w in AIMET_WIDTHS if w >= bits)
        zero_point, scale = q.zero_point, q.scale
        if width != bits:
            why = f"{bits} bits -> {'int' if q.signed else 'uint'}{width}"
        elif q.narrow and q.role in (ACTIVATION, INPUT):  # a constant's values never reach it
            lo, hi = q.storage_range
            why = f"narrow range [{lo}, {hi}] -> full {'int' if q.signed else 'uint'}{width}"
    entry: dict = {
        "name": q.tensor,
        "output_dtype": f"{'int' if q.signed else 'uint'}{width}",
        "y_scale": _values(scale, q.per_axis, float),
    }
    if np.any(zero_point != 0):
        entry["y_zero_point"] = _values(zero_point, q.per_axis, float if q.bipolar else int)
    if q.per_axis:
        entry["axis"] = int(q.axis)
    return entry, why


def _values(a: np.ndarray, per_axis: bool, cast) -> float | int | list:
    values = [cast(np.float32(v)) if cast is float else cast(v) for v in a]
    return values if per_axis else values[0]
