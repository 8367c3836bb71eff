"""1-D convolutions and poolings as ONNX's own 1-D Conv / MaxPool / AveragePool.

tf2onnx writes a Keras Conv1D / SeparableConv1D / MaxPooling1D / AveragePooling1D as its
TensorFlow lowering: ``Unsqueeze -> (Transpose) -> 2-D Conv/MaxPool with a size-1 axis ->
(Transpose) -> Squeeze`` (a transpose moving only the size-1 axis written as a Reshape).
hls4ml's ONNX frontend has no handler for Unsqueeze, so this pass writes each such chain as the
same operators on the rank-3 tensor (the Unsqueeze/Transpose/Squeeze around becoming one
Transpose or nothing), the weights and their quantizers' per-channel parameters losing the
size-1 axis. It rewrites only an exact match (the axis unsqueezed is the one squeezed, size 1
in every kernel, stride and dilation 1, no padding on it); anything else is left as it is.
One pass over the graph, indexes built once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.graph_edit import set_nodes
from qonnx_ingest.names import TakenNames, unique_name
from qonnx_ingest.passes import PassResult
from qonnx_ingest.quant import QUANT_OP_TYPES

_SPATIAL_OPS = ("Conv", "MaxPool", "AveragePool")
_PER_AXIS = ("kernel_shape", "strides", "dilations")
_IDENTITY3 = [0, 1, 2]
_MOVES = ("Transpose", "Reshape")


@dataclass
class _Chain:
    """One matched Unsqueeze ... Squeeze chain and what its rewrite needs."""

    unsqueeze: onnx.NodeProto
    squeeze: onnx.NodeProto
    ops: list[onnx.NodeProto]
    dropped: list[onnx.NodeProto]  # Unsqueeze, Transposes, Squeeze
    axis: int  # the size-1 axis (2 or 3) in the 4-D operators' NCHW layout
    enter: list[int]  # 3-D permutation from the Unsqueeze input to the operators' NCW input
    leave: list[int]  # 3-D permutation from the operators' NCW output to the Squeeze output
    weights: list[tuple[onnx.NodeProto, onnx.NodeProto | None]] = field(default_factory=list)


class _Graph:
    """Dict indexes over one graph, built once."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self.graph = graph
        self.inits = {t.name: t for t in graph.initializer}
        infos = (*graph.input, *graph.value_info, *graph.output)
        self.shapes = {
            v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in infos
            if v.type.tensor_type.HasField("shape")
        }
        self.outputs = {v.name for v in graph.output}
        self.producers: dict[str, onnx.NodeProto] = {}
        self.consumers: dict[str, list[onnx.NodeProto]] = {}
        for node in graph.node:
            for name in node.output:
                self.producers[name] = node
            for name in node.input:
                if name:
                    self.consumers.setdefault(name, []).append(node)

    def only_reader(self, tensor: str) -> onnx.NodeProto | None:
        """The single node reading ``tensor`` (None if it is read twice or is a graph output)."""
        readers = self.consumers.get(tensor, [])
        if tensor in self.outputs or len(readers) != 1:
            return None
        return readers[0]

    def ints(self, node: onnx.NodeProto, name: str, index: int) -> list[int] | None:
        """An int-list attribute, or (opset 13 form) a constant input."""
        for attr in node.attribute:
            if attr.name == name:
                return list(attr.ints)
        if len(node.input) > index and node.input[index] in self.inits:
            return [int(v) for v in numpy_helper.to_array(self.inits[node.input[index]]).ravel()]
        return None


def conv1d_as_rank3(model: onnx.ModelProto) -> PassResult:
    """Rewrite every exactly matching 2-D-with-a-size-1-axis chain in place.

    Needs shapes on the tensors (a finished model); value info of the tensors whose shape
    changes is dropped, so run shape inference (``finish_model``) afterwards."""
    graph = model.graph
    index = _Graph(graph)
    chains = [c for n in graph.node if n.op_type == "Unsqueeze" for c in [_match(index, n)] if c]
    if not chains:
        return model, False
    taken = TakenNames(
        {t.name for t in graph.initializer}
        | {name for node in graph.node for name in (*node.input, *node.output)}
        | {v.name for v in (*graph.input, *graph.output)}
    )
    stale: set[str] = set()
    replace: dict[int, list[onnx.NodeProto]] = {}
    for chain in chains:
        before, after = _rewrite(index, chain, taken, stale)
        for node in chain.dropped:
            replace[id(node)] = []
        replace[id(chain.unsqueeze)] = before
        replace[id(chain.squeeze)] = after
    set_nodes(graph, [new for node in graph.node for new in replace.get(id(node), [node])], stale)
    return model, True


