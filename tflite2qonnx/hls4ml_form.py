"""``hls4ml_compatible``: an explicit opt-in that turns a channels-last TFLite conversion into
the form hls4ml 1.3.0's QONNX frontend reads, with one documented deviation.

* Rounding: TFLite rounds half away from zero (our Quant ``HALF_UP``); hls4ml knows only ROUND
  (half to even) and FLOOR (``_calculate_precision_quantizer`` in
  hls4ml/model/optimizer/passes/quant_opt.py raises NotImplementedError for any other).
  Each activation Quant's ``HALF_UP`` becomes ``ROUND``: the two differ only where a value
  lies exactly halfway between two steps. That deviation is the only one, and
  ``tflite2qonnx.reference.verify`` still passes (the tests run it on the interpreter).
* Everything else is the exact hls4ml form (``qonnx_ingest.targets.hls4ml.to_hls4ml``, what
  ``--format hls4ml`` writes): each constant Quant (weights, biases, with TFLite's
  non-power-of-two and per-channel scales) as its already-quantized values on one
  power-of-two grid, which hls4ml reads as a plain fixed-point constant.
"""

from __future__ import annotations

import json

import onnx
from onnx import helper

from qonnx_ingest.errors import InputError

HLS4ML_KEY = "tflite2qonnx.hls4ml"
_QUANTS = ("Quant", "IntQuant")


def hls4ml_compatible(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of a ``convert(..., channels_last=True)`` result in the form hls4ml reads."""
    from qonnx_ingest.targets.hls4ml import to_hls4ml

    if any(
        n.domain in ("", "ai.onnx") and n.op_type in ("Conv", "MaxPool") for n in model.graph.node
    ):
        raise InputError("hls4ml_compatible needs a channels-last conversion (channels_last=True)")
    out = onnx.ModelProto()
    out.CopyFrom(model)
    constants = {t.name for t in out.graph.initializer}
    rounded = 0
    for node in out.graph.node:
        if node.op_type not in _QUANTS or node.input[0] in constants:
            continue
        for attr in node.attribute:
            if attr.name == "rounding_mode" and attr.s == b"HALF_UP":
                attr.s = b"ROUND"
                rounded += 1
    before = {n.output[0]: n for n in out.graph.node}
    out = to_hls4ml(out)
    regridded = sum(
        1
        for n in out.graph.node
        if n.output[0] in before and list(n.input) != list(before[n.output[0]].input)
    )
    helper.set_model_props(
        out,
        {
            **{p.key: p.value for p in out.metadata_props},
            HLS4ML_KEY: json.dumps(
                {
                    "rounding HALF_UP to ROUND": rounded,
                    "constant Quant on a power-of-two grid": regridded,
                }
            ),
        },
    )
    return out
