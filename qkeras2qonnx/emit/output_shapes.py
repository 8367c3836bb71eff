"""Graph output shapes that tf2onnx left out, taken from the Keras model.

tf2onnx lowers some ops with run-time shape arithmetic (an ``Einsum`` becomes Shape, Gather,
Concat, Reshape around a MatMul), which onnx's shape inference cannot follow; when such an op
produces a model output, the output has a type but no shape and ``onnx.checker`` rejects the
model ("Field 'shape' of 'type' is required but missing"). The Keras model knows that shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import onnx

from qonnx_ingest.passes import PassResult


def keras_output_dims(model: Any) -> dict[str, tuple[int | None, ...]] | None:
    """The Keras model's output shapes by output name (None for a dynamic dimension), or None
    if unknown."""
    try:
        outputs = list(model.outputs)
        names = list(getattr(model, "output_names", None) or ())
        dims = [tuple(None if d is None else int(d) for d in t.shape) for t in outputs]
    except (AttributeError, TypeError, ValueError):  # subclassed model, unknown rank
        return None
    return dict(zip(names, dims, strict=True)) if len(names) == len(dims) else None


def fill_output_shapes(
    model: onnx.ModelProto, *, dims: Mapping[str, tuple[int | None, ...]] | None
) -> PassResult:
    """Shape each graph output that has none from ``dims`` (by output name; one unnamed-match
    output takes the only Keras shape); a dynamic batch dimension takes the first input's
    symbolic batch name. An output left unmatched stays as it is (onnx.checker then says so)."""
    outputs = model.graph.output
    missing = [vi for vi in outputs if not vi.type.tensor_type.HasField("shape")]
    if not missing or not dims:
        return model, False
    only = next(iter(dims.values())) if len(dims) == len(outputs) == 1 else None
    batch = _batch_param(model)
    for vi in missing:
        shape = dims.get(vi.name, only)
        if shape is None:
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
