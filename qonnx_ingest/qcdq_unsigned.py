"""int8 QuantizeLinear / DequantizeLinear stored as uint8 at opset 21 and later, so that a
default onnxruntime session loads the QCDQ model.

onnxruntime's QDQ propagation (graph optimization level 2, the default) copies a per-tensor
Q/DQ pair through Reshape, Transpose, Squeeze, Unsqueeze, Slice and MaxPool. From opset 21 it
gives the Q it inserts an ``output_dtype`` attribute, and onnxruntime 1.31's type check then
refuses any int8 one: ``output_dtype INT8 does not match y_zero_point type UINT8`` (uint8 and
int16 pass). The session never opens (the Coral LSTM and DTLN, whose int16 cell states lift
the model to opset 21).

An int8 grid is a uint8 grid shifted by 128, exactly: ``sat_u8(round(x/s) + z + 128)`` is
``sat_i8(round(x/s) + z) + 128`` and dequantizes with zero point ``z + 128`` to the same real
value. So at opset >= 21 every per-tensor int8 chain (QuantizeLinear -> [Clip] ->
DequantizeLinear, or an int8 constant -> DequantizeLinear) is stored as uint8: zero points
and Clip bounds plus 128, constants plus 128. Per-axis chains (weights) stay int8: onnxruntime
propagates only scalar scales and zero points.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from qonnx_ingest.finish import remove_unused_tensors, subgraph_reads
from qonnx_ingest.graph_edit import readers_of, replace_nodes
from qonnx_ingest.names import TakenNames, unique_name
from qonnx_ingest.passes import PassResult

# the first default-domain opset whose QuantizeLinear onnxruntime propagates with output_dtype
PROPAGATES_OUTPUT_DTYPE = 21
_SHIFT = 128


def store_int8_as_uint8(model: onnx.ModelProto) -> PassResult:
    """Rewrite ``model``'s per-tensor int8 Q/DQ chains as uint8 in place when its opset is 21
    or later."""
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if opset < PROPAGATES_OUTPUT_DTYPE:
        return model, False
    graph = model.graph
    values = _constant_values(graph)
    readers = readers_of(graph)
    outputs = {o.name for o in graph.output} | subgraph_reads(graph)
    inits = {t.name: t for t in graph.initializer}
    chains = []  # (zero-point readers, clips, int8 tensors, int8 initializers)
    for node in graph.node:
        if node.op_type == "QuantizeLinear" and _int8_scalar(values, node, 2):
            found = _chain(node.output[0], readers, values, outputs)
            if found is not None:
                clips, dequantizes = found
                tensors = [node.output[0], *(c.output[0] for c in clips)]
                chains.append(([node, *dequantizes], clips, tensors, []))
        elif node.op_type == "DequantizeLinear" and _int8_constant(node.input[0], inits, outputs):
            dequantizes = readers[node.input[0]]
            if dequantizes[0] is node and all(
                r.op_type == "DequantizeLinear" and r.input[0] == node.input[0]
                and _int8_scalar(values, r, 2) for r in dequantizes
            ):  # fmt: skip
                chains.append((dequantizes, [], [], [inits[node.input[0]]]))
    taken = TakenNames(
        {n.name for n in graph.node} | {o for n in graph.node for o in n.output} | set(inits)
    )
    retyped: set[str] = set()
    for zero_point_readers, clips, tensors, constants in chains:
        for reader in zero_point_readers:
            reader.input[2] = _add(graph, _shifted(values[reader.input[2]]), reader, taken)
        for clip in clips:
            for k in (1, 2):
                clip.input[k] = _add(graph, _shifted(values[clip.input[k]]), clip, taken)
        for init in constants:
            init.CopyFrom(numpy_helper.from_array(_shifted(numpy_helper.to_array(init)), init.name))
        retyped.update(tensors)
    if chains:
        for vi in graph.value_info:  # the rewritten integer tensors are uint8 now
            if vi.name in retyped and vi.type.tensor_type.elem_type == TensorProto.INT8:
                vi.type.tensor_type.elem_type = TensorProto.UINT8
        _drop_unread_constants(model)
    return model, bool(chains)


def _int8_constant(name: str, inits: dict, outputs: set) -> bool:
    init = inits.get(name)
    return init is not None and init.data_type == TensorProto.INT8 and name not in outputs


def _constant_values(graph: onnx.GraphProto) -> dict[str, np.ndarray | None]:
    values: dict[str, np.ndarray | None] = {
        t.name: numpy_helper.to_array(t) for t in graph.initializer
    }
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            values[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    return values


def _int8_scalar(values: dict, node: onnx.NodeProto, k: int) -> bool:
    """Whether input ``k`` of ``node`` is a one-element int8 constant."""
    if len(node.input) <= k:
        return False
    value = values.get(node.input[k])
    return value is not None and value.dtype == np.int8 and value.size == 1


def _chain(tensor: str, readers: dict, values: dict, outputs: set) -> tuple[list, list] | None:
    """The Clips and DequantizeLinears reading the int8 ``tensor`` (through those Clips), or
    None when anything else reads it (then its storage type is part of the interface)."""
    clips, dequantizes, pending = [], [], [tensor]
    while pending:
        name = pending.pop()
        if name in outputs:
            return None
        for reader in readers.get(name, []):
            if reader.op_type == "DequantizeLinear" and _int8_scalar(values, reader, 2):
                dequantizes.append(reader)
            elif (
                reader.op_type == "Clip"
                and reader.input[0] == name
                and _int8_scalar(values, reader, 1)
                and _int8_scalar(values, reader, 2)
            ):
                clips.append(reader)
                pending.append(reader.output[0])
            else:
                return None
    return (clips, dequantizes) if dequantizes else None


def _shifted(value: np.ndarray) -> np.ndarray:
    return (value.astype(np.int16) + _SHIFT).astype(np.uint8)


def _add(graph: onnx.GraphProto, value: np.ndarray, node: onnx.NodeProto, taken) -> str:
    name = unique_name(f"{node.name or node.output[0]}_u8", taken)
    graph.initializer.append(numpy_helper.from_array(value, name))
    return name


def _drop_unread_constants(model: onnx.ModelProto) -> None:
    """The int8 zero points and bounds no node reads any more (Constant nodes, initializers)."""
    graph = model.graph
    read = {name for node in graph.node for name in node.input}
    read |= {o.name for o in graph.output} | subgraph_reads(graph)
    kept = [n for n in graph.node if n.op_type != "Constant" or n.output[0] in read]
    if len(kept) != len(graph.node):
        replace_nodes(graph, kept)
    remove_unused_tensors(model)
