"""Names of dynamic dimensions that depend on the model, not on how or when it was converted.

A dim_param states only one thing: tensors whose dims share the name have equal sizes there.
Two kinds of name reach our graphs without meaning more than that: tf2onnx's ``unk__N`` (N from
its process-wide counter, so the second conversion in a process gets other numbers) and onnx
shape inference's own fresh ``unk__N`` for a size it cannot derive. Left in value_info, an
inferred name outlives the graph it was inferred on: tf2onnx writes one NHWC->NCHW move either
as a Transpose or as a Reshape to ``[-1, ...]`` (its optimizers visit nodes in memory-address
order), inference carries the batch symbol through the first but not the second, and the
equalities stayed in the value_info of the finished model after the 1-D-convolution rewrite had
removed both forms. So finishing forgets every generated name before it infers shapes
(``forget_generated_dims``): the equalities it writes are those the current graph proves, in
names onnx numbers in node order. Graph inputs and outputs get names of their own instead
(``dynamic_dim_name``).
"""

from __future__ import annotations

import re

import onnx

_GENERATED = re.compile(r"unk__\d+")  # tf2onnx's make_name("unk") and onnx's SymbolTable


def dynamic_dim_name(tensor: str, axis: int) -> str:
    """The name of a graph input's or output's dynamic dim: ``batch`` first, then per tensor."""
    return "batch" if axis == 0 else f"{tensor}_dim{axis}"


def is_generated(name: str) -> bool:
    """True for a dim name that tf2onnx or onnx shape inference made up."""
    return _GENERATED.fullmatch(name) is not None


def forget_generated_dims(graph: onnx.GraphProto) -> bool:
    """Clear every generated dim name in the value_info of ``graph`` and of its subgraphs (the
    dim becomes unknown, for inference to name again); inputs and outputs are left alone.
    True if any name was cleared."""
    cleared = False
    for value in graph.value_info:
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_param") and is_generated(dim.dim_param):
                dim.ClearField("dim_param")
                cleared = True
    for node in graph.node:
        for attr in node.attribute:
            for sub in (attr.g,) if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                cleared |= forget_generated_dims(sub)
    return cleared


def _static(value: onnx.ValueInfoProto) -> bool:
    return all(d.HasField("dim_value") for d in value.type.tensor_type.shape.dim)


def stale_after_static_inputs(graph: onnx.GraphProto) -> bool:
    """True when every graph input has a static shape but some value_info does not.

    Then those shapes were inferred before constant folding made them static: a recurrent
    cell's zero state is ``ConstantOfShape(Concat(Shape(x)[:1], units))``, which onnx's
    inference (without data propagation) leaves unknown, and every step after it inherits the
    unknown batch; folding turns it into a [batch, units] initializer, and a second inference
    carries that through (qkeras2qonnx --batch-size on a QLSTM: 568 of 626 value_infos)."""
    inits = {t.name for t in graph.initializer}
    inputs = [v for v in graph.input if v.name not in inits]
    return all(_static(v) for v in inputs) and not all(_static(v) for v in graph.value_info)
