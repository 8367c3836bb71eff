"""Values computed from constants alone, evaluated at conversion: a resource variable's initial
value that CALL_ONCE's subgraph computes (a FILL, a NEG of a constant) rather than assigns as
a constant, recorded as the state's ``initial`` under --state-io.

The nodes are the converted subgraph's own (the same ops the default conversion runs inline),
their Quant nodes written as standard ops computing TFLite's quantize, run by onnx's
reference evaluator: no TensorFlow, and no session for a graph this small.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import helper

from qonnx_ingest.errors import ConversionError


def evaluate(
    nodes: Sequence[onnx.NodeProto],
    initializers: Sequence[onnx.TensorProto],
    names: Sequence[str],
    opset: int,
    where: str,
) -> dict[str, np.ndarray]:
    """The values ``names`` computed by ``nodes`` from ``initializers`` (the graph has no
    inputs); a node that cannot be evaluated is a ConversionError at ``where``."""
    from onnx.reference import ReferenceEvaluator

    from qonnx_ingest.quant_lowering import lower_graph_quants

    outputs = [helper.make_empty_tensor_value_info(n) for n in names]
    graph = helper.make_graph(list(nodes), "initial_values", [], outputs, list(initializers))
    try:
        lower_graph_quants(graph, tflite_rounding=True)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        values = ReferenceEvaluator(model).run(None, {})
    except Exception as exc:  # NotLowerable or the evaluator failing: the same refusal
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConversionError(
            f"CALL_ONCE's initial values cannot be computed at conversion ({message})", where
        ) from None
    return dict(zip(names, (np.asarray(v) for v in values), strict=True))
