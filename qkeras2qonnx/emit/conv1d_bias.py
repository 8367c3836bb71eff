"""A 1-D Conv's bias as the Conv's third input, not an Add after it.

tf2onnx writes Keras's Conv1D bias as an Add on the Squeeze's output, so the rank-3 form
(``conv1d_as_rank3``) has ``Conv -> Add(bias of shape (1, C, 1))``. With a quantized bias that
operand is a Quant's output, and qonnx 1.0's ConvertToChannelsLastAndClean never returns on
it: for rank-3 tensors the to-channels-first and to-channels-last permutations are the same
(0, 2, 1), so MoveChanFirstDownstream moves the Conv's output Transpose past the Add, puts
the inverse (again (0, 2, 1)) on the bias, then moves that one past the Add, and so on, one
Transpose more per round. As the Conv's bias input (which that pass leaves alone) the graph
is the one tf2onnx writes for a 2-D Conv. Conv computes its sums and then adds the bias, as
the Add did. One pass over the graph, indexes built once.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from qonnx_ingest.graph_edit import set_nodes
from qonnx_ingest.names import TakenNames, unique_name
from qonnx_ingest.passes import PassResult

_QUANTIZERS = ("Quant", "IntQuant", "BipolarQuant")


def fold_conv1d_bias(model: onnx.ModelProto) -> PassResult:
    """Move every per-channel constant or quantized-constant Add after a rank-3 Conv (or, in a
    source-order graph, after a rank-3 or rank-4 Conv's Transpose to channels-last) into the
    Conv's bias input, in place. Drops the value info of the tensors whose
    shape changes: run shape inference (``finish_model``) afterwards."""
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    shapes = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in (*graph.input, *graph.value_info, *graph.output)
        if v.type.tensor_type.HasField("shape")
    }
    outputs = {v.name for v in graph.output}
    producers = {name: node for node in graph.node for name in node.output}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    taken = TakenNames({*inits, *producers, *readers, *outputs})
    removed: set[int] = set()
    stale: set[str] = set()
    for conv in graph.node:
        if conv.op_type != "Conv" or len(conv.input) != 2 or conv.output[0] in outputs:
            continue
        found = readers.get(conv.output[0], [])
        moved = _to_channels_last(found, outputs)  # source order: NWC / NHWC after it
        if moved is None:
            out = shapes.get(conv.output[0])
            if out is None or len(out) != 3:
                continue
            channels, shapes_ok = out[1], _FIRST_SHAPES
        else:
            found = readers.get(moved.output[0], [])
            last = shapes.get(moved.output[0])  # the Conv's own output may be new: no shape yet
            if last is None or len(last) not in (3, 4):
                continue
            channels, shapes_ok = last[-1], _LAST_SHAPES
        if len(found) != 1 or found[0].op_type != "Add":
            continue
        add = found[0]
        added = conv.output[0] if moved is None else moved.output[0]
        other = add.input[1] if add.input[0] == added else add.input[0]
        if other == added or other in outputs or len(readers.get(other, [])) != 1:
            continue
        shapes_ok = _LAST_SHAPES if moved is not None else _FIRST_SHAPES
        source = _bias_source(other, inits, producers, readers, channels, shapes_ok)
        if source is None:
            continue
        node, slots = source
        for slot in slots:
            name = node.input[slot] if node is not None else other
            value = numpy_helper.to_array(inits[name])
            if value.size == 1 and slot:
                continue  # a quantizer's single scale / zero point / bit width stays
            renamed = unique_name(f"{name}_c", taken)
            graph.initializer.append(numpy_helper.from_array(value.reshape(-1).copy(), renamed))
            if node is None:
                other = renamed
            else:
                node.input[slot] = renamed
        stale.update((other, added))
        conv.input.append(other)
        (conv if moved is None else moved).output[0] = add.output[0]
        removed.add(id(add))
    if removed:
        set_nodes(graph, (n for n in graph.node if id(n) not in removed), stale)
    return model, bool(removed)


def _bias_source(
    name: str,
    inits: dict[str, onnx.TensorProto],
    producers: dict[str, onnx.NodeProto],
    readers: dict[str, list[onnx.NodeProto]],
    channels: int,
    shapes: tuple,
) -> tuple[onnx.NodeProto | None, list[int]] | None:
    """(None, [0]) for a per-channel initializer; (quantizer, its input slots) for a
    quantizer of per-channel initializers read only there; None otherwise. Per-channel:
    shape (1, C, 1) or (C, 1) on the Conv's output, (C,), (1, 1, C) or (1, 1, 1, C) after a
    Transpose to channels-last,
    which add along the Conv's channel axis as a (C,) bias does."""
    if name in inits:
        return (None, [0]) if _per_channel(inits[name], channels, shapes) else None
    node = producers.get(name)
    if node is None or node.op_type not in _QUANTIZERS or len(node.output) != 1:
        return None
    if not all(i in inits and len(readers.get(i, [])) == 1 for i in node.input[:1]):
        return None
    if not _per_channel(inits[node.input[0]], channels, shapes):
        return None
    for param in node.input[1:]:
        if param not in inits:
            return None
        size = int(np.prod(inits[param].dims))
        if size != 1 and not _per_channel(inits[param], channels, shapes):
            return None
    # the value and any per-channel parameter become (C,); those read elsewhere stay shared
    slots = [0] + [
        i
        for i, p in enumerate(node.input[1:], 1)
        if int(np.prod(inits[p].dims)) != 1 and len(readers.get(p, [])) == 1
    ]
    if any(
        int(np.prod(inits[p].dims)) != 1 and len(readers.get(p, [])) != 1 for p in node.input[1:]
    ):
        return None
    return node, slots


_FIRST_SHAPES = ((1, -1, 1), (-1, 1))  # -1: the channel count
_LAST_SHAPES = ((-1,), (1, 1, -1), (1, 1, 1, -1))


def _per_channel(tensor: onnx.TensorProto, channels: int, shapes: tuple) -> bool:
    return tuple(tensor.dims) in {tuple(channels if d < 0 else d for d in s) for s in shapes}


def _to_channels_last(found: list[onnx.NodeProto], outputs: set[str]) -> onnx.NodeProto | None:
    """The Conv's one reader when it is a Transpose to channels-last of rank 3 or 4 whose
    output is not a graph output."""
    if len(found) != 1 or found[0].op_type != "Transpose" or found[0].output[0] in outputs:
        return None
    perm = [list(a.ints) for a in found[0].attribute if a.name == "perm"]
    return found[0] if perm in ([[0, 2, 1]], [[0, 2, 3, 1]]) else None
