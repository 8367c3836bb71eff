"""Optional channels-last output: qonnx's own ConvertToChannelsLastAndClean on the finished
(already qonnx-cleaned) model.

tf2onnx writes Keras's NHWC graph as NCHW ops between transposes; qonnx's transformation
turns those ops into its channels-last custom ops and removes the transposes it can, so the
input keeps Keras's NHWC layout. It needs every shape static (hence a fixed batch) and
explicit ``pads`` on Conv and MaxPool nodes. Graph I/O and quantizer node names are kept.
"""

from __future__ import annotations

import onnx
from onnx import helper

from qonnx_ingest.errors import ConversionError


def to_channels_last(model: onnx.ModelProto) -> onnx.ModelProto:
    """The channels-last form of a finished (static-shape) model."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean

    _explicit_pads(model.graph)
    try:
        wrapper = ModelWrapper(model)
        # make_input_channels_last would permute our input, which is NHWC already.
        wrapper = wrapper.transform(ConvertToChannelsLastAndClean(make_input_channels_last=False))
    except Exception as exc:  # qonnx raises bare exceptions; name the stage that failed
        message = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise ConversionError(f"qonnx's channels-last transformation failed: {message}") from exc
    return wrapper.model


def _explicit_pads(graph: onnx.GraphProto) -> None:
    """qonnx's channels-last Conv and MaxPool require ``pads``; ONNX defaults them to zeros."""
    for node in graph.node:
        if node.op_type not in ("Conv", "MaxPool"):
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