def _match(index: _Graph, unsqueeze: onnx.NodeProto) -> _Chain | None:
    """The chain starting at ``unsqueeze`` if every piece matches exactly, else None."""
    axes = index.ints(unsqueeze, "axes", 1)
    if axes is None or len(axes) != 1 or len(index.shapes.get(unsqueeze.input[0], ())) != 3:
        return None
    axis = axes[0] + 4 if axes[0] < 0 else axes[0]
    labels: list[int | None] = [0, 1, 2]  # the input's axes as they move; None: the new one
    labels.insert(axis, None)
    dropped, ops = [unsqueeze], []
    node = index.only_reader(unsqueeze.output[0])
    if node is not None and node.op_type in _MOVES:
        labels = _moved(index, node, labels)
        dropped.append(node)
        node = index.only_reader(node.output[0]) if labels else None
    if not labels:
        return None
    axis = labels.index(None)
    enter = [label for label in labels if label is not None]
    while node is not None and node.op_type in _SPATIAL_OPS:
        if axis not in (2, 3) or not _flat_on(index, node, axis - 2):
            return None
        ops.append(node)
        node = index.only_reader(node.output[0])
    if not ops:
        return None
    labels = [0, 1, 2]
    labels.insert(axis, None)
    if node is not None and node.op_type in _MOVES:
        labels = _moved(index, node, labels)
        dropped.append(node)
        node = index.only_reader(node.output[0]) if labels else None
    if node is None or node.op_type != "Squeeze" or not labels:
        return None
    squeezed = index.ints(node, "axes", 1)
    if squeezed is None or len(squeezed) != 1 or labels[squeezed[0] % 4] is not None:
        return None
    dropped.append(node)
    chain = _Chain(unsqueeze, node, ops, dropped, axis, enter, [x for x in labels if x is not None])
    for op in ops:
        if op.op_type == "Conv":
            weight = _weight_source(index, op, axis)
            if weight is None:
                return None
            chain.weights.append((op, weight))
    return chain


def _moved(index: _Graph, node: onnx.NodeProto, labels: list) -> list:
    """``labels`` (the 4-D tensor's axes, None the size-1 one) after a Transpose, or after a
    Reshape that is a transpose (tf2onnx writes one moving size-1 axes so); [] if
    ``node`` is neither."""
    if node.op_type == "Transpose":
        perm = index.ints(node, "perm", 99)
        if perm is None or sorted(perm) != [0, 1, 2, 3]:
            return []
        return [labels[p] for p in perm]
    before, after = index.shapes.get(node.input[0]), index.shapes.get(node.output[0])
    if before is None or after is None or len(before) != 4 or len(after) != 4:
        return []
    if labels[0] != 0 or any(d <= 0 for d in (*before[1:], *after[1:])):  # batch first
        return []
    # A reshape keeps the elements' order: it is a transpose exactly when the axes longer
    # than 1 keep theirs; the size-1 axes (the unsqueezed one last) fill the other places.
    longer = [label for label, d in zip(labels[1:], before[1:], strict=True) if d != 1]
    single = [label for label, d in zip(labels[1:], before[1:], strict=True) if d == 1]
    single.sort(key=lambda label: label is None)  # the unsqueezed axis takes the last place
    if [d for d in before[1:] if d != 1] != [d for d in after[1:] if d != 1]:
        return []
    moved = [0]
    for d in after[1:]:
        moved.append((longer if d != 1 else single).pop(0))
    return moved


