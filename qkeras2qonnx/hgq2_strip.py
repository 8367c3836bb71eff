"""Strip one HGQ2 layer into its plain layer and record its quantizers in the layer map.

Weights: the plain layer holds marker values (``markers``) where HGQ2's quantized weight goes;
``reinsert`` writes the quantized values there behind a covering Quant (``covering_spec``).
Inputs and output: the wrapper computes each fixed-point quantizer with TensorFlow ops
(``hgq2_quantizer.tf_apply``; tf2onnx writes them as standard ONNX ops) and marks the result;
``reinsert`` turns the marker into the covering Quant, or, for a quantizer one Quant computes
(``plain_spec``), the marker alone becomes that Quant. The per-element widths go to the
metadata (``qkeras2qonnx.hgq2_widths``, by Quant node name).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from qkeras2qonnx.hgq2_layers import rule_for_hgq2
from qkeras2qonnx.hgq2_quantizer import Fixed, covering_spec, plain_spec
from qkeras2qonnx.hgq2_sums import check_sums
from qkeras2qonnx.layer_map import LayerMap, MapEntry
from qkeras2qonnx.markers import WEIGHT_CAPACITY, weight_markers
from qkeras2qonnx.reinsert import node_name
from qonnx_ingest.errors import ConversionError

Step = tuple[Fixed | None, int | None]  # (computed with TF ops, marker id)


def is_hgq2(layer: Any) -> bool:
    """True for layers of the ``hgq`` package (HGQ2)."""
    return type(layer).__module__.split(".")[0] == "hgq"


def clone_hgq2_layer(layer: Any, path: str, layer_map: LayerMap, assignments: list) -> Any:
    """The plain stand-in of ``layer`` (a Keras 3 layer), its quantizers recorded."""
    plan = rule_for_hgq2(layer, path)(layer, path)
    check_sums(layer, plan, path, layer_map.inexact_sums)
    try:
        inner = plan.layer_class.from_config(plan.config)
    except Exception as exc:
        raise ConversionError(
            f"cannot rebuild as plain {plan.layer_class.__name__}: {exc}", path
        ) from exc
    weights = list(plan.weights)
    for index, (role, q) in enumerate(plan.weight_quantizers):
        if q is not None:
            weights[index] = _record_weight(q, role, weights[index], path, layer_map)
    roles = ["input"] if len(plan.inputs) == 1 else [f"input{j}" for j in range(len(plan.inputs))]
    pairs = zip(plan.inputs, roles, strict=True)
    inputs = [_record_activation(q, r, path, layer_map) for q, r in pairs]
    output = _record_activation(plan.output, "output", path, layer_map, plan.output_in_layer)
    if getattr(plan, "inner", None):  # quantizers inside the layer (hgq2_recurrent)
        inner.inner_steps = [_record_activation(q, r, path, layer_map) for r, q in plan.inner]
    if weights:
        assignments.append((inner, weights))
    return wrapper_class()(inner, inputs, output)


def _record_weight(q: Fixed, role: str, values: np.ndarray, path: str, layer_map: LayerMap):
    where = f"{path} {role}"
    spec = covering_spec(q, where, values)
    offset = layer_map.weight_count
    if offset + values.size > WEIGHT_CAPACITY:
        raise ConversionError("too many quantized weights to mark in one model", where)
    layer_map.weight_count += values.size
    entry = MapEntry(path, role, _describe(q), spec, values, offset)
    layer_map.entries.append(entry)
    layer_map.widths[node_name(entry)] = q.widths()
    return weight_markers(offset, values.shape)


def _record_activation(
    q: Fixed | None, role: str, path: str, layer_map: LayerMap, in_layer: bool = False
) -> Step:
    """``in_layer``: the plain layer's table holds ``q``'s values already; only the covering
    Quant is added."""
    if q is None:
        return None, None
    marker = len(layer_map.outputs)
    layer_map.outputs[marker] = path
    spec = plain_spec(q)
    computed = q if spec is None and not in_layer else None
    if spec is None:
        spec = covering_spec(q, f"{path} {role}")
    entry = MapEntry(path, role, _describe(q), spec, None, marker)
    layer_map.entries.append(entry)
    layer_map.widths[node_name(entry)] = q.widths()
    if computed is not None:
        layer_map.forms[node_name(entry)] = q.form()
    elif in_layer:
        layer_map.forms[node_name(entry)] = "HGQ2 table lookup (Gather) of the layer's function"
    return computed, marker


def _describe(q: Fixed) -> str:
    return f"hgq2 {q.name} ({q.round_mode}, {q.overflow_mode})"


@functools.cache
def wrapper_class() -> type:
    """The Keras 3 layer that runs the plain layer between the HGQ2 quantizers' ops and
    markers (built lazily: it needs Keras and TensorFlow)."""
    import keras

    from qkeras2qonnx.hgq2_quantizer import tf_apply
    from qkeras2qonnx.markers import mark

    def step(x: Any, plan: Step) -> Any:
        fixed, marker = plan
        if fixed is not None:
            x = tf_apply(fixed, x)
        return x if marker is None else mark(x, marker)

    class HGQ2Plain(keras.layers.Layer):
        """``inner`` under the HGQ2 layer's name, with its quantizers around it."""

        def __init__(self, inner: Any, inputs: list[Step], output: Step, **kwargs: Any):
            super().__init__(name=inner.name, **kwargs)
            self.inner = inner
            self.input_steps = inputs
            self.output_step = output

        def call(self, inputs: Any, **kwargs: Any) -> Any:
            # the original call's keywords (training, mask=None) change nothing at inference
            kwargs.update(kwargs.pop("kwargs", None) or {})  # HGQ2's wrapped call
            given = {k for k, v in kwargs.items() if v is not None and k != "training"}
            if given:
                raise ConversionError(f"call arguments {sorted(given)}: not supported", self.name)
            if isinstance(inputs, list | tuple):
                steps = self.input_steps  # one per input, or one (None, None): no iq
                steps = steps if len(steps) == len(inputs) else [(None, None)] * len(inputs)
                xs = [step(x, s) for x, s in zip(inputs, steps, strict=True)]
                return step(self.inner(xs), self.output_step)
            return step(self.inner(step(inputs, self.input_steps[0])), self.output_step)

        def compute_output_shape(self, input_shape: Any) -> Any:
            return self.inner.compute_output_shape(input_shape)

    return HGQ2Plain
