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

from qkeras2qonnx.emit.layer_map import LayerMap, MapEntry
from qkeras2qonnx.emit.markers import WEIGHT_CAPACITY, weight_markers
from qkeras2qonnx.emit.reinsert import node_name
from qkeras2qonnx.hgq2_layers.hgq2_attention import check_einsums
from qkeras2qonnx.hgq2_layers.hgq2_quantizer import Fixed, covering_spec, plain_spec
from qkeras2qonnx.hgq2_layers.hgq2_registry import rule_for_hgq2
from qkeras2qonnx.hgq2_layers.hgq2_sums import check_sums
from qonnx_ingest.errors import ConversionError

Step = tuple[Fixed | None, int | None]  # (computed with TF ops, marker id)


def is_hgq2(layer: Any) -> bool:
    """True for layers of the ``hgq`` package (HGQ2)."""
    return type(layer).__module__.split(".")[0] == "hgq"


def clone_hgq2_layer(layer: Any, path: str, layer_map: LayerMap, assignments: list) -> Any:
    """The plain stand-in of ``layer`` (a Keras 3 layer), its quantizers recorded."""
    plan = rule_for_hgq2(layer, path)(layer, path)
    check_sums(layer, plan, path, layer_map.inexact_sums)
    parts = getattr(plan, "parts", None)  # sublayers (hgq2_attention), each under path/part
    if parts:
        plan.config["parts"] = {
            role: clone_hgq2_layer(sub, f"{path}/{role}", layer_map, assignments)
            for role, sub in parts.items()
        }
        check_einsums(layer, path, layer_map.inexact_sums)
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
    """Kind and modes, not ``q.name``: HGQ2 names its unnamed quantizers (QAdd's inputs) from
    Keras's process-wide counter, ``quantizer_8`` after other models were loaded."""
    kind = "minifloat" if type(q).__name__ == "Minifloat" else "fixed"
    return f"hgq2 {kind} ({q.round_mode}, {q.overflow_mode})"


@functools.cache
def wrapper_class() -> type:
    """The Keras 3 layer that runs the plain layer between the HGQ2 quantizers' ops and
    markers (built lazily: it needs Keras and TensorFlow)."""
    import keras

    from qkeras2qonnx.emit.markers import mark
    from qkeras2qonnx.hgq2_layers.hgq2_quantizer import tf_apply

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

        def call(self, inputs: Any, value: Any = None, key: Any = None, **kwargs: Any) -> Any:
            self.refuse_arguments(kwargs)
            if value is not None:  # QMultiHeadAttention(query, value, key=value)
                inputs = [inputs, value, value if key is None else key]
            if isinstance(inputs, list | tuple):
                steps = self.input_steps  # one per input, or one (None, None): no iq
                steps = steps if len(steps) == len(inputs) else [(None, None)] * len(inputs)
                xs = [step(x, s) for x, s in zip(inputs, steps, strict=True)]
                return step(self.inner(xs), self.output_step)
            return step(self.inner(step(inputs, self.input_steps[0])), self.output_step)

        def refuse_arguments(self, kwargs: dict) -> None:
            """The original call's keywords (training, mask=None) change nothing at inference;
            any other (a mask, return_attention_scores) is refused."""
            kwargs = dict(kwargs, **(kwargs.get("kwargs") or {}))  # HGQ2's wrapped call
            given = {k for k, v in kwargs.items() if v not in (None, False)}
            given -= {"training", "kwargs", "value", "key"}  # QMultiHeadAttention's inputs
            if given:
                raise ConversionError(f"call arguments {sorted(given)}: not supported", self.name)

        def compute_output_spec(self, *args: Any, **kwargs: Any) -> Any:
            self.refuse_arguments(kwargs)  # the symbolic call (cloning) does not run ``call``
            return super().compute_output_spec(*args, **kwargs)

        def compute_output_shape(self, input_shape: Any, *others: Any, **more: Any) -> Any:
            if others or more:  # query, value (, key) shapes
                input_shape = [input_shape, *others, *more.values()]
            return self.inner.compute_output_shape(input_shape)

    return HGQ2Plain
