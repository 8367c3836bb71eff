"""--verify for QKeras: ``model.predict`` against the converted model.

The QKeras issue's rule: the QONNX output equals QKeras's within 1e-6 relative (float32
rounding of the last op only). Inputs are seeded uniform over the range of the model's input
quantizer (a QActivation on the input), else [-1, 1]; samples are fed one at a time, or in
batches of the converted model's fixed batch size (``--batch-size``).
"""

from __future__ import annotations

import os
import re
from typing import Any

import numpy as np
import onnx

from qkeras2qonnx.compat import keras as compat_keras
from qonnx_ingest.errors import InputError, ReferenceUnavailable
from qonnx_ingest.verification import (
    DEFAULT_INPUTS,
    INTEGER_RANGE,
    Verification,
    check_count,
    input_dtype,
    input_range,
    load_inputs,
    measure,
    output_grids,
    run_converted,
    seeded_values,
    within_relative,
)

RTOL = 1e-6


def verify(
    keras_model: Any,
    model: onnx.ModelProto,
    *,
    inputs: int = DEFAULT_INPUTS,
    seed: int = 0,
    inputs_path: str | os.PathLike | None = None,
) -> Verification:
    """Run ``keras_model`` (already loaded) and ``model`` on the same inputs and measure."""
    graph_inputs = _graph_inputs(model)
    names = [vi.name for vi in graph_inputs]
    if len(names) != len(keras_model.inputs):
        raise ValueError(f"{len(keras_model.inputs)} Keras inputs but {len(names)} ONNX inputs")
    order = _keras_order(keras_model, names)  # ONNX input names in Keras's input order
    shapes = {
        name: tuple(int(d) if d else 1 for d in t.shape[1:])
        for name, t in zip(order, keras_model.inputs, strict=True)
    }
    dtypes = {name: input_dtype(model, name) for name in names}
    if inputs_path is not None:
        samples = _shaped(load_inputs(inputs_path, names), shapes, dtypes, inputs_path)
    else:
        check_count(inputs)
        rng = np.random.default_rng(seed)
        bounds = _index_bounds(keras_model, order)
        samples = [
            {
                name: seeded_values(
                    rng,
                    dtypes[name],
                    shapes[name],
                    input_range(model, name),
                    bounds.get(name, INTEGER_RANGE),
                )
                for name in names
            }
            for _ in range(inputs)
        ]
    batch = _fixed_batch(graph_inputs)
    padded = [samples[i % len(samples)] for i in range(-(-len(samples) // batch) * batch)]
    feeds = [
        {n: np.stack([np.asarray(s[n], dtypes[n]) for s in padded[i : i + batch]]) for n in names}
        for i in range(0, len(padded), batch)
    ]
    ours, runner = run_converted(model, feeds, as_written=True)
    # the user's samples failing is their input's fault; seeded ones failing, the model's
    unusable = InputError if inputs_path is not None else ReferenceUnavailable
    reference = [_predict(keras_model, [f[n] for n in order], unusable) for f in feeds]
    grids = output_grids(model)
    results = []
    for index, out in enumerate(model.graph.output):
        refs = [r[index] for r in reference]
        agreement = measure(out.name, refs, [o[out.name] for o in ours], grids.get(out.name))
        agreement.reference = "the Keras model"
        agreement.passed = within_relative(agreement, refs, RTOL)
        agreement.tolerance = f"max abs error <= {RTOL:g} * max(1, |QKeras|)"
        results.append(agreement)
    return Verification(results, len(samples), f"{runner}; source: {_source(keras_model)} predict")


def _source(keras_model: Any) -> str:
    """What ran the reference: HGQ2 when any layer is HGQ2's, else QKeras."""
    from qkeras2qonnx.hgq2_layers.hgq2_strip import is_hgq2

    return (
        "HGQ2" if any(is_hgq2(layer) for layer in getattr(keras_model, "layers", ())) else "QKeras"
    )


def _keras_order(keras_model: Any, names: list[str]) -> list[str]:
    """The ONNX input names in the order Keras takes its inputs (by name where they match)."""
    keras_names = [str(n).split(":")[0] for n in getattr(keras_model, "input_names", None) or ()]
    return keras_names if sorted(keras_names) == sorted(names) else names


def _index_bounds(keras_model: Any, order: list[str]) -> dict[str, tuple[int, int]]:
    """Integer inputs read by an Embedding: ids in [0, input_dim), which Keras and ONNX's
    Gather both refuse beyond (by ONNX input name)."""
    bounds = {}
    for name, tensor in zip(order, keras_model.inputs, strict=True):
        for layer in getattr(keras_model, "layers", ()):
            dim = getattr(layer, "input_dim", None)
            if dim and any(tensor in _fed(node) for node in compat_keras.inbound_nodes(layer)):
                bounds[name] = (0, int(dim) - 1)
    return bounds


class _Same:
    """Identity comparison: ``tensor in list`` on Keras tensors would compare elementwise."""

    def __init__(self, items: Any):
        self.items = items if isinstance(items, list | tuple) else [items]

    def __contains__(self, tensor: Any) -> bool:
        return any(item is tensor for item in self.items)


def _fed(node: Any) -> _Same:
    """The tensors a Keras node was called on (tf_keras: one tensor or a list; Keras 3: a list)."""
    tensors = getattr(node, "input_tensors", None)
    return _Same([] if tensors is None else tensors)


def _shaped(samples: list[dict], shapes: dict, dtypes: dict, path) -> list[dict]:
    """The user's samples reshaped to the Keras input shapes (an InputError if they differ),
    as the input's type (a bool mask stays bool)."""
    out = []
    for s in samples:
        feed = {}
        for name, shape in shapes.items():
            given = np.asarray(s[name])
            x = given.astype(dtypes[name], copy=False)
            if dtypes[name].kind in "biu" and not np.array_equal(x, given):
                raise InputError(
                    f"{name} takes {dtypes[name]} values; its samples hold others "
                    f"(e.g. {given[x != given].flat[0]!r})",
                    str(path),
                )
            # exactly the Keras shape (channels last), with or without a batch of 1: an array
            # of another layout with as many elements is refused, never silently reshaped
            if x.shape not in (shape, (1, *shape)):
                raise InputError(
                    f"{name} has samples of shape {x.shape}, the Keras model takes {shape} "
                    "(channels last, as Keras lays it out): transpose or reshape the array, "
                    "samples first",
                    str(path),
                )
            feed[name] = x.reshape(shape)
        out.append(feed)
    return out


def _fixed_batch(graph_inputs: list[onnx.ValueInfoProto]) -> int:
    """The converted model's static batch size (``--batch-size``), or 1 for a dynamic one."""
    for vi in graph_inputs:
        dims = vi.type.tensor_type.shape.dim
        if dims and dims[0].HasField("dim_value") and dims[0].dim_value > 1:
            return dims[0].dim_value
    return 1


def _predict(
    keras_model: Any, arrays: list[np.ndarray], unusable: type[InputError]
) -> list[np.ndarray]:
    """The Keras model's outputs; ``unusable`` when Keras cannot run it on ``arrays`` (a layer
    that raises at run time): the conversion stands, the comparison cannot be made."""
    try:
        out = keras_model(arrays if len(arrays) > 1 else arrays[0], training=False)
    except Exception as exc:  # TensorFlow's errors, and whatever a layer's call raises
        text = str(exc).split("Call arguments received")[0]  # tf_keras appends the inputs
        text = " ".join(re.sub(r"\{\{function_node [^}]*\}\}", "", text).split()) or "no message"
        raise unusable(
            f"the Keras model cannot run on the verification inputs "
            f"({type(exc).__name__}: {text[:300]})"
        ) from exc
    outs = out if isinstance(out, list | tuple) else [out]
    return [np.asarray(o, np.float32) for o in outs]


def _graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    inits = {t.name for t in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in inits]
