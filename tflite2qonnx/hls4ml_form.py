"""``hls4ml_compatible``: an explicit opt-in that turns a channels-last TFLite conversion into
the form hls4ml 1.3.0's QONNX frontend reads, with one documented deviation.

* Rounding: TFLite rounds half away from zero (our Quant ``HALF_UP``); hls4ml knows only ROUND
  (half to even) and FLOOR (``_calculate_precision_quantizer`` in
  hls4ml/model/optimizer/passes/quant_opt.py raises NotImplementedError for any other).
  ``HALF_UP`` becomes ``ROUND``: the two differ only where a value lies exactly halfway
  between two steps. That deviation is the only one, and ``tflite2qonnx.reference.verify``
  still passes (the tests run it on the interpreter).
* Bias quantizers: a Quant of a constant bias with TFLite's (not power-of-two) scale becomes,
  in hls4ml, a Constant + ApplyAlpha that no pass folds into its Dense or Conv; hls4ml's
  ``InferPrecisionTypes`` then fails with IndexError on that Constant. The bias values are
  already on their int32 grid, so the Quant is the identity: the bias is read directly
  (exactly the same values; refused when a value is not on its grid).
"""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.errors import ConversionError, InputError

HLS4ML_KEY = "tflite2qonnx.hls4ml"
_QUANTS = ("Quant", "IntQuant")


def hls4ml_compatible(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of a ``convert(..., channels_last=True)`` result in the form hls4ml reads."""
    from qonnx.custom_op.general.quant import quant

    if any(
        n.domain in ("", "ai.onnx") and n.op_type in ("Conv", "MaxPool") for n in model.graph.node
    ):
        raise InputError("hls4ml_compatible needs a channels-last conversion (channels_last=True)")
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inits = {t.name: t for t in graph.initializer}
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in graph.node:
        for slot, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, slot))
    rounded = dropped = 0
    for node in list(graph.node):
        if node.op_type not in _QUANTS:
            continue
        attrs = {a.name: a for a in node.attribute}
        mode = attrs.get("rounding_mode")
        if mode is not None and mode.s == b"HALF_UP":
            mode.s = b"ROUND"
            rounded += 1
        readers = consumers.get(node.output[0], [])
        if node.input[0] not in inits or not readers or not all(map(_reads_bias, readers)):
            continue
        x, scale, zeropt, bits = (_array(inits, name, node) for name in node.input[:4])
        signed = helper.get_attribute_value(attrs["signed"]) if "signed" in attrs else 1
        narrow = helper.get_attribute_value(attrs["narrow"]) if "narrow" in attrs else 0
        q = quant(x, scale, zeropt, bits, signed, narrow, "ROUND")
        if not np.array_equal(np.broadcast_to(q, x.shape), x):
            raise ConversionError("a bias value is not on its quantizer's grid", node.input[0])
        for reader, slot in readers:
            reader.input[slot] = node.input[0]
        graph.node.remove(node)
        dropped += 1
    helper.set_model_props(
        out,
        {
            **{p.key: p.value for p in out.metadata_props},
            HLS4ML_KEY: json.dumps(
                {"rounding HALF_UP to ROUND": rounded, "bias Quant dropped": dropped}
            ),
        },
    )
    return out


def _reads_bias(reader: tuple[onnx.NodeProto, int]) -> bool:
    node, slot = reader
    return (node.op_type == "Conv" and slot == 2) or node.op_type == "Add"


def _array(inits, name: str, node: onnx.NodeProto) -> np.ndarray:
    if name not in inits:
        raise ConversionError(f"{node.op_type} parameter is not a constant", name)
    return numpy_helper.to_array(inits[name])
