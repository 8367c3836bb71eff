"""The FINN form's float graph inputs, typed: FINN's ``finn_datatype`` annotation FLOAT32.

A QKeras model's first layer often reads the unquantized float input (RN06's first Conv).
FINN leaves that layer on the host, but its lowering makes it an ``Im2Col`` on the graph
input, and qonnx's Im2Col executor reads the input's ``finn_datatype`` annotation, which
nothing writes on a graph input: it fails (``'NoneType' object has no attribute 'value'``).
FLOAT32 is the type FINN assumes for an unannotated tensor, so the annotation changes nothing
else.
"""

from __future__ import annotations

import onnx
from onnx import TensorProto

from qonnx_ingest.passes import PassResult


def float_inputs_typed(model: onnx.ModelProto) -> PassResult:
    """Each float32 graph input without a ``finn_datatype`` annotated FLOAT32."""
    graph = model.graph
    annotations = {a.tensor_name: a for a in graph.quantization_annotation}
    modified = False
    for info in graph.input:
        if info.type.tensor_type.elem_type != TensorProto.FLOAT:
            continue
        annotation = annotations.get(info.name)
        if annotation is None:
            annotation = graph.quantization_annotation.add(tensor_name=info.name)
        if any(e.key == "finn_datatype" for e in annotation.quant_parameter_tensor_names):
            continue
        entry = annotation.quant_parameter_tensor_names.add()
        entry.key, entry.value = "finn_datatype", "FLOAT32"
        modified = True
    return model, modified
