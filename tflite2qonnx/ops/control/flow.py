"""Multi-subgraph models: IF as ONNX If, WHILE as ONNX Loop, CALL_ONCE inlined, and the
resource-variable ops (VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE) resolved at conversion.

IF's branches and WHILE's body become ONNX subgraphs converted by the same operator table;
they read outer values by name, constants are materialized inside them. WHILE(cond, body) is
``Loop(cond(v0), v0)`` whose body computes ``v = body(v)`` and then ``cond(v)``.

Quantized tensors in an ONNX subgraph: qonnx's executor hands a Loop or If node whole to
onnxruntime, and its QCDQ / standard-op lowerings do not enter subgraphs, so a Quant node
there would run nowhere. A WHILE body's quantizers become standard ops (``ops/loop``); an IF
with quantized tensors computes both branches inline and picks with ``Where`` (exact: ONNX
ops have no side effects), as does an IF whose branches assign variables (each then holds
the taken branch's value).

The NHWC -> NCHW layout pass treats If and Loop as terminate ops: what they read, their
subgraphs' reads of outer values included, is put back in source order, and their results
are in source order. It does not enter the subgraphs, so a layout-source op (Conv, pools)
there would run on the wrong axes: an IF whose branches hold one inlines them, a WHILE whose
body does is refused naming the op, as is ASSIGN_VARIABLE inside a WHILE or an ONNX If.

Variables: CALL_ONCE's initializer subgraph is converted inline, so its ASSIGN_VARIABLEs give
each variable (keyed by container and shared_name) its value; READ_VARIABLE reads the latest
value assigned before it. TFLite keeps variables across invocations (CALL_ONCE runs on the
first only); the converted graph is the first invocation of a fresh interpreter, state is not
carried from one run to the next. Under --state-io CALL_ONCE gives each variable its state
input instead (``tflite2qonnx.state``), the values its initializer assigns (evaluated at
conversion where computed) recorded as initial values.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
from onnx import helper

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder, tensor_value_info
from tflite2qonnx.model import Operator, Subgraph
from tflite2qonnx.ops.dispatch import converter, unsupported_message
from tflite2qonnx.state import resource_assigned, resource_state


@dataclasses.dataclass
class _Variables:
    """Resource variables of one conversion: handle tensors and current values."""

    values: dict[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    handles: dict[tuple[int, int], tuple[str, str]] = dataclasses.field(default_factory=dict)
    calling: list[int] = dataclasses.field(default_factory=list)  # subgraphs being converted


def _variables(b: GraphBuilder) -> _Variables:
    if b.calls is None:
        b.calls = _Variables()
    return b.calls


def _subgraph(b: GraphBuilder, op: Operator, option: str) -> Subgraph:
    index = int(op.options.get(option, -1))
    if not 0 < index < len(b.subgraphs):
        raise ConversionError(
            f"{op.name}'s {option} {index} names no callable subgraph of this model", op.where
        )
    return b.subgraphs[index]


def _child(b: GraphBuilder, sg: Subgraph, inline: bool, nested: bool = False) -> GraphBuilder:
    """``b.child`` sharing ``b``'s variables. ``nested``: runs conditionally or repeatedly (no
    variable assignment there)."""
    _variables(b)
    return b.child(sg, inline=inline, nested=nested)


def _typed_input(b: GraphBuilder, idx: int) -> str:
    """Tensor ``idx``'s value; an integer or bool constant keeps its type (``b.input`` hands
    constants on as float32 reals, which ONNX If / Loop interfaces would not accept)."""
    t = b.tensor(idx)
    if t.data is not None and t.quant is None and t.dtype not in ("float32", "float16"):
        return b.const(np.asarray(t.data), b.tensor_name(idx))
    return b.input(idx)


def _bind(child: GraphBuilder, sg: Subgraph, b: GraphBuilder, outer: list[int]) -> None:
    """``sg``'s inputs take the outer tensors' values: constants as constants, the rest by
    name (an ONNX subgraph reads outer values by name)."""
    for local, idx in zip(sg.inputs, outer, strict=True):
        t = b.tensor(idx)
        if t.dtype == "resource":  # a variable handle: the same variable inside
            _variables(b).handles[(sg.index, local)] = _handle(b, idx, b.current)
            continue
        value = b.stored_constant(idx)  # an unquantized integer or bool constant keeps its type
        if value is not None:
            child.bind(local, value=value)
        else:
            child.bind(local, name=b.input(idx))


def _run(child: GraphBuilder) -> None:
    sg = child.subgraph
    calling = _variables(child).calling
    if sg.index in calling:
        raise ConversionError(f"subgraph {sg.index} '{sg.name}' calls itself", "subgraphs")
    calling.append(sg.index)
    for sub_op in sg.operators:
        convert = converter(sub_op.name)
        if convert is None:
            raise ConversionError(unsupported_message(sub_op), f"subgraph {sg.index}")
        child.current = sub_op
        convert(child, sub_op)
    child.current = None
    calling.pop()


def _outputs(child: GraphBuilder) -> list[str]:
    """Each output of the child's subgraph through an Identity of a fresh name (an ONNX
    subgraph's outputs are produced inside it)."""
    names = []
    for idx in child.subgraph.outputs:
        name = child.fresh(f"{child.tensor_name(idx)}_out")
        child.nodes.append(helper.make_node("Identity", [child.input(idx)], [name],
                                            name=child.fresh(f"{name}_identity")))  # fmt: skip
        names.append(name)
    return names


