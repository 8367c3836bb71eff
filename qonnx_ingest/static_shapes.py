"""Fixing a model's dynamic input dimensions (``--batch-size``, ``--input-shape``).

FINN, hls4ml and qonnx's inference cost need static shapes: with a symbolic batch qonnx counts
0 MACs and its executor allocates empty tensors. Only dynamic dimensions may be fixed; a
dimension the source model fixed is the model's, and changing it would contradict its
reshapes, so asking for another size is refused.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

import onnx

from qonnx_ingest.errors import InputError
from qonnx_ingest.passes import PassResult


def parse_dims(text: str) -> tuple[int, ...]:
    """``1,3,224,224`` (or ``1x3x224x224``) -> (1, 3, 224, 224); every size positive."""
    parts = text.replace("x", ",").split(",")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        dims = ()
    if not dims or any(d < 1 for d in dims):
        raise InputError(f"expected positive sizes like 1,3,224,224, got {text!r}")
    return dims


def fix_input_shapes(
    model: onnx.ModelProto,
    *,
    batch_size: int | None = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
) -> PassResult:
    """A copy of ``model`` whose graph inputs have ``shapes`` (by input name, in the converted
    model's layout) and, for the others, dimension 0 set to ``batch_size`` where it is dynamic;
    every other shape is re-inferred. ``model`` itself, unmodified, when nothing changes."""
    shapes = dict(shapes or {})
    if batch_size is not None and (isinstance(batch_size, bool) or int(batch_size) < 1):
        raise InputError(f"batch size must be a positive integer, got {batch_size!r}")
    inits = {t.name for t in model.graph.initializer}
    inputs = [vi for vi in model.graph.input if vi.name not in inits]
    names = [vi.name for vi in inputs]
    unknown = [n for n in shapes if n not in names]
    if unknown:
        raise InputError(
            f"--input-shape names {unknown[0]!r}, which is not a model input; the inputs are: "
            + ", ".join(f"'{vi.name}' {_dims_text(_dims(vi))}" for vi in inputs)
        )
    targets = {}
    for vi in inputs:
        current = _dims(vi)
        if vi.name in shapes:
            targets[vi.name] = _checked(vi.name, current, tuple(shapes[vi.name]))
        elif batch_size is not None and current:
            if current[0] is not None and current[0] != batch_size:
                raise InputError(
                    f"the batch of input '{vi.name}' is fixed at {current[0]} by the model: "
                    f"--batch-size changes only a dynamic batch"
                )
            targets[vi.name] = (int(batch_size), *current[1:])
    if all(targets[n] == _dims(vi) for vi in inputs if (n := vi.name) in targets):
        return model, False
    from qonnx_ingest.finish import infer_shapes

    model = copy.deepcopy(model)
    for vi in model.graph.input:
        for dim, size in zip(vi.type.tensor_type.shape.dim, targets.get(vi.name, ()), strict=False):
            if size is not None:
                dim.Clear()
                dim.dim_value = int(size)
    for vi in model.graph.output:
        for dim in vi.type.tensor_type.shape.dim:
            if not dim.HasField("dim_value"):
                dim.Clear()
    del model.graph.value_info[:]
    return infer_shapes(model), True


def _dims(vi: onnx.ValueInfoProto) -> tuple[int | None, ...]:
    return tuple(
        d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim
    )


def _dims_text(dims: Sequence[int | None]) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def _checked(name: str, current: tuple[int | None, ...], wanted: tuple[int, ...]) -> tuple:
    if len(wanted) != len(current):
        raise InputError(
            f"--input-shape gives {len(wanted)} dimensions for '{name}', which has "
            f"{len(current)}: {_dims_text(current)}"
        )
    for k, (have, want) in enumerate(zip(current, wanted, strict=True)):
        if have is not None and have != want:
            raise InputError(
                f"--input-shape '{name}': dimension {k} is fixed at {have} by the model "
                f"({_dims_text(current)}); only the dynamic ones (?) can be set"
            )
    return wanted
