"""Strip a QKeras model into plain Keras layers and record its quantizers in a layer map.

The clone keeps the topology and the trained weights; quantized weights are replaced by marker
values and each layer with a quantizer gets an output marker (see ``markers``), so that
``reinsert`` can find every recorded quantizer in the ONNX graph again.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from qkeras2qonnx.emit.layer_map import LayerMap, MapEntry
from qkeras2qonnx.emit.markers import WEIGHT_CAPACITY, marked_output_class, weight_markers
from qkeras2qonnx.emit.spec import LOST
from qkeras2qonnx.environment.backend import custom_objects, keras, qkeras_call
from qkeras2qonnx.environment.subclassed import as_functional
from qkeras2qonnx.hgq2_layers.hgq2_strip import clone_hgq2_layer, is_hgq2
from qkeras2qonnx.layers import rule_for_layer
from qkeras2qonnx.op_nodes import is_operation_node, keep_operation
from qkeras2qonnx.qkeras_layers import quantizer_proof
from qkeras2qonnx.qkeras_layers.quantizers import QuantizerAnnotationLost, describe, rule_for
from qkeras2qonnx.qkeras_layers.stripped import Slot
from qonnx_ingest.errors import ConversionError


def strip_model(model: Any) -> tuple[Any, LayerMap]:
    """The plain-Keras clone of ``model`` (to convert with tf2onnx) and its layer map."""
    layer_map = LayerMap()
    assignments: list[tuple[Any, list[np.ndarray]]] = []
    plain = _clone(as_functional(model), "", layer_map, assignments)
    for layer, weights in assignments:
        layer.set_weights(weights)
    return plain, layer_map


def _clone(model: Any, prefix: str, layer_map: LayerMap, assignments: list) -> Any:
    k = keras()

    def clone_layer(layer: Any) -> Any:
        path = prefix + layer.name
        if is_operation_node(layer, k):  # x[:, 0], keras.ops.*: no weights, kept as it is
            return keep_operation(layer, path)
        if isinstance(layer, k.Model):
            return _clone(as_functional(layer, path), path + "/", layer_map, assignments)
        if is_hgq2(layer):
            return clone_hgq2_layer(layer, path, layer_map, assignments)
        stripped = rule_for_layer(layer, path)(layer, path)
        layer_map.folded.update(stripped.folded)
        if stripped.recurrent is not None:
            layer_map.recurrent.append(stripped.recurrent)
        if stripped.grouped:  # numbered per conversion: the tag is in the ONNX node's name
            stripped.config["tag"] = len(layer_map.grouped)
            layer_map.grouped[stripped.config["tag"]] = path
        inner = {}  # activations inside the layer: each marks its point with a marker of its own
        for slot in stripped.slots:
            if slot.inner is not None:
                inner[slot.inner] = len(layer_map.outputs)
                layer_map.outputs[inner[slot.inner]] = path
        if inner:
            stripped.config["markers"] = inner
        try:
            with k.utils.custom_object_scope(custom_objects()):
                new = stripped.layer_class.from_config(stripped.config)
        except Exception as exc:
            raise ConversionError(
                f"cannot rebuild as plain {stripped.layer_class.__name__}: {exc}", path
            ) from exc
        source = layer.get_weights() if stripped.weights is None else stripped.weights
        weights = [np.asarray(w) for w in source]
        if stripped.slots:
            marker = len(layer_map.outputs)
            layer_map.outputs[marker] = path
            for slot in stripped.slots:
                _record(slot, path, weights, inner.get(slot.inner, marker), layer_map)
        assignments.append((new, weights))
        return marked_output_class()(new, marker) if stripped.slots else new

    try:
        return k.models.clone_model(model, clone_function=clone_layer)
    except ConversionError:
        raise
    except Exception as exc:
        raise ConversionError(f"cannot clone the model: {type(exc).__name__}: {exc}") from exc


def _record(slot: Slot, path: str, weights: list, marker: int, layer_map: LayerMap) -> None:
    """Resolve and verify one quantizer; put markers in place of a quantized weight."""
    q = slot.quantizer
    where = f"{path} {slot.role}"
    rule = rule_for(q, where)
    if slot.weight_index is None:
        spec = rule.resolve(q, None, where)
        if spec.scale.size != 1:
            raise ConversionError("per-channel activation quantizers are not supported", where)
        quantizer_proof.check_activation(q, spec, rule.activation_for(q), where)
        layer_map.entries.append(MapEntry(path, slot.role, describe(q), spec, None, marker))
        return
    weight = np.asarray(weights[slot.weight_index], dtype=np.float32)
    shape = weight.shape
    if slot.shape is not None:  # quantize in QKeras's shape; reshaping keeps element order
        weight = weight.reshape(slot.shape)
    spec = rule.resolve(q, weight, where)
    if spec.kind == LOST:
        weights[slot.weight_index] = qkeras_call(q, weight)[0].reshape(shape)
        layer_map.lost[where] = describe(q)
        warnings.warn(
            f"{where} {describe(q)}: non-uniform quantizer has no QONNX form; the weight is "
            "written as QKeras's quantized constant WITHOUT a quantization node (annotation lost)",
            QuantizerAnnotationLost,
            stacklevel=2,
        )
        return
    values = quantizer_proof.weight_values(q, spec, weight, where)
    offset = layer_map.weight_count
    if offset + weight.size > WEIGHT_CAPACITY:
        raise ConversionError("too many quantized weights to mark in one model", where)
    layer_map.weight_count += weight.size
    weights[slot.weight_index] = weight_markers(offset, shape)
    layer_map.entries.append(MapEntry(path, slot.role, describe(q), spec, values, offset))