def _graph(child: GraphBuilder, name: str, inputs, outputs: list[str]) -> onnx.GraphProto:
    sg = child.subgraph
    infos = [
        _renamed(tensor_value_info(n, child.tensor(i)), n)
        for n, i in zip(outputs, sg.outputs, strict=True)
    ]
    return helper.make_graph(child.nodes, name, inputs, infos, child.initializers)


def _renamed(info: onnx.ValueInfoProto, name: str) -> onnx.ValueInfoProto:
    info.name = name
    return info


def _crossing_problem(op: Operator, tensors: list[tuple[Subgraph, int]]) -> str | None:
    """Why values passed into or out of an ONNX subgraph cannot be, or None."""
    for sg, idx in tensors:
        t = sg.tensors[idx]
        if t.quant is not None:
            return (
                f"{op.name} with quantized tensor '{t.name}' is not supported: qonnx's "
                "executor and Quant lowerings do not enter ONNX subgraphs"
            )
    return None


def _subgraph_problem(op: Operator, sg: Subgraph) -> str | None:
    """A quantized tensor in a called subgraph (its own tensors may have any rank: the
    converters write each op in the source layout, only the main graph's layout changes)."""
    for t in sg.tensors:
        if t.quant is not None:
            return (
                f"{op.name} whose subgraph '{sg.name}' holds quantized tensor '{t.name}' is not "
                "supported: qonnx's executor and Quant lowerings do not enter ONNX subgraphs"
            )
    return None


def layout_source_problem(op: Operator, graph: onnx.GraphProto) -> str | None:
    """A layout-source op (Conv, pools, ... : written in ONNX form on channels-last values
    for the layout pass to permute around) in an ONNX subgraph, where the pass does not
    go, would compute on the wrong axes; None where there is none."""
    from layout.classes import classify
    from layout.graph import subgraphs
    from layout.op_table import Kind

    for node in graph.node:
        if classify(node).kind is Kind.IMPLICIT:
            return (
                f"{op.name} subgraph '{graph.name}' holds {node.op_type} '{node.name}': the "
                "layout pass, which puts it in channels-first form, does not enter ONNX "
                "subgraphs"
            )
        for inner in subgraphs(node):
            if problem := layout_source_problem(op, inner):
                return problem
    return None


def _check(op: Operator, problems: list[str | None]) -> None:
    for problem in problems:
        if problem is not None:
            raise ConversionError(problem, op.where)


