"""ReduceMean / ReduceMax over every spatial axis of a source-order (NWC / NHWC) tensor as
ONNX's GlobalAveragePool / GlobalMaxPool between a Transpose to channels-first and, keeping
the dims, one back (else a Squeeze of the spatial axes).

tf2onnx's global-pool optimizer writes this form on its channels-first graph; without its
transpose optimizer (QKeras's channels-last output) the Reduce op stays. hls4ml parses global
pools, not Reduce ops, so the channels-last output keeps the default output's form. A mean or
max over the same elements: exact.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from layout.channels_last import to_last, transpose_node
from layout.graph import get_attr
from layout.orders import channels_first
from qonnx_ingest.passes import PassResult

GLOBAL_POOLS = {"ReduceMean": "GlobalAveragePool", "ReduceMax": "GlobalMaxPool"}
RANKS = (3, 4)


def source_global_pools(model: onnx.ModelProto) -> PassResult:
    """Each spatial Reduce of ``GLOBAL_POOLS`` as its global pool, in place (needs shapes on
    record: run after finishing)."""
    graph = model.graph
    ranks = {
        vi.name: len(vi.type.tensor_type.shape.dim)
        for vi in (*graph.input, *graph.value_info)
        if vi.type.tensor_type.HasField("shape")
    }
    inits = {t.name: t for t in graph.initializer}
    nodes: list[onnx.NodeProto] = []
    modified = False
    for node in graph.node:
        pool = GLOBAL_POOLS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        rank = ranks.get(node.input[0]) if node.input else None
        axes = _axes(node, inits) if pool and rank in RANKS else None
        if axes is None or sorted(a % rank for a in axes) != list(range(1, rank - 1)):
            nodes.append(node)
            continue
        name = node.output[0]
        first, pooled = f"{name}_nchw_in", f"{name}_nchw"
        nodes.append(transpose_node(node.input[0], first, channels_first(rank)))
        nodes.append(helper.make_node(pool, [first], [pooled], name=node.name or name))
        if get_attr(node, "keepdims", 1):
            nodes.append(transpose_node(pooled, name, to_last(rank)))
        else:
            squeezed = f"{name}_squeeze_axes"
            graph.initializer.append(
                numpy_helper.from_array(np.arange(2, rank, dtype=np.int64), squeezed)
            )
            nodes.append(helper.make_node("Squeeze", [pooled, squeezed], [name]))
        modified = True
    if modified:
        del graph.node[:]
        graph.node.extend(nodes)
    return model, modified


def _axes(node: onnx.NodeProto, inits: dict[str, onnx.TensorProto]) -> list[int] | None:
    """The reduced axes, from the attribute or (opset 18) a constant input; None if unknown."""
    if len(node.input) > 1 and node.input[1]:
        found = inits.get(node.input[1])
        return None if found is None else [int(a) for a in numpy_helper.to_array(found).ravel()]
    axes = get_attr(node, "axes", None)
    return None if not axes else [int(a) for a in axes]
