"""Running a converted model with qonnx's reference executor, as tests and --verify do."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping

import numpy as np
import onnx


def with_static_shapes(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """A copy whose graph inputs carry the feeds' shapes and whose other shapes are re-inferred.

    qonnx's executor allocates every tensor from its value_info, so symbolic dims (a dynamic
    batch) must be fixed before ``execute_onnx``. Shapes come from the linear-time inference
    that finishing uses (the same shapes as qonnx's InferShapes, without its cleanup), with
    onnx's data propagation: without it a size computed at run time stays unknown, and qonnx's
    executor warns "Output shapes disagree" at every node after it.
    """
    from qonnx_ingest.finish import infer_shapes

    model = copy.deepcopy(model)
    if all(_static_shape(vi) == tuple(feeds[vi.name].shape) for vi in _fed(model, feeds)):
        # nothing to fix: keep the value_info some qonnx ops (channels-last Conv) need
        return infer_shapes(model)
    for vi in model.graph.input:
        if vi.name in feeds:
            dims = vi.type.tensor_type.shape.dim
            for dim, size in zip(dims, feeds[vi.name].shape, strict=True):
                dim.Clear()
                dim.dim_value = int(size)
    for vi in (*model.graph.output, *model.graph.value_info):
        for dim in vi.type.tensor_type.shape.dim:
            if not dim.HasField("dim_value"):
                dim.Clear()
    del model.graph.value_info[:]
    try:  # sizes computed from Shape(x) (a recurrent cell's zero state) become static too
        return infer_shapes(model, data_prop=True)
    except Exception:  # onnx's data propagation refused something plain inference accepts
        return infer_shapes(model)


def _fed(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[onnx.ValueInfoProto]:
    return [vi for vi in model.graph.input if vi.name in feeds]


def _static_shape(vi: onnx.ValueInfoProto) -> tuple[int, ...] | None:
    dims = vi.type.tensor_type.shape.dim
    if not all(d.HasField("dim_value") for d in dims):
        return None
    return tuple(d.dim_value for d in dims)


def executor_for(
    model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]
) -> Callable[[Mapping[str, np.ndarray]], dict[str, np.ndarray]]:
    """qonnx's ``execute_onnx`` on ``model``, made static for the shapes of ``feeds`` once.

    The returned function runs feeds of those shapes: the copy, the shape inference and the
    ModelWrapper are made once per shape rather than once per call (a test comparing 32
    samples one at a time ran them 32 times).
    """
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx

    wrapper = ModelWrapper(with_static_shapes(model, feeds))
    names = [o.name for o in model.graph.output]

    def run(inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        result = execute_onnx(wrapper, dict(inputs))
        return {name: result[name] for name in names}

    return run


def execute_qonnx(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs of ``model`` on ``feeds`` from ``qonnx.core.onnx_exec.execute_onnx``."""
    return executor_for(model, feeds)(feeds)