def if_(b: GraphBuilder, op: Operator) -> None:
    """ONNX If; where its branches or arguments hold quantized tensors, or a branch holds a
    layout-source op (Conv, pools: only the main graph is put in channels-first form), both
    branches inline and a Where picks the result."""
    branches = [(_subgraph(b, op, f"{label}_subgraph_index"), label) for label in ("then", "else")]
    args = list(op.inputs[1:])
    for sg, label in branches:
        if len(sg.inputs) != len(args) or len(sg.outputs) != len(op.outputs):
            raise ConversionError(
                f"IF's {label} subgraph '{sg.name}' takes {len(sg.inputs)} inputs and gives "
                f"{len(sg.outputs)} outputs; the IF has {len(args)} and {len(op.outputs)}",
                op.where,
            )
    crossing = _crossing_problem(op, [(b.subgraph, i) for i in (*args, *op.outputs)])
    assigns = any(o.name == "ASSIGN_VARIABLE" for sg, _ in branches for o in sg.operators)
    if crossing or assigns or any(_subgraph_problem(op, sg) for sg, _ in branches):
        _if_inline(b, op, [sg for sg, _ in branches], args)
        return
    graphs = []
    for sg, label in branches:
        child = _child(b, sg, inline=False)
        _bind(child, sg, b, args)
        _run(child)
        graphs.append(_graph(child, f"{label}_{sg.name}", [], _outputs(child)))
    if any(layout_source_problem(op, g) for g in graphs):  # inline: the layout pass sees it
        _if_inline(b, op, [sg for sg, _ in branches], args)
        return
    outs = b.emit(
        "If", [_typed_input(b, op.inputs[0])], n_outputs=len(op.outputs),
        then_branch=graphs[0], else_branch=graphs[1], doc_string="TFLite IF",
    )  # fmt: skip
    for idx, name in zip(op.outputs, outs, strict=True):
        b.set_output(idx, name)


def _if_inline(b: GraphBuilder, op: Operator, branches: list[Subgraph], args: list[int]) -> None:
    """Both branches computed, ``Where(cond, then, else)`` per output: exact, as ONNX ops have
    no side effects and an unselected NaN or Inf does not pass a Where. TFLite's IF copies raw
    bytes between its tensors and the branches', so each pair must share its grid and shape
    (the Where must not broadcast)."""
    pairs = [(b.subgraph.tensors[o], [sg.tensors[sg.outputs[k]] for sg in branches])
             for k, o in enumerate(op.outputs)]  # fmt: skip
    pairs += [(b.subgraph.tensors[a], [sg.tensors[sg.inputs[k]] for sg in branches])
              for k, a in enumerate(args)]  # fmt: skip
    for outer, inner in pairs:
        for t in inner:
            if (
                _grid(t) != _grid(outer)
                or t.shape_signature != outer.shape_signature
                or any(d < 0 for d in outer.shape_signature)
            ):
                raise ConversionError(
                    f"IF tensor '{outer.name}' and its branch tensor '{t.name}' differ in "
                    "shape or quantization (or the shape is dynamic)",
                    op.where,
                )
    variables = _variables(b)
    before = dict(variables.values)
    results, assigned = [], []
    for sg in branches:
        variables.values = dict(before)
        child = _child(b, sg, inline=True)
        _bind(child, sg, b, args)
        _run(child)
        results.append([child.input(i) for i in sg.outputs])
        assigned.append(variables.values)
    cond = _typed_input(b, op.inputs[0])
    for idx, then_value, else_value in zip(op.outputs, *results, strict=True):
        b.set_output(idx, b.emit("Where", [cond, then_value, else_value])[0])
    # a variable either branch assigns holds the taken branch's value afterwards
    variables.values = dict(before)
    for key in {*assigned[0], *assigned[1]}:
        then_value, else_value = assigned[0].get(key), assigned[1].get(key)
        if then_value == else_value:
            variables.values[key] = then_value
        elif then_value is None or else_value is None:
            raise ConversionError(
                f"IF assigns variable '{key[1]}' in one branch before it has any value",
                op.where,
            )
        else:
            variables.values[key] = b.emit("Where", [cond, then_value, else_value])[0]


