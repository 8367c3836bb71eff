"""Replace each recurrent placeholder of the tf2onnx graph by its cell, unrolled.

Every step is QKeras 0.9's ``QSimpleRNNCell`` / ``QLSTMCell`` / ``QGRUCell.call`` written in
ONNX ops in the same order (``K.dot`` = MatMul, ``K.bias_add`` = Add, the zero initial state
as ConstantOfShape), with the quantized weights computed once by their Quant nodes and the
state / activation quantizers applied on every step as their own Quant nodes.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import onnx

from qkeras2qonnx.emit.composite import Builder
from qkeras2qonnx.emit.layer_map import LayerMap
from qkeras2qonnx.emit.reinsert import spec_quant_node
from qkeras2qonnx.emit.spec import QuantSpec
from qkeras2qonnx.qkeras_recurrent.bidirectional import Bidirectional
from qkeras2qonnx.qkeras_recurrent.recurrent import (
    PER_STEP,
    CellFunction,
    Recurrent,
    Weight,
    quant_name,
)
from qonnx_ingest.errors import ConversionError
from qonnx_ingest.passes import PassResult

_NAME_RE = re.compile(r"qkeras2qonnx_rnn_(in|out)_(\d+)")
_I64 = np.int64


def unroll_recurrent(model: onnx.ModelProto, *, layer_map: LayerMap, int_quant: bool) -> PassResult:
    """Put each recorded recurrent layer's unrolled cell in place of its placeholder."""
    if not layer_map.recurrent:
        return model, False
    graph = model.graph
    op_type = "IntQuant" if int_quant else "Quant"
    for plan in layer_map.recurrent:
        # Found afresh for each layer: _replace rebuilds graph.node, so node objects of an
        # earlier scan no longer belong to the graph.
        found: dict[tuple[str, int], list[onnx.NodeProto]] = {}
        for node in graph.node:
            match = _NAME_RE.search(node.name) if node.op_type == "Clip" else None
            if match:
                found.setdefault((match.group(1), int(match.group(2))), []).append(node)
        ends = [found.get((side, plan.marker), []) for side in ("in", "out")]
        if any(len(e) != 1 for e in ends):
            raise ConversionError(
                "the recurrent layer's placeholder was not found once in the tf2onnx graph "
                "(layers called more than once are not supported)",
                plan.path,
            )
        _replace(graph, plan, ends[0][0], ends[1][0], op_type)
    return model, True


def _replace(
    graph: onnx.GraphProto, plan: Recurrent, first: onnx.NodeProto, last: onnx.NodeProto, op: str
) -> None:
    """Drop the placeholder (``first`` .. ``last``) and emit the cell in ``last``'s place."""
    dead, frontier = {id(first)}, {first.output[0]}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    while frontier:
        name = frontier.pop()
        for node in consumers.get(name, ()):
            if id(node) not in dead and node is not last:
                dead.add(id(node))
                frontier.update(node.output)
    builder = Builder(plan.path)
    result = _emit(builder, plan, op, first.input[0])
    for node in builder.nodes:  # the last result takes the placeholder's output name
        node.input[:] = [last.output[0] if i == result else i for i in node.input]
        node.output[:] = [last.output[0] if o == result else o for o in node.output]
    used_before = {i for n in graph.node if id(n) in dead or n is last for i in n.input}
    kept = []
    for node in graph.node:
        if node is last:
            kept.extend(builder.nodes)
        elif id(node) not in dead:
            kept.append(node)
    del graph.node[:]
    graph.node.extend(kept)
    still = {i for n in graph.node for i in n.input}
    stale = [t for t in graph.initializer if t.name in used_before and t.name not in still]
    for tensor in stale:
        graph.initializer.remove(tensor)
    graph.initializer.extend(builder.initializers)


