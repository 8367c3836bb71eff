"""Shapes on record for the FINN form's passes, the same bytes on every run."""

from __future__ import annotations

import onnx

from qonnx_ingest.names import graph_names, unique_name


def with_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every tensor's shape on record (qonnx's InferShapes, which knows FINN's
    custom ops). That inference gives each constant several nodes share a copy of its own and
    runs each custom op as a stand-in, both under random names: the copies are renamed after
    their reader and the stand-ins' leftover shapes dropped, so the output is the same bytes
    on every run."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.infer_shapes import InferShapes

    before = graph_names(model.graph)
    model = ModelWrapper(model).transform(InferShapes()).model
    graph = model.graph
    _name_new_constants(graph, before)
    named = {o for node in graph.node for o in node.output}
    kept = [v for v in graph.value_info if v.name in named]
    del graph.value_info[:]
    graph.value_info.extend(kept)
    return model


def _name_new_constants(graph: onnx.GraphProto, before: set[str]) -> None:
    constants = {i.name: i for i in graph.initializer if i.name not in before}
    if not constants:
        return
    taken = graph_names(graph)
    renamed: dict[str, str] = {}
    for node in graph.node:
        for k, name in enumerate(node.input):
            if name in constants and name not in renamed:
                renamed[name] = unique_name(f"{node.name or node.output[0]}_param{k}", taken)
                constants[name].name = renamed[name]
            node.input[k] = renamed.get(name, name)
