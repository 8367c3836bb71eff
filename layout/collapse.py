"""Collapsing chains of data-movement ops (Transpose, Reshape) into at most one Transpose.

The layout pass puts a Transpose back to source order in front of each terminate op; TFLite's
own graphs add more (LayerNormalization lowers to RESHAPE -> TRANSPOSE -> ... -> TRANSPOSE ->
RESHAPE, attention puts RESHAPE / TRANSPOSE around BATCH_MATMUL). A chain of such ops between
two computing ops often moves no element at all (it is one Reshape) or moves them once (one
Transpose between Reshapes that only drop and insert size-1 axes). Each chain's composite is
found exactly, by moving an index array through it, and the chain is replaced only when that
leaves fewer Transposes. Per-tensor quantizers inside a chain (elementwise, scalar parameters)
commute with data movement and move to its front.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from layout.graph import get_attr, is_default_domain
from layout.op_table import QONNX_DOMAINS
from qonnx_ingest.names import TakenNames, unique_name
from qonnx_ingest.passes import PassResult
from qonnx_ingest.quant import QUANT_OP_TYPES

_MAX_ELEMENTS = 1 << 22  # bound on the index simulation's cost
_MAX_CHAIN = 8


def collapse_moves(model: onnx.ModelProto) -> PassResult:
    """Rewrite ``model`` in place; modified when it removed a Transpose."""
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    if not any(n.op_type == "Transpose" for n in graph.node):
        return model, False
    shapes = _static_shapes(graph)
    shapes.update(_inferred_shapes(model, shapes))
    partial = _partial_shapes(graph)
    uses: dict[str, int] = {}
    for node in graph.node:
        for t in node.input:
            uses[t] = uses.get(t, 0) + 1
    outputs = {vi.name for vi in graph.output}
    producer = {t: node for node in graph.node for t in node.output}
    taken = TakenNames([*producer, *inits, *(vi.name for vi in graph.input)])
    new_inits: list[onnx.TensorProto] = []
    replaced: dict[int, list[onnx.NodeProto]] = {}  # id(chain's last node) -> its nodes
    dropped: set[int] = set()
    for node in reversed(graph.node):
        if id(node) in dropped or _kind(node, inits) is None:
            continue
        chain = [node]
        kept = 0  # chain[:kept] stay: another op reads what they produce
        while len(chain) < _MAX_CHAIN:
            src = chain[0].input[0]
            prev = producer.get(src)
            if prev is None or _kind(prev, inits) is None or id(prev) in dropped:
                break
            if uses.get(src) != 1 or src in outputs or kept:
                kept += 1
            chain.insert(0, prev)
        for start in range(len(chain)):  # the longest chain first
            part = chain[start:]
            mine = part[max(kept - start, 0) :]
            before = sum(n.op_type == "Transpose" for n in mine)
            if before == 0:
                break
            new = _collapse(part, _with_fixed_size(part, shapes, partial, inits), inits,
                            taken, new_inits)  # fmt: skip
            after = None if new is None else sum(n.op_type == "Transpose" for n in new)
            if after is not None and after < before:
                replaced[id(node)] = new
                dropped.update(id(n) for n in mine[:-1])
                break
    if not replaced:
        return model, False
    nodes: list[onnx.NodeProto] = []
    for node in graph.node:
        if id(node) not in dropped:
            nodes.extend(replaced.get(id(node), [node]))
    _replace_nodes(graph, _live(nodes, inits, outputs), new_inits, outputs)
    return model, True


def _live(nodes: list, inits: dict, outputs: set[str]) -> list[onnx.NodeProto]:
    """Without the data moves a replaced chain left unread (a shared one whose readers all
    collapsed)."""
    read = set(outputs)
    kept = []
    for node in reversed(nodes):
        if _kind(node, inits) is not None and not any(t in read for t in node.output):
            continue
        read.update(node.input)
        kept.append(node)
    return kept[::-1]


def _kind(node: onnx.NodeProto, inits: dict) -> str | None:
    """'move' (Transpose, Reshape to a constant shape) or 'point' (a per-tensor quantizer)."""
    if is_default_domain(node):
        if node.op_type == "Transpose" and get_attr(node, "perm") is not None:
            return "move"
        if node.op_type == "Reshape" and len(node.input) == 2 and node.input[1] in inits:
            return "move"
        return None
    return "point" if per_tensor_quantizer(node, inits) else None


def per_tensor_quantizer(node: onnx.NodeProto, inits: dict) -> bool:
    """A QONNX quantizer with scalar constant parameters: elementwise, so it commutes with
    any data move."""
    if node.domain not in QONNX_DOMAINS or node.op_type not in ("Quant", "IntQuant", "Trunc"):
        return False
    params = [t for t in node.input[1:] if t]
    return all(t in inits and int(np.prod(inits[t].dims)) == 1 for t in params)


def _static_shapes(graph: onnx.GraphProto) -> dict[str, tuple[int, ...]]:
    shapes = {}
    for vi in (*graph.input, *graph.value_info, *graph.output):
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or not tt.HasField("shape"):
            continue
        if all(d.HasField("dim_value") for d in tt.shape.dim):
            shapes[vi.name] = tuple(int(d.dim_value) for d in tt.shape.dim)
    for t in graph.initializer:
        shapes[t.name] = tuple(int(d) for d in t.dims)
    return shapes


def _partial_shapes(graph: onnx.GraphProto) -> dict[str, tuple[int | None, ...]]:
    """Shapes with their dynamic dimensions as None."""
    shapes = {}
    for vi in (*graph.input, *graph.value_info, *graph.output):
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.HasField("shape"):
            dims = tt.shape.dim
            shapes[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in dims)
    return shapes


def _with_fixed_size(chain, shapes: dict, partial: dict, inits: dict) -> dict:
    """``shapes``, with the chain's input given its one dynamic dimension where a Reshape of
    the chain to a constant shape fixes the element count (the xmos denoiser's GRU state,
    [1, batch, 64] -> Transpose -> Reshape [1, 1, 2, 32]: any other batch fails there)."""
    first = chain[0].input[0]
    dims = partial.get(first)
    if first in shapes or dims is None or sum(d is None for d in dims) != 1:
        return shapes
    for node in chain:
        if node.op_type != "Reshape":
            continue
        target = numpy_helper.to_array(inits[node.input[1]]).reshape(-1)
        known = int(np.prod([d for d in dims if d is not None]))
        total = int(np.prod(target))
        if np.all(target > 0) and known > 0 and total % known == 0:
            return {**shapes, first: tuple(total // known if d is None else d for d in dims)}
        break
    return shapes


def _inferred_shapes(model: onnx.ModelProto, known: dict) -> dict[str, tuple[int, ...]]:
    """The shapes converters leave out, from onnx's inference on the channels-first graph (the
    source-layout one reads NHWC data with NCHW ops, so inference there would be wrong)."""
    graph = model.graph
    if any(n.domain not in ("", "ai.onnx") and n.op_type not in QUANT_OP_TYPES for n in graph.node):
        return {}  # qonnx's inference for other custom ops costs a graph scan per node
    moves = [n for n in graph.node if n.op_type in ("Transpose", "Reshape")]
    if all(n.input[0] in known for n in moves):
        return {}
    from qonnx_ingest.finish import infer_shapes

    try:
        return _static_shapes(infer_shapes(model).graph)
    except Exception:  # noqa: BLE001 - finishing reports inconsistent shapes, naming them
        return {}


def _composite(chain, shapes, inits) -> tuple[tuple[int, ...], np.ndarray] | None:
    """(input shape, the chain's output as indices into the flattened input) or None."""
    first = chain[0].input[0]
    shape = shapes.get(first)
    if shape is None or int(np.prod(shape)) > _MAX_ELEMENTS:
        return None
    a = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    for node in chain:
        if node.op_type == "Transpose":
            perm = list(get_attr(node, "perm"))
            if sorted(perm) != list(range(a.ndim)):
                return None
            a = a.transpose(perm)
        elif node.op_type == "Reshape":
            target = [int(v) for v in numpy_helper.to_array(inits[node.input[1]]).reshape(-1)]
            if 0 in target:
                if get_attr(node, "allowzero", 0):
                    return None
                target = [a.shape[i] if v == 0 else v for i, v in enumerate(target)]
            try:
                a = a.reshape(target)
            except ValueError:
                return None
    return shape, a


def _collapse(chain, shapes, inits, taken, new_inits) -> list[onnx.NodeProto] | None:
    """The chain as its quantizers then at most Reshape -> Transpose -> Reshape, or None."""
    found = _composite(chain, shapes, inits)
    if found is None:
        return None
    shape, a = found
    form = _digit_form(a.reshape(-1))
    if form is None:
        return None
    fine, perm = form
    moves: list[tuple[str, object]] = []
    if perm == sorted(perm):
        if a.shape != shape:
            moves.append(("Reshape", a.shape))
    else:
        if fine != shape:
            moves.append(("Reshape", fine))
        moves.append(("Transpose", perm))
        if tuple(fine[i] for i in perm) != a.shape:
            moves.append(("Reshape", a.shape))
    return _emit(chain, moves, taken, new_inits)


def _digit_form(f: np.ndarray) -> tuple[tuple[int, ...], list[int]] | None:
    """(fine input shape, perm) with ``f == arange.reshape(fine).transpose(perm).ravel()``.

    ``f`` lists, in output order, which input element each output element is. A data move
    of Reshapes and Transposes permutes mixed-radix digits: read each output digit's radix
    and input stride from the innermost outward, then check the whole of ``f`` against them.
    """
    n = f.size
    if n == 0 or f[0] != 0:
        return None
    digits: list[tuple[int, int]] = []  # (radix, input stride), innermost output digit first
    block = 1
    while block < n:
        stride = int(f[block])
        r = 2
        while r * block < n and int(f[r * block]) == r * stride:
            r += 1
        if (n // block) % r:
            return None
        digits.append((r, stride))
        block *= r
    idx = np.arange(n, dtype=np.int64)
    rebuilt = np.zeros(n, dtype=np.int64)
    for r, stride in digits:
        rebuilt += (idx % r) * stride
        idx //= r
    if not np.array_equal(rebuilt, f):
        return None
    by_stride = sorted(range(len(digits)), key=lambda k: -digits[k][1])  # input, outer first
    expected = 1
    for k in reversed(by_stride):
        if digits[k][1] != expected:
            return None
        expected *= digits[k][0]
    outer = list(reversed(range(len(digits))))  # output digits, outer first
    perm = [by_stride.index(k) for k in outer]
    fine = [digits[k][0] for k in by_stride]
    # merge axes that stay adjacent, in order, on both sides
    merged_fine: list[int] = []
    merged_perm: list[list[int]] = []
    for axis in perm:
        if merged_perm and merged_perm[-1][-1] + 1 == axis:
            merged_perm[-1].append(axis)
        else:
            merged_perm.append([axis])
    groups = sorted(merged_perm)
    for group in groups:
        merged_fine.append(int(np.prod([fine[i] for i in group])))
    order = [groups.index(group) for group in merged_perm]
    return tuple(merged_fine), order


def _emit(chain, moves, taken, new_inits) -> list[onnx.NodeProto]:
    """The chain's quantizers on its input, then ``moves``; the last node keeps the output."""
    end = chain[-1].output[0]
    src = chain[0].input[0]
    nodes: list[onnx.NodeProto] = []
    steps = [(n, None) for n in chain if n.op_type not in ("Transpose", "Reshape")]
    steps += [(None, m) for m in moves]
    if not steps:  # the chain does nothing at all: one Identity keeps the output's name
        steps = [(None, ("Identity", None))]
    for k, (point, move) in enumerate(steps):
        last = k == len(steps) - 1
        out = end if last else unique_name(f"{end}__moved{k}", taken)
        if point is not None:
            node = onnx.NodeProto()
            node.CopyFrom(point)
            node.input[0] = src
            node.output[0] = out
        else:
            op, arg = move
            name = unique_name(f"{end}__{op.lower()}", taken)
            if op == "Reshape":
                shape_name = unique_name(f"{end}__shape{k}", taken)
                new_inits.append(numpy_helper.from_array(np.array(arg, np.int64), shape_name))
                node = helper.make_node("Reshape", [src, shape_name], [out], name=name)
            elif op == "Transpose":
                node = helper.make_node("Transpose", [src], [out], name=name, perm=arg)
            else:
                node = helper.make_node("Identity", [src], [out], name=name)
        nodes.append(node)
        src = out
    return nodes


def _replace_nodes(graph, nodes, new_inits, outputs) -> None:
    """The new node list; value_info and initializers of tensors no node uses any more go."""
    names = {t for n in nodes for t in (*n.input, *n.output)}
    value_info = [vi for vi in graph.value_info if vi.name in names]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]
    graph.value_info.extend(value_info)
    graph_inputs = {vi.name for vi in graph.input}
    inits = [t for t in graph.initializer if t.name in names or t.name in graph_inputs | outputs]
    del graph.initializer[:]
    graph.initializer.extend([*inits, *new_inits])
