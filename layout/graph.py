"""A one-pass index of an ONNX graph: producers, constants, ranks and shapes.

Built once so the layout pass never scans the graph again: every later question ("is this a
constant?", "what rank is this tensor?") is a dict lookup, which keeps the pass linear.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.passes import PassResult

Dim = int | str | None
_DEFAULT_DOMAINS = ("", "ai.onnx")


class GraphIndex:
    """What the pass needs to know about ``model.graph``, indexed by tensor name."""

    def __init__(self, model: onnx.ModelProto):
        graph = model.graph
        self.graph = graph
        self.opset = _default_opset(model)
        self.nodes: list[onnx.NodeProto] = list(graph.node)
        self.constants: dict[str, onnx.TensorProto] = {t.name: t for t in graph.initializer}
        self.inputs = [vi.name for vi in graph.input if vi.name not in self.constants]
        self.outputs = [vi.name for vi in graph.output]
        self.producer: dict[str, int] = {}
        for k, node in enumerate(self.nodes):
            for name in node.output:
                if name:
                    self.producer[name] = k
        self.rank: dict[str, int] = {}
        self.dims: dict[str, tuple[Dim, ...]] = {}
        self.elem: dict[str, int] = {}
        self.value_info: dict[str, onnx.ValueInfoProto] = {}
        for vi in graph.value_info:
            self.value_info[vi.name] = vi
        for vi in (*graph.input, *graph.output, *graph.value_info):
            self._read_value_info(vi)
        for name, t in self.constants.items():
            self.rank[name] = len(t.dims)
            self.dims[name] = tuple(int(d) for d in t.dims)
        self._arrays: dict[str, np.ndarray] = {}

    def _read_value_info(self, vi: onnx.ValueInfoProto) -> None:
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            return
        self.elem[vi.name] = tt.elem_type
        if not tt.HasField("shape"):
            return
        dims = tuple(_dim(d) for d in tt.shape.dim)
        self.rank[vi.name] = len(dims)
        self.dims[vi.name] = dims

    # ------------------------------------------------------------------ constants
    def is_const(self, name: str) -> bool:
        return name in self.constants

    def array(self, name: str) -> np.ndarray | None:
        """The value of a constant (cached), or None for an activation or an absent input."""
        if name not in self.constants:
            return None
        if name not in self._arrays:
            self._arrays[name] = numpy_helper.to_array(self.constants[name])
        return self._arrays[name]

    def ints(self, node: onnx.NodeProto, slot: int) -> list[int] | None:
        """A constant integer input as a list (None when absent or not constant)."""
        if slot >= len(node.input) or not node.input[slot]:
            return None
        value = self.array(node.input[slot])
        return None if value is None else [int(v) for v in value.reshape(-1)]

    def has_input(self, node: onnx.NodeProto, slot: int) -> bool:
        return slot < len(node.input) and bool(node.input[slot])

    def static_shape(self, name: str) -> tuple[int, ...] | None:
        dims = self.dims.get(name)
        if dims is None or not all(isinstance(d, int) for d in dims):
            return None
        return dims  # type: ignore[return-value]

    def is_activation(self, name: str) -> bool:
        return name in self.producer or name in self.inputs

    def outer_reads(self, node: onnx.NodeProto) -> list[str]:
        """The names ``node``'s subgraphs read from the enclosing graph (not defined inside
        them), in first-read order."""
        found: dict[str, None] = {}
        for graph in subgraphs(node):
            _free_names(graph, set(), found)
        return list(found)


def subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    out = []
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            out.append(a.g)
        elif a.type == onnx.AttributeProto.GRAPHS:
            out.extend(a.graphs)
    return out


def _free_names(graph: onnx.GraphProto, bound: set[str], found: dict[str, None]) -> None:
    """Names ``graph`` (and the graphs nested in it) reads that neither it nor ``bound``
    (names of enclosing subgraphs) defines."""
    local = bound | {vi.name for vi in graph.input} | {t.name for t in graph.initializer}
    local |= {t for node in graph.node for t in node.output if t}
    for node in graph.node:
        for t in node.input:
            if t and t not in local:
                found.setdefault(t)
        for inner in subgraphs(node):
            _free_names(inner, local, found)
    for vi in graph.output:
        if vi.name not in local:
            found.setdefault(vi.name)


def rename_outer_reads(node: onnx.NodeProto, names: dict[str, str]) -> None:
    """``node``'s subgraphs read ``names[t]`` where they read outer value ``t``."""
    for graph in subgraphs(node):
        _rename_free(graph, set(), names)


def _rename_free(graph: onnx.GraphProto, bound: set[str], names: dict[str, str]) -> None:
    local = bound | {vi.name for vi in graph.input} | {t.name for t in graph.initializer}
    local |= {t for node in graph.node for t in node.output if t}
    for node in graph.node:
        for k, t in enumerate(node.input):
            if t and t not in local and t in names:
                node.input[k] = names[t]
        for inner in subgraphs(node):
            _rename_free(inner, local, names)
    for vi in graph.output:
        if vi.name not in local and vi.name in names:
            vi.name = names[vi.name]


def get_attr(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def set_attr(node: onnx.NodeProto, name: str, value) -> None:
    """Set (or add) an int / ints attribute in place."""
    for a in node.attribute:
        if a.name == name:
            if a.type == onnx.AttributeProto.INT:
                a.i = int(value)
            else:
                del a.ints[:]
                a.ints.extend(int(v) for v in value)
            return
    node.attribute.append(helper.make_attribute(name, value))


def is_default_domain(node: onnx.NodeProto) -> bool:
    return node.domain in _DEFAULT_DOMAINS


def has_subgraph(node: onnx.NodeProto) -> bool:
    kinds = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
    return any(a.type in kinds for a in node.attribute)


def constants_to_initializers(model: onnx.ModelProto) -> PassResult:
    """Turn Constant nodes into initializers, so they are transposed at conversion time too.

    A Constant whose output is a graph output stays a node (an output must be produced).
    """
    graph = model.graph
    outputs = {vi.name for vi in graph.output}
    keep: list[onnx.NodeProto] = []
    found = False
    for node in graph.node:
        value = _constant_value(node) if node.op_type == "Constant" else None
        if value is None or node.output[0] in outputs:
            keep.append(node)
            continue
        found = True
        graph.initializer.append(numpy_helper.from_array(value, node.output[0]))
    if found:
        del graph.node[:]
        graph.node.extend(keep)
    return model, found


def _constant_value(node: onnx.NodeProto) -> np.ndarray | None:
    if not is_default_domain(node) or len(node.attribute) != 1:
        return None
    a = node.attribute[0]
    value = helper.get_attribute_value(a)
    if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
        return numpy_helper.to_array(value)
    dtypes = {"value_float": np.float32, "value_floats": np.float32}
    dtypes |= {"value_int": np.int64, "value_ints": np.int64}
    return np.asarray(value, dtype=dtypes[a.name]) if a.name in dtypes else None


def _default_opset(model: onnx.ModelProto) -> int:
    for o in model.opset_import:
        if o.domain in _DEFAULT_DOMAINS:
            return int(o.version)
    return onnx.defs.onnx_opset_version()  # no default-domain import: the newest opset


def _dim(d: onnx.TensorShapeProto.Dimension) -> Dim:
    if d.HasField("dim_value"):
        return int(d.dim_value)
    if d.HasField("dim_param"):
        return d.dim_param
    return None