def _grid(t) -> tuple | None:
    q = t.quant
    return None if q is None else (q.scale.tolist(), q.zero_point.tolist(), q.bit_width)


def call_once(b: GraphBuilder, op: Operator) -> None:
    """The initializer subgraph, inline: it runs before anything else reads the variables."""
    sg = _subgraph(b, op, "init_subgraph_index")
    if sg.inputs or sg.outputs:
        raise ConversionError("CALL_ONCE's subgraph must have no inputs or outputs", op.where)
    if b.states.enabled:
        _initial_states(b, op, sg)
        return
    assigned = dict(b.states.assigned)  # initializing is no state carried over
    _run(_child(b, sg, inline=True))
    b.states.assigned = assigned


def _initial_states(b: GraphBuilder, op: Operator, sg: Subgraph) -> None:
    """--state-io: the initializer converted aside (its nodes emitted nowhere) and evaluated;
    each value it assigns is a state's initial value, the variable holding the state input
    instead."""
    from onnx import numpy_helper

    from tflite2qonnx.initial_values import evaluate

    if b.nested:
        raise ConversionError("CALL_ONCE inside an IF or WHILE subgraph (--state-io)", op.where)
    variables = _variables(b)
    child = _child(b, sg, inline=True)
    child.nodes, child.initializers, child._producer = [], [], {}
    before = dict(variables.values)
    _run(child)
    assigned = {k: v for k, v in variables.values.items() if before.get(k) != v}
    values = {i.name: numpy_helper.to_array(i) for i in child.initializers}
    if computed := [v for v in assigned.values() if v not in values]:
        values.update(evaluate(child.nodes, child.initializers, computed, b.opset, op.where))
    for key, value in assigned.items():
        variables.values[key] = resource_state(b, key, values[value])


def var_handle(b: GraphBuilder, op: Operator) -> None:
    key = (str(op.options.get("container", "")), str(op.options.get("shared_name", "")))
    _variables(b).handles[(b.subgraph.index, op.outputs[0])] = key


def _key(b: GraphBuilder, op: Operator) -> tuple[str, str]:
    return _handle(b, op.inputs[0], op)


def _handle(b: GraphBuilder, idx: int, op: Operator) -> tuple[str, str]:
    """The variable a resource tensor of ``b``'s subgraph names."""
    key = _variables(b).handles.get((b.subgraph.index, idx))
    if key is None:
        raise ConversionError(
            f"{op.name}'s resource tensor '{b.tensor(idx).name}' comes from no VAR_HANDLE",
            op.where,
        )
    return key


def assign_variable(b: GraphBuilder, op: Operator) -> None:
    if b.nested:
        raise ConversionError(
            "ASSIGN_VARIABLE inside an IF or WHILE subgraph is not supported (a side effect "
            "an ONNX subgraph cannot express)",
            op.where,
        )
    value = b.tensor(op.inputs[1])
    if value.quant is not None:
        raise ConversionError(f"quantized variable '{value.name}' is not supported", op.where)
    key = _key(b, op)
    _variables(b).values[key] = b.input(op.inputs[1])
    resource_assigned(b, key)


def read_variable(b: GraphBuilder, op: Operator) -> None:
    key = _key(b, op)
    value = _variables(b).values.get(key)
    if value is None:
        raise ConversionError(
            f"READ_VARIABLE of variable '{key[1]}' before any ASSIGN_VARIABLE", op.where
        )
    if b.tensor(op.outputs[0]).quant is not None:
        raise ConversionError("quantized variables are not supported", op.where)
    b.set_output(op.outputs[0], b.emit("Identity", [value])[0])
