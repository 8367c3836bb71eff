"""WHILE(cond, body) as ONNX ``Loop(cond(v0), v0)`` whose body computes ``v = body(v)`` and
then ``cond(v)``; the first test runs inline before the Loop.

Full-integer models (tf.while_loop, non-unrolled RNNs) quantize inside the loop. qonnx's
executor hands the Loop node whole to onnxruntime, which has no Quant, and its lowerings do
not enter subgraphs; so the body's quantizers (its own and those of the per-step test) are
written as standard ops computing TFLite's quantize exactly: ``round(x / s)`` with ties away
from zero, plus the zero point, clipped, dequantized (``quant_lowering``'s TFLite form; a
Quant, HALF_UP, rounds after adding the zero point, off by one on such ties). The first test
and the WHILE's results stay at the top level with their Quant nodes, where consumers read
widths. A quantized loop variable keeps one grid in the WHILE and both subgraphs (TFLite
copies its raw bytes between them).
"""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.quant_lowering import NotLowerable, lower_graph_quants
from tflite2qonnx.graph import GraphBuilder, tensor_value_info
from tflite2qonnx.model import Operator, Subgraph
from tflite2qonnx.ops.control.flow import (
    _bind,
    _check,
    _child,
    _graph,
    _grid,
    _outputs,
    _renamed,
    _run,
    _subgraph,
    _typed_input,
    layout_source_problem,
)


def while_(b: GraphBuilder, op: Operator) -> None:
    cond_sg = _subgraph(b, op, "cond_subgraph_index")
    body_sg = _subgraph(b, op, "body_subgraph_index")
    n = len(op.inputs)
    if (
        (len(cond_sg.inputs), len(cond_sg.outputs)) != (n, 1)
        or (len(body_sg.inputs), len(body_sg.outputs)) != (n, n)
        or len(op.outputs) != n
    ):
        raise ConversionError(
            f"WHILE's subgraphs do not take and give its {n} loop variables", op.where
        )
    _check_carried_grids(op, b.subgraph, cond_sg, body_sg)
    # the first test, inline
    first = _child(b, cond_sg, inline=True)
    _bind(first, cond_sg, b, list(op.inputs))
    _run(first)
    (go,) = (first.input(i) for i in cond_sg.outputs)
    # the body graph: (iteration, condition, v...) -> (cond(body(v)), body(v)...)
    body = _child(b, body_sg, inline=False)
    iteration, carried = body.fresh("while_iteration"), body.fresh("while_condition")
    formal = [body.fresh(f"{body.tensor_name(i)}_in") for i in body_sg.inputs]
    for local, name in zip(body_sg.inputs, formal, strict=True):
        body.bind(local, name=name)
    _run(body)
    new_values = [body.input(i) for i in body_sg.outputs]
    test = _child(body, cond_sg, inline=True)
    for local, name in zip(cond_sg.inputs, new_values, strict=True):
        test.bind(local, name=name)
    _run(test)
    (again,) = (test.input(i) for i in cond_sg.outputs)
    outs = _outputs(body)
    cond_out = body.fresh("while_continue")
    body.nodes.append(helper.make_node("Identity", [again], [cond_out], name=cond_out))
    inputs = [
        helper.make_tensor_value_info(iteration, TensorProto.INT64, []),
        helper.make_tensor_value_info(carried, TensorProto.BOOL, []),
        *(
            _renamed(tensor_value_info(f, body_sg.tensors[i]), f)
            for f, i in zip(formal, body_sg.inputs, strict=True)
        ),
    ]
    cond_info = helper.make_tensor_value_info(cond_out, TensorProto.BOOL, [])
    graph = _graph(body, f"while_{body_sg.name}", inputs, outs)
    graph.output.insert(0, cond_info)
    _standard_ops_only(op, graph, b.opset)
    _check(op, [layout_source_problem(op, graph)])
    loop = b.emit(
        "Loop", ["", go, *(_typed_input(b, i) for i in op.inputs)], n_outputs=n, body=graph,
        doc_string=f"TFLite WHILE, body subgraph '{body_sg.name}'",
    )  # fmt: skip
    for idx, name in zip(op.outputs, loop, strict=True):
        b.set_output(idx, name)


def _check_carried_grids(op: Operator, outer: Subgraph, cond: Subgraph, body: Subgraph) -> None:
    """Loop variable k is one value on one grid throughout: TFLite's WHILE copies raw bytes
    between the WHILE's tensors and its subgraphs' (outer input and output, condition input,
    body input and output), so differing scales or zero points would reinterpret it."""
    for k, idx in enumerate(op.inputs):
        first = outer.tensors[idx]
        others = [
            outer.tensors[op.outputs[k]],
            cond.tensors[cond.inputs[k]],
            body.tensors[body.inputs[k]],
            body.tensors[body.outputs[k]],
        ]
        for t in others:
            if _grid(t) != _grid(first):
                raise ConversionError(
                    f"WHILE loop variable {k}: tensors '{t.name}' and '{first.name}' differ in "
                    f"quantization ({_grid(t)} vs {_grid(first)}); the loop carries raw bytes",
                    op.where,
                )


def _standard_ops_only(op: Operator, graph: onnx.GraphProto, opset: int) -> None:
    """The Loop body's Quant nodes, in place, as the standard ops computing TFLite's quantize
    (the module's docstring): qonnx's executor hands the Loop node whole to onnxruntime,
    which has no Quant. Each Quant's input type comes from shape inference on the body (a
    bit-exact kernel's float64 result is divided in float64)."""
    from qonnx_ingest.finish import infer_shapes

    typed = infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))
    types = {v.name: v.type.tensor_type.elem_type for v in typed.graph.value_info}
    try:
        lower_graph_quants(graph, types, tflite_rounding=True)
    except NotLowerable as exc:
        raise ConversionError(
            f"WHILE body '{graph.name}': {exc} has no standard-op form inside an ONNX Loop",
            op.where,
        ) from None
    for node in graph.node:
        if node.domain not in ("", "ai.onnx"):
            raise ConversionError(
                f"WHILE body '{graph.name}': {node.domain} op {node.op_type} '{node.name}' "
                "cannot run inside an ONNX Loop (onnxruntime runs the Loop whole)",
                op.where,
            )
