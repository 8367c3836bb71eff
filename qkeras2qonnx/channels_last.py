"""Optional channels-last output: qonnx's own ConvertToChannelsLastAndClean on the finished
(already qonnx-cleaned) model.

tf2onnx writes Keras's NHWC graph as NCHW ops between transposes; qonnx's transformation
turns those ops into its channels-last custom ops and removes the transposes it can, so the
input keeps Keras's NHWC layout. It needs every shape static (hence a fixed batch) and
explicit ``pads`` on Conv and MaxPool nodes, which ``convert_keras`` writes on every output.
Graph I/O and quantizer node names are kept.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.passes import PassResult


def to_channels_last(model: onnx.ModelProto) -> PassResult:
    """The channels-last form of a finished (static-shape) model."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean

    try:
        wrapper = ModelWrapper(model)
        # make_input_channels_last would permute our input, which is NHWC already.
        wrapper = wrapper.transform(ConvertToChannelsLastAndClean(make_input_channels_last=False))
    except Exception as exc:  # qonnx raises bare exceptions; name the stage that failed
        message = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise ConversionError(f"qonnx's channels-last transformation failed: {message}") from exc
    model = wrapper.model
    _drop_identity_input_pair(model.graph)
    return model, True


def _drop_identity_input_pair(graph: onnx.GraphProto) -> None:
    """Remove a graph input's Reshape -> Transpose that together leave it unchanged.

    tf2onnx writes a one-channel NHWC -> NCHW input transpose as a Reshape; qonnx's pass then
    puts a Transpose back after it. The pair is a no-op that hls4ml's io_stream Reshape
    handling trips over.
    """
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    shapes = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
              for vi in (*graph.input, *graph.value_info, *graph.output)}  # fmt: skip
    for vi in graph.input:
        readers = [n for n in graph.node if vi.name in n.input]
        if len(readers) != 1 or readers[0].op_type != "Reshape":
            continue
        reshape = readers[0]
        after = [n for n in graph.node if reshape.output[0] in n.input]
        target = inits.get(reshape.input[1]) if len(reshape.input) > 1 else None
        if len(after) != 1 or after[0].op_type != "Transpose" or target is None:
            continue
        transpose = after[0]
        shape = shapes.get(vi.name)
        if not shape or 0 in shape or shapes.get(transpose.output[0]) != shape:
            continue
        perm = next((list(a.ints) for a in transpose.attribute if a.name == "perm"), None)
        size = int(np.prod(shape))
        moved = np.transpose(np.arange(size).reshape(np.where(target == 0, shape, target)), perm)
        if perm is None or not np.array_equal(moved.ravel(), np.arange(size)):
            continue
        if transpose.output[0] in {o.name for o in graph.output}:
            continue
        for node in graph.node:
            node.input[:] = [vi.name if i == transpose.output[0] else i for i in node.input]
        graph.node.remove(reshape)
        graph.node.remove(transpose)


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