def _flat_on(index: _Graph, node: onnx.NodeProto, k: int) -> bool:
    """Whether ``node`` (4-D) does nothing along spatial axis ``k``: kernel, stride and
    dilation 1, no padding, one output, no auto_pad."""
    if len(node.output) != 1:
        return False
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", b"VALID", "NOTSET", "VALID"):
        return False
    for name in _PER_AXIS:
        value = attrs.get(name)
        if value is not None and (len(value) != 2 or value[k] != 1):
            return False
    pads = attrs.get("pads")
    if pads is not None and (len(pads) != 4 or pads[k] != 0 or pads[k + 2] != 0):
        return False
    if node.op_type == "Conv":
        weight = index.inits.get(node.input[1])
        producer = index.producers.get(node.input[1])
        if weight is None and producer is not None and producer.op_type in QUANT_OP_TYPES:
            weight = index.inits.get(producer.input[0])
        return weight is not None and len(weight.dims) == 4 and weight.dims[2 + k] == 1
    return "kernel_shape" in attrs


def _weight_source(index: _Graph, conv: onnx.NodeProto, axis: int) -> onnx.NodeProto | None:
    """The weight initializer's reader if the Conv reads it directly (the Conv itself) or
    through a quantizer of initializers read by this Conv alone (the quantizer); else None."""
    if conv.input[1] in index.inits:
        return conv
    quant = index.producers.get(conv.input[1])
    if quant is None or quant.op_type not in QUANT_OP_TYPES:
        return None
    if index.only_reader(quant.output[0]) is not conv or quant.input[0] not in index.inits:
        return None
    for name in quant.input[1:]:
        if name not in index.inits:
            return None
        if _param_1d(numpy_helper.to_array(index.inits[name]), axis) is None:
            return None
    return quant


def _param_1d(value: np.ndarray, axis: int) -> np.ndarray | None:
    """A quantizer parameter broadcast against the 4-D weight, for the 3-D one (None: no
    exact form): single values stay, rank-4 ones lose ``axis``."""
    if value.size == 1 and value.ndim <= 3:
        return value
    if value.ndim == 4 and value.shape[axis] == 1:
        return np.squeeze(value, axis=axis)
    return None


def _rewrite(
    index: _Graph, chain: _Chain, taken: TakenNames, stale: set[str]
) -> tuple[list[onnx.NodeProto], list[onnx.NodeProto]]:
    """Edit the chain's operators in place; return the nodes standing in for the Unsqueeze
    (an entry Transpose, or none) and for the Squeeze (an exit Transpose, or none)."""
    graph, k = index.graph, chain.axis - 2
    first, last = chain.ops[0], chain.ops[-1]
    for node in chain.dropped:
        stale.update(node.output)
    for op in chain.ops:
        stale.update(op.output)
        _drop_axis_attributes(op, k)
    for conv, source in chain.weights:
        stale.add(conv.input[1])
        names = conv.input[1:2] if source is conv else source.input
        slot = 1 if source is conv else 0
        for i, name in enumerate(names):
            value = numpy_helper.to_array(index.inits[name])
            new = np.squeeze(value, axis=chain.axis) if i == 0 else _param_1d(value, chain.axis)
            if new is value:
                continue
            renamed = unique_name(f"{name}_1d", taken)
            graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(new), renamed))
            source.input[slot + i] = renamed
    before: list[onnx.NodeProto] = []
    source_tensor = chain.unsqueeze.input[0]
    if chain.enter != _IDENTITY3:
        moved = unique_name(f"{first.output[0]}_ncw", taken)
        before.append(_transpose(source_tensor, moved, chain.enter, moved))
        source_tensor = moved
    first.input[0] = source_tensor
    after: list[onnx.NodeProto] = []
    result = chain.squeeze.output[0]
    if chain.leave != _IDENTITY3:
        produced = unique_name(f"{last.output[0]}_ncw", taken)
        after.append(_transpose(produced, result, chain.leave, produced))
        last.output[0] = produced
    else:
        last.output[0] = result
    stale.discard(result)  # its shape is the Squeeze's, unchanged
    return before, after


def _transpose(src: str, dst: str, perm, name: str) -> onnx.NodeProto:
    return helper.make_node("Transpose", [src], [dst], perm=perm, name=name + "_perm")


def _drop_axis_attributes(node: onnx.NodeProto, k: int) -> None:
    """The 2-D attributes of ``node`` without spatial axis ``k``."""
    for attr in node.attribute:
        if attr.name in _PER_AXIS:
            values = list(attr.ints)
            del values[k]
            attr.CopyFrom(helper.make_attribute(attr.name, values))
        elif attr.name == "pads":
            values = list(attr.ints)
            attr.CopyFrom(helper.make_attribute("pads", [values[1 - k], values[3 - k]]))
