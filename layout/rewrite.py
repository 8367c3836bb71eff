"""Applying a layout assignment: permuted shapes, rewritten constants and attributes, and the
few Transpose / Reshape nodes terminate ops and broadcasting need.

Every tensor has *versions*, one per axis order it is needed in; the producer writes one, and
each other version is made once, by one Transpose (or a Reshape when only size-1 axes move),
right before its first reader and then shared. Constants never get a runtime Transpose: they
are transposed at conversion time, in place when all their readers agree, else duplicated.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import helper, numpy_helper

from layout.graph import GraphIndex, rename_outer_reads
from layout.op_table import Kind, NodeRule
from layout.orders import Order, channels_first, full, letters, tag, transpose_perm
from qonnx_ingest.errors import ConversionError
from qonnx_ingest.names import TakenNames, short_name, unique_name

LAYOUT_KEY = "layout"
_Key = tuple  # a constant variant: None (as is), ("ord", rank, order) or ("val", ...)


class Rewriter:
    """Streams the nodes once, in order, emitting each with its inputs in the order it needs."""

    def __init__(
        self, g: GraphIndex, rules: list[NodeRule], permuted: dict[str, bool], kept: set[str]
    ):
        self.g = g
        self.rules = rules
        self.permuted = permuted
        self.io = set(g.inputs) | set(g.outputs)
        self.kept = kept & self.io  # graph inputs and outputs kept in source order
        # an initializer listed as a graph input is a default value a user may override
        self.protected = self.io | {vi.name for vi in g.graph.input}
        self.taken = TakenNames([*g.producer, *self.io, *g.constants])
        self.names: dict[tuple[str, Order | None], str] = {}
        self.produced: dict[str, Order | None] = {}
        self.expanded_names: dict[tuple[str, int, Order], str] = {}
        self.nodes: list[onnx.NodeProto] = []
        self.new_initializers: list[onnx.TensorProto] = []
        self.new_value_info: list[onnx.ValueInfoProto] = []
        self.const_uses: dict[str, list[tuple[onnx.NodeProto, int, _Key | None]]] = {}
        self.values: dict[_Key, np.ndarray] = {}

    # ------------------------------------------------------------------ orders and names
    def wanted(self, t: str) -> Order | None:
        """The order the tensor's own name holds: its layout, or source order at kept I/O."""
        if not self.permuted.get(t) or t in self.kept:
            return None
        return channels_first(self.g.rank[t])

    def fresh(self, hint: str) -> str:
        return unique_name(hint, self.taken)

    def _name_for(self, t: str, order: Order | None) -> str:
        if order == self.wanted(t):
            return t
        return self.fresh(f"{t}__{tag(order, self.g.rank.get(t))}")

    def produce(self, t: str, order: Order | None) -> str:
        name = self._name_for(t, order)
        self.names[(t, order)] = name
        self.produced[t] = order
        return name

    def source(self, t: str) -> tuple[str, Order | None]:
        if t not in self.produced:
            raise ConversionError("read before it is produced: the graph is not sorted", t)
        order = self.produced[t]
        return self.names[(t, order)], order

    def get(self, t: str, order: Order | None) -> str:
        """The name of ``t`` in ``order``, making that version on first use."""
        name = self.names.get((t, order))
        if name is not None:
            return name
        src, have = self.source(t)
        name = self._name_for(t, order)
        self._reorder(t, src, have, name, order)
        self.names[(t, order)] = name
        return name

    # ------------------------------------------------------------------ emitted nodes
    def _emit(self, op_type: str, inputs: list[str], output: str, **attrs) -> None:
        # named after its output without TFLite's ";"-joined fused-name chains (finishing
        # makes node names unique)
        name = f"{short_name(output)}_{op_type}"
        node = helper.make_node(op_type, inputs, [output], name=name, **attrs)
        self.nodes.append(node)

    def _const(self, value: np.ndarray, hint: str) -> str:
        name = self.fresh(hint)
        self.new_initializers.append(numpy_helper.from_array(value, name))
        return name

    def _reorder(self, t: str, src: str, have: Order | None, dst: str, want: Order | None):
        """One Transpose, or one Reshape when the order of the non-1 axes does not change."""
        rank = self.g.rank[t]
        perm = transpose_perm(have, want, rank)
        dims = self.g.dims.get(t)
        if dims is not None:
            stored = [dims[a] for a in full(have, rank)]
            moving = [a for a in perm if stored[a] != 1]
            target = [stored[a] for a in perm]
            dynamic_stays = all(isinstance(d, int) or perm[j] == j for j, d in enumerate(target))
            if moving == sorted(moving) and dynamic_stays and 0 not in target:
                shape = np.array([d if isinstance(d, int) else 0 for d in target], np.int64)
                self._emit("Reshape", [src, self._const(shape, f"{dst}_shape")], dst)
                return
        self._emit("Transpose", [src], dst, perm=perm)

    def expanded(self, t: str, rank: int, order: Order) -> str:
        """A lower-rank broadcast operand made full-rank in ``order`` (shared per target).

        Source broadcasting aligns trailing axes, so [W, C] means [1, 1, W, C]; its axes go to
        their channels-first positions (one Transpose if their relative order changes, which
        size-1 axes do not count for), then a Reshape (static shape) or Unsqueeze inserts 1s.
        """
        key = (t, rank, order)
        if key in self.expanded_names:
            return self.expanded_names[key]
        src, have = self.source(t)
        k = self.g.rank[t]
        dims = self.g.dims.get(t)
        stored = [dims[a] for a in full(have, k)] if dims is not None else [None] * k
        pos = [order.index(rank - k + a) for a in full(have, k)]
        static = all(isinstance(d, int) for d in stored)
        if k == 0 or (static and all(d == 1 for d in stored)):
            self.expanded_names[key] = src
            return src
        dst = self.fresh(f"{t}__{tag(order, rank)}")
        moving = [pos[i] for i in range(k) if not static or stored[i] != 1]
        if moving != sorted(moving):
            perm = sorted(range(k), key=pos.__getitem__)
            step = self.fresh(f"{dst}_axes")
            self._emit("Transpose", [src], step, perm=perm)
            src, stored, pos = step, [stored[i] for i in perm], sorted(pos)
        if static:
            target = [1] * rank
            for i, d in enumerate(stored):
                target[pos[i]] = d
            shape = np.array(target, np.int64)
            self._emit("Reshape", [src, self._const(shape, f"{dst}_shape")], dst)
            elem = self.g.elem.get(t)
            if elem is not None:
                self.new_value_info.append(helper.make_tensor_value_info(dst, elem, target))
        else:
            axes = [j for j in range(rank) if j not in pos]
            if self.g.opset >= 13:
                axes_name = self._const(np.array(axes, np.int64), f"{dst}_axes")
                self._emit("Unsqueeze", [src, axes_name], dst)
            else:
                self._emit("Unsqueeze", [src], dst, axes=axes)
        self.expanded_names[key] = dst
        return dst

    # ------------------------------------------------------------------ constants
    def _use(self, node: onnx.NodeProto, slot: int, c: str, key: _Key | None) -> None:
        self.const_uses.setdefault(c, []).append((node, slot, key))

    def _use_ordered(self, node: onnx.NodeProto, slot: int, c: str, rank: int, order: Order):
        # all-ones constants broadcast the same in any layout
        needed = any(d != 1 for d in self.g.constants[c].dims)
        self._use(node, slot, c, ("ord", rank, order) if needed else None)

    def param(self, node: onnx.NodeProto, slot: int, value: np.ndarray) -> None:
        """A rewritten parameter input (pads, axes, repeats, ...)."""
        value = np.array(value, order="C")  # (ascontiguousarray would make a scalar 1-D)
        if slot < len(node.input) and node.input[slot] in self.g.constants:
            c = node.input[slot]
            old = self.g.array(c)
            same = old.dtype == value.dtype and np.array_equal(old, value)
            key = None if same else ("val", value.dtype.str, value.shape, value.tobytes())
            if key is not None:
                self.values[key] = value
            self._use(node, slot, c, key)
            return
        while len(node.input) <= slot:
            node.input.append("")
        node.input[slot] = self._const(value, f"{node.name or node.output[0]}_param{slot}")

    def _variant(self, c: str, key: _Key) -> np.ndarray:
        if key[0] == "val":
            return self.values[key]
        _, rank, order = key
        value = numpy_helper.to_array(self.g.constants[c])
        value = value.reshape((1,) * (rank - value.ndim) + value.shape)
        return np.ascontiguousarray(value.transpose(full(order, rank)))

    def _resolve_constants(self) -> None:
        """In place when every reader wants the same variant, else one copy per variant."""
        removed = set()
        for c, uses in self.const_uses.items():
            keys = {key for _, _, key in uses}
            if keys == {None}:
                continue
            protected = c in self.protected
            if len(keys) == 1 and not protected:
                self.g.constants[c].CopyFrom(numpy_helper.from_array(self._variant(c, *keys), c))
                continue
            names = {}
            for key in keys - {None}:
                suffix = tag(key[2], key[1]) if key[0] == "ord" else "param"
                names[key] = self._const(self._variant(c, key), f"{c}__{suffix}")
            for node, slot, key in uses:
                if key is not None:
                    node.input[slot] = names[key]
            if None not in keys and not protected:
                removed.add(c)
        graph = self.g.graph
        if removed:
            kept = [t for t in graph.initializer if t.name not in removed]
            del graph.initializer[:]
            graph.initializer.extend(kept)
        graph.initializer.extend(self.new_initializers)

    # ------------------------------------------------------------------ nodes
    def _read_source(self, node: onnx.NodeProto, slot: int, t: str) -> None:
        if t in self.g.constants:
            self._use(node, slot, t, None)
        else:
            node.input[slot] = self.get(t, None)

    def _plain(self, node: onnx.NodeProto, rule: NodeRule) -> None:
        """Source semantics: read every input in source order, write source order; so do the
        subgraphs of a control-flow node, for the outer values they read by name."""
        for slot, t in enumerate(node.input):
            if t:
                self._read_source(node, slot, t)
        if rule.op.scoped:
            renamed = {}
            for t in self.g.outer_reads(node):
                if t in self.g.constants:
                    self._use(node, -1, t, None)  # read as is: never transposed in place
                elif (name := self.get(t, None)) != t:
                    renamed[t] = name
            rename_outer_reads(node, renamed)
        for slot, t in enumerate(node.output):
            if t:
                node.output[slot] = self.produce(t, None)
        self.nodes.append(node)

    def _permuted(self, node: onnx.NodeProto, rule: NodeRule) -> None:
        g, rank = self.g, rule.rank
        p = channels_first(rank)
        params = rule.op.rewrite(node, g, p) if rule.kind is Kind.ATTRIBUTE else {}
        data = set(rule.data)
        for slot, t in enumerate(node.input):
            if not t:
                continue
            if slot in params:
                self.param(node, slot, params.pop(slot))
            elif slot not in data:
                self._read_source(node, slot, t)
            elif t in g.constants:
                self._use_ordered(node, slot, t, rank, p)
            elif g.rank[t] == rank:
                node.input[slot] = self.get(t, p)
            else:
                node.input[slot] = self.expanded(t, rank, p)
        for slot, value in params.items():  # parameters the node did not have (Slice axes)
            self.param(node, slot, value)
        outs, fixed = set(rule.outs), dict(rule.fixed)
        for slot, t in enumerate(node.output):
            if not t:
                continue
            order = channels_first(g.rank[t]) if slot in outs else fixed.get(slot)
            node.output[slot] = self.produce(t, order)
        self.nodes.append(node)

    def run(self, model: onnx.ModelProto) -> None:
        g = self.g
        for t in g.inputs:
            self.produce(t, self.wanted(t))
        for node, rule in zip(g.nodes, self.rules, strict=True):
            if rule.kind is Kind.TERMINATE:
                if rule.op.absorb is not None and rule.op.absorb(node, g, self):
                    self.nodes.append(node)
                else:
                    self._plain(node, rule)
            elif rule.kind is Kind.IMPLICIT or (rule.links and self.permuted.get(rule.links[0])):
                self._permuted(node, rule)
            else:
                self._plain(node, rule)
        for t in g.outputs:
            if t not in g.constants:
                self.get(t, self.wanted(t))
        self._resolve_constants()  # patches node inputs: before the nodes are copied in
        graph = model.graph
        del graph.node[:]
        graph.node.extend(self.nodes)
        self._update_shapes()
        self._record_io(model)

    # ------------------------------------------------------------------ shapes and metadata
    def _update_shapes(self) -> None:
        g, graph = self.g, self.g.graph
        for vi in (*graph.input, *graph.output):
            order = self.wanted(vi.name) if vi.name not in g.constants else None
            if order is not None and vi.name in g.dims:
                _permute_dims(vi, order)
        kept: list[onnx.ValueInfoProto] = []
        for vi in graph.value_info:
            if vi.name not in g.elem:  # not a tensor type: leave it alone
                kept.append(vi)
        for (t, order), name in self.names.items():
            if name in self.io or t not in g.elem:
                continue
            dims = g.dims.get(t)
            vi = g.value_info.get(t) if name == t else None
            if vi is None:  # a new version: a new entry
                if dims is not None:
                    dims = [dims[a] for a in full(order, len(dims))]
                vi = helper.make_tensor_value_info(name, g.elem[t], dims)
            elif order is not None and dims is not None:
                _permute_dims(vi, order)
            kept.append(vi)
        del graph.value_info[:]
        graph.value_info.extend(kept)
        graph.value_info.extend(self.new_value_info)

    def _record_io(self, model: onnx.ModelProto) -> None:
        record = {}
        for t in (*self.g.inputs, *self.g.outputs):
            order = self.wanted(t)
            if order is not None:
                rank = len(order)
                record[t] = {
                    "source": letters(None, rank),
                    "stored": letters(order, rank),
                    "perm": list(order),
                }
        props = [p for p in model.metadata_props if p.key != LAYOUT_KEY]
        del model.metadata_props[:]
        model.metadata_props.extend(props)
        if record:
            entry = model.metadata_props.add()
            entry.key, entry.value = LAYOUT_KEY, json.dumps(record)


def stored_perms(model: onnx.ModelProto) -> dict[str, list[int]]:
    """Graph I/O tensor -> the perm from its source layout to its stored one, as recorded."""
    props = {p.key: p.value for p in model.metadata_props}
    return {k: v["perm"] for k, v in json.loads(props.get(LAYOUT_KEY, "{}")).items()}


def _permute_dims(vi: onnx.ValueInfoProto, order: Order) -> None:
    shape = vi.type.tensor_type.shape
    dims = [onnx.TensorShapeProto.Dimension() for _ in shape.dim]
    for d, src in zip(dims, shape.dim, strict=True):
        d.CopyFrom(src)
    del shape.dim[:]
    for a in order:
        shape.dim.add().CopyFrom(dims[a])
