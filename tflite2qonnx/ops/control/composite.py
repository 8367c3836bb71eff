"""STABLEHLO_COMPOSITE: a named group of ops (``odml.*`` from litert-torch, ``tfl.*``) whose
options point to its decomposition subgraph, the computation the TFLite interpreter runs when
it has no kernel of its own for the name. Converted by inlining that subgraph, as CALL_ONCE's
initializer is, so the layout pass and the quantizers see its ops like any other.

TFLite hands the operands to the decomposition and takes its results back as raw bytes: a
quantized tensor and the subgraph tensor it meets must share their grid and shape, else the
values would be reinterpreted (refused, naming both).
"""

from __future__ import annotations

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator, Tensor
from tflite2qonnx.ops.control.flow import _bind, _child, _grid, _run, _subgraph


def stablehlo_composite(b: GraphBuilder, op: Operator) -> None:
    """The decomposition subgraph, inline; the composite's name and attributes are a hint to
    runtimes with a fused kernel, which computes the same values."""
    sg = _subgraph(b, op, "decomposition_subgraph_index")
    name = op.options.get("name") or "?"
    args = list(op.inputs)
    if len(sg.inputs) != len(args) or len(sg.outputs) != len(op.outputs):
        raise ConversionError(
            f"STABLEHLO_COMPOSITE '{name}': decomposition subgraph '{sg.name}' takes "
            f"{len(sg.inputs)} inputs and gives {len(sg.outputs)} outputs; the op has "
            f"{len(args)} and {len(op.outputs)}",
            op.where,
        )
    pairs = [(b.tensor(a), sg.tensors[sg.inputs[k]]) for k, a in enumerate(args)]
    pairs += [(b.tensor(o), sg.tensors[sg.outputs[k]]) for k, o in enumerate(op.outputs)]
    for outer, inner in pairs:
        if _differ(outer, inner):
            raise ConversionError(
                f"STABLEHLO_COMPOSITE '{name}': tensor '{outer.name}' and its decomposition "
                f"tensor '{inner.name}' differ in type, quantization or shape",
                op.where,
            )
    child = _child(b, sg, inline=True)
    _bind(child, sg, b, args)
    _run(child)
    for idx, inner in zip(op.outputs, sg.outputs, strict=True):
        b.set_output(idx, child.input(inner))


def _differ(outer: Tensor, inner: Tensor) -> bool:
    """Whether TFLite's byte copy between the two would change the values' meaning."""
    if outer.dtype != inner.dtype or _grid(outer) != _grid(inner):
        return True
    known = all(d >= 0 for d in (*outer.shape_signature, *inner.shape_signature))
    return known and tuple(outer.shape_signature) != tuple(inner.shape_signature)
