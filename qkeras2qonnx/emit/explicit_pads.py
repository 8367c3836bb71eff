"""Explicit ``pads`` on Conv and pooling nodes, which the channels-last output needs.

``convert(..., channels_last=True)`` has tf2onnx keep Keras's NHWC order (no transpose
optimizer: each Conv/pool between a Transpose to channels-first and one back) and writes
qonnx's channels-last ops with ``layout.channels_last.fuse_channels_last``, the pass the
TFLite side uses, instead of running qonnx's slow ``ConvertToChannelsLastAndClean``.
"""

from __future__ import annotations

import onnx
from onnx import helper

from qonnx_ingest.passes import PassResult


def explicit_pads(model: onnx.ModelProto) -> PassResult:
    """Write ONNX's default zero ``pads`` on Conv and pooling nodes: qonnx's channels-last ops
    and hls4ml's QONNX frontend require the attribute."""
    modified = False
    for node in model.graph.node:
        if node.op_type not in ("Conv", "ConvTranspose", "MaxPool", "AveragePool"):
            continue
        attrs = {a.name: a for a in node.attribute}
        if "pads" in attrs:
            continue
        auto_pad = attrs.get("auto_pad")
        if auto_pad is not None and auto_pad.s not in (b"", b"NOTSET", b"VALID"):
            continue  # SAME_*: leave it to qonnx (which then reports what it lacks)
        if "kernel_shape" not in attrs:
            continue
        rank = len(helper.get_attribute_value(attrs["kernel_shape"]))
        node.attribute.append(helper.make_attribute("pads", [0] * (2 * rank)))
        modified = True
    return model, modified
