"""``hls4ml_compatible``: an explicit opt-in that turns a channels-last TFLite conversion into
the form hls4ml 1.3.0's QONNX frontend reads, exact where it can be proven and otherwise with
one documented, named deviation.

* It is the hls4ml form (``qonnx_ingest.targets.hls4ml.to_hls4ml``, what ``--format hls4ml``
  writes): each constant Quant (weights, biases, with TFLite's non-power-of-two and per-channel
  scales) as its already-quantized values on one power-of-two grid, which hls4ml reads as a
  plain fixed-point constant; and each activation Quant rounding half away from zero
  (``HALF_UP``, TFLite's requantization) written as ROUND or FLOOR wherever that is provably
  the same function (``qonnx_ingest.targets.hls4ml_rounding``: no tie reachable, or the ties
  moot behind a clip at zero).
* The deviation: an activation HALF_UP Quant no rule proves, which ``--format hls4ml``
  refuses, is written ROUND (half to even), different only at values exactly halfway between
  two steps. Each is named under the ``tflite2qonnx.hls4ml`` metadata key, with the rule that
  proved every other one.
"""

from __future__ import annotations

import json

import onnx
from onnx import helper

from qonnx_ingest.errors import InputError

HLS4ML_KEY = "tflite2qonnx.hls4ml"


def hls4ml_compatible(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of a ``convert(..., channels_last=True)`` result in the form hls4ml reads."""
    from qonnx_ingest.targets.hls4ml import DEVIATED, EXACT, FORM_KEY, REGRIDDED, to_hls4ml

    if any(
        n.domain in ("", "ai.onnx") and n.op_type in ("Conv", "MaxPool") for n in model.graph.node
    ):
        raise InputError("hls4ml_compatible needs a channels-last conversion (channels_last=True)")
    out = to_hls4ml(model, round_unproven_ties=True)
    props = {p.key: p.value for p in out.metadata_props}
    record = json.loads(props.get(FORM_KEY, "{}"))
    summary = {
        "HALF_UP proven exact": record.get(EXACT, {}),
        "HALF_UP to ROUND, ties may differ": record.get(DEVIATED, []),
        "constant Quant on a power-of-two grid": record.get(REGRIDDED, 0),
    }
    helper.set_model_props(out, {**props, HLS4ML_KEY: json.dumps(summary)})
    return out