def _emit(b: Builder, plan: Recurrent | Bidirectional, op: str, x: str) -> str:
    """One recurrent layer, or both of a Bidirectional merged as Keras merges them."""
    if isinstance(plan, Recurrent):
        return _Cell(b, plan, op).run(x)
    y = _Cell(b, plan.forward, op).run(x)
    # Keras flips the backward layer's sequence (run from the last step) into time order.
    y_rev = _Cell(b, plan.backward, op).run(x, flip=plan.return_sequences)
    if plan.merge_mode == "concat":
        return b.op("Concat", y, y_rev, axis=-1)
    if plan.merge_mode == "sum":
        return b.op("Add", y, y_rev)
    if plan.merge_mode == "mul":
        return b.op("Mul", y, y_rev)
    return b.op("Div", b.op("Add", y, y_rev), 2.0)  # "ave": (y + y_rev) / 2


class _Cell:
    """Emits one recurrent layer's unrolled cell with a ``Builder``."""

    def __init__(self, builder: Builder, plan: Recurrent, op_type: str):
        self.b, self.plan, self.op_type = builder, plan, op_type
        self.count: Counter[tuple[str, int]] = Counter()

    def run(self, x: str, flip: bool = False) -> str:
        """The layer's output; ``flip``: its sequence in reverse order."""
        b, plan = self.b, self.plan
        kernel = self._weight(plan.kernel, "kernel_quantizer")
        recurrent = self._weight(plan.recurrent, "recurrent_quantizer")
        bias = self._weight(plan.bias, "bias_quantizer") if plan.bias is not None else None
        batch = b.op("Slice", b.op("Shape", x), np.array([0], _I64), np.array([1], _I64))
        dims = b.op("Concat", batch, np.array([plan.units], _I64), axis=0)
        zeros = b.op("ConstantOfShape", dims)  # float32 zeros: Keras's initial state
        step = {"SimpleRNN": self._simple, "LSTM": self._lstm, "GRU": self._gru}[plan.kind]
        state = (zeros, zeros)
        outputs = []
        for t in range(plan.steps):
            self.t = t
            at = plan.steps - 1 - t if plan.go_backwards else t
            x_t = b.op("Gather", x, np.array(at, _I64), axis=1)
            state = step(x_t, state, kernel, recurrent, bias)
            outputs.append(state[0])
        if not plan.return_sequences:
            return outputs[-1]
        axis = np.array([1], _I64)
        if flip:
            outputs.reverse()
        return b.op("Concat", *[b.op("Unsqueeze", h, axis) for h in outputs], axis=1)

    # -- cells ------------------------------------------------------------------------------

    def _simple(self, x_t, state, kernel, recurrent, bias):
        b = self.b
        h_prev = self._apply(self.plan.state, state[0])
        h = b.op("MatMul", x_t, kernel)
        if bias is not None:
            h = b.op("Add", h, bias)
        out = self._apply(self.plan.activation, b.op("Add", h, b.op("MatMul", h_prev, recurrent)))
        return out, None

    def _lstm(self, x_t, state, kernel, recurrent, bias):
        b, plan = self.b, self.plan
        h_tm1, c_tm1 = state
        if plan.state is not None:  # QKeras quantizes c first, then h
            c_tm1 = self._apply(plan.state, c_tm1)
            h_tm1 = self._apply(plan.state, h_tm1)
        ract, act = plan.recurrent_activation, plan.activation
        if plan.implementation == 1:
            xs = [b.op("MatMul", x_t, k) for k in self._gates(kernel, 4)]
            if bias is not None:
                xs = [b.op("Add", v, g) for v, g in zip(xs, self._gates(bias, 4, 0), strict=True)]
            r = self._gates(recurrent, 4)
            z = [b.op("Add", xs[g], b.op("MatMul", h_tm1, r[g])) for g in range(4)]
        else:
            fused = b.op("Add", b.op("MatMul", x_t, kernel), b.op("MatMul", h_tm1, recurrent))
            if bias is not None:
                fused = b.op("Add", fused, bias)
            z = self._gates(fused, 4)
        i = self._apply(ract, z[0])
        f = self._apply(ract, z[1])
        c = b.op("Add", b.op("Mul", f, c_tm1), b.op("Mul", i, self._apply(act, z[2])))
        o = self._apply(ract, z[3])
        h = b.op("Mul", o, self._apply(act, c))
        return h, c

    def _gru(self, x_t, state, kernel, recurrent, bias):
        b, plan = self.b, self.plan
        h_tm1 = self._apply(plan.state, state[0])
        ract, act = plan.recurrent_activation, plan.activation
        in_bias = rec_bias = bias
        if plan.reset_after and bias is not None:  # bias rows: input, recurrent
            in_bias, rec_bias = (b.op("Gather", bias, np.array(i, _I64), axis=0) for i in (0, 1))
        if plan.implementation == 1:
            xs = [b.op("MatMul", x_t, k) for k in self._gates(kernel, 3)]
            if bias is not None:
                xs = [
                    b.op("Add", v, g) for v, g in zip(xs, self._gates(in_bias, 3, 0), strict=True)
                ]
        else:
            matrix = b.op("MatMul", x_t, kernel)
            if bias is not None:
                matrix = b.op("Add", matrix, in_bias)
            xs = self._gates(matrix, 3)
        r_w = self._gates(recurrent, 3)
        if plan.reset_after:
            if plan.implementation == 1:
                inner = [b.op("MatMul", h_tm1, w) for w in r_w]
                if bias is not None:
                    rb = self._gates(rec_bias, 3, 0)
                    inner = [b.op("Add", v, g) for v, g in zip(inner, rb, strict=True)]
            else:
                matrix = b.op("MatMul", h_tm1, recurrent)
                if bias is not None:
                    matrix = b.op("Add", matrix, rec_bias)
                inner = self._gates(matrix, 3)
            z = self._apply(ract, b.op("Add", xs[0], inner[0]))
            r = self._apply(ract, b.op("Add", xs[1], inner[1]))
            rec_h = b.op("Mul", r, inner[2])
        else:
            z = self._apply(ract, b.op("Add", xs[0], b.op("MatMul", h_tm1, r_w[0])))
            r = self._apply(ract, b.op("Add", xs[1], b.op("MatMul", h_tm1, r_w[1])))
            rec_h = b.op("MatMul", b.op("Mul", r, h_tm1), r_w[2])
        hh = self._apply(act, b.op("Add", xs[2], rec_h))
        # h = z * h_tm1 + (1 - z) * hh, with h_tm1 the quantized state
        h = b.op("Add", b.op("Mul", z, h_tm1), b.op("Mul", b.op("Sub", 1.0, z), hh))
        return h, None

    # -- pieces -----------------------------------------------------------------------------

    def _gates(self, tensor: str, n: int, axis: int = 1) -> list[str]:
        """The n equal column blocks of a weight (or of a gate pre-activation)."""
        u = self.plan.units
        ax = np.array([axis if axis == 0 else -1], _I64)
        return [
            self.b.op("Slice", tensor, np.array([g * u], _I64), np.array([(g + 1) * u], _I64), ax)
            for g in range(n)
        ]

    def _apply(self, function: CellFunction | None, x: str) -> str:
        if function is None:
            return x
        y = function.plain(self.b, x)
        if function.spec is None:
            return y
        k = self.count[(function.role, self.t)]
        self.count[(function.role, self.t)] += 1
        if k >= PER_STEP[self.plan.kind][function.role]:
            raise ConversionError(
                f"{function.role} applied more often than recorded", self.plan.path
            )
        name = quant_name(self.plan.path, function.role, self.t, k)
        return self._quant(function.spec, y, name, None)

    def _weight(self, weight: Weight, role: str) -> str:
        values = weight.values
        name = f"{self.plan.path}/{role.removesuffix('_quantizer')}"
        self.b.initializers.append(onnx.numpy_helper.from_array(values, name))
        if weight.spec is None:
            return name
        scale = np.broadcast_to(weight.spec.scale, values.shape)
        return self._quant(weight.spec, name, quant_name(self.plan.path, role), scale)

    def _quant(self, spec: QuantSpec, x: str, name: str, scale: np.ndarray | None) -> str:
        x_shape = None if scale is None else scale.shape
        scale = spec.scale if scale is None else scale
        q = spec_quant_node(spec, x, name, scale, x_shape, name=name, op_type=self.op_type)
        self.b.nodes.append(q.node)
        self.b.initializers.extend(q.initializers)
        return name
