"""Graph output shapes that tf2onnx left out, taken from the Keras model.

tf2onnx lowers some ops with run-time shape arithmetic (an ``Einsum`` becomes Shape, Gather,
Concat, Reshape around a MatMul), which onnx's shape inference cannot follow; when such an op
produces a model output, the output has a type but no shape and ``onnx.checker`` rejects the
model ("Field 'shape' of 'type' is required but missing"). The Keras model knows that shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnx

from qonnx_ingest.passes import PassResult


def keras_output_dims(model: Any) -> list[tuple[int | None, ...]] | None:
    """The Keras model's output shapes (None for a dynamic dimension), or None if unknown."""
    try:
        outputs = list(model.outputs)
        return [tuple(None if d is None else int(d) for d in t.shape) for t in outputs]
    except (AttributeError, TypeError, ValueError):  # subclassed model, unknown rank
        return None


def fill_output_shapes(
    model: onnx.ModelProto, *, dims: Sequence[tuple[int | None, ...]] | None
) -> PassResult:
    """Shape each graph output that has none from ``dims`` (one per output, in order); a
    dynamic batch dimension takes the first input's symbolic batch name."""
    outputs = model.graph.output
    missing = [vi for vi in outputs if not vi.type.tensor_type.HasField("shape")]
    if not missing or dims is None or len(dims) != len(outputs):
        return model, False
    batch = _batch_param(model)
    for vi, shape in zip(outputs, dims, strict=True):
        if vi.type.tensor_type.HasField("shape"):
            continue
        target = vi.type.tensor_type.shape
        target.SetInParent()
        for k, size in enumerate(shape):
            dim = target.dim.add()
            if size is not None:
                dim.dim_value = size
            elif k == 0 and batch:
                dim.dim_param = batch
    return model, True


def _batch_param(model: onnx.ModelProto) -> str | None:
    for vi in model.graph.input:
        dims = vi.type.tensor_type.shape.dim
        if dims and dims[0].HasField("dim_param"):
            return dims[0].dim_param
    return None
