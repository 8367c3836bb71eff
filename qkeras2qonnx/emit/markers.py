"""Markers that let every recorded quantizer find its tensor in the graph tf2onnx produces.

tf2onnx renames, transposes, folds and drops tensors (an Identity for a linear activation
vanishes; the removed qonnx converter silently lost quantizers exactly there), so nothing is
looked up by name or position:

* Weights: each quantized weight is converted with unique marker values (consecutive float32
  bit patterns from 2**23 up). Whatever data movement tf2onnx applies (Conv's HWIO -> OIHW,
  the depthwise reshape, Conv1D's expand_dims), decoding an initializer gives, per element,
  its index in the Keras weight: the real values and the scale are then placed through that
  map. Arithmetic on a weight (e.g. a Conv+BatchNormalization fusion) destroys the markers,
  and the missing weight is reported instead of quantizing the wrong tensor.
* Layer outputs: each layer with a quantizer ends in a CheckNumerics op named
  ``qkeras2qonnx_marker_<id>``. A tf2onnx handler turns it into a bound-less ``Clip``: an
  elementwise op that tf2onnx's optimizers move transposes through but never remove, and that
  keeps a Conv of a quantized kernel from being fused with a following BatchNormalization.
  Reinsertion replaces it by the activation's Quant node, or removes it.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np

MARKER_OP = "Clip"
_MESSAGE_PREFIX = "qkeras2qonnx marker "
_NAME = "qkeras2qonnx_marker_{}"
_NAME_RE = re.compile(r"qkeras2qonnx_marker_(\d+)")

# float32 bit patterns from 0x4B000000 (2**23) up: positive, normal, far from typical weights
# and consecutive, so a pattern minus the base is an element index.
_WEIGHT_BASE = 0x4B000000
WEIGHT_CAPACITY = 0x7F000000 - _WEIGHT_BASE


def weight_markers(offset: int, shape: tuple[int, ...]) -> np.ndarray:
    """Marker values for a weight whose elements are numbered from ``offset``."""
    size = int(np.prod(shape, dtype=np.int64))
    bits = np.arange(_WEIGHT_BASE + offset, _WEIGHT_BASE + offset + size, dtype=np.uint32)
    return bits.view(np.float32).reshape(shape)


def decode_weight_markers(values: np.ndarray) -> np.ndarray | None:
    """Element numbers of a float32 tensor made of marker values, else None."""
    values = np.asarray(values)
    if values.dtype != np.float32 or values.size == 0:
        return None
    index = values.view(np.uint32).astype(np.int64) - _WEIGHT_BASE
    if np.any(index < 0) or np.any(index >= WEIGHT_CAPACITY):
        return None
    return index


def marker_id(node: Any) -> int | None:
    """The id of an output marker node of the converted ONNX graph, else None."""
    if node.op_type != MARKER_OP:
        return None
    match = _NAME_RE.search(node.name)
    return int(match.group(1)) if match else None


def tf2onnx_handler(ctx: Any, node: Any, name: str, args: list) -> None:
    """tf2onnx custom handler for CheckNumerics: ours become markers, others Identity (as in
    tf2onnx). The unique ``message`` attribute stays on the node while tf2onnx optimizes, so
    two markers on one tensor are never merged as duplicates; ONNX export drops it."""
    message = node.get_attr_str("message") if node.get_attr("message") else ""
    node.type = MARKER_OP if message.startswith(_MESSAGE_PREFIX) else "Identity"


def mark(tensor: Any, marker: int) -> Any:
    """``tensor`` followed by output marker ``marker`` (a TF op; for layers that mark a point
    inside themselves, see ``stripped.Slot.inner``)."""
    import tensorflow as tf

    return tf.debugging.check_numerics(
        tensor, f"{_MESSAGE_PREFIX}{marker}", name=_NAME.format(marker)
    )


@functools.cache
def marked_output_class() -> type:
    """The Keras layer that runs a stripped layer and marks its output (built lazily: TF)."""
    from qkeras2qonnx.environment.backend import keras

    class MarkedOutput(keras().layers.Layer):
        """``inner`` under the original layer's name, followed by output marker ``marker``."""

        def __init__(self, inner: Any, marker: int, **kwargs: Any):
            super().__init__(name=inner.name, **kwargs)
            self.inner = inner
            self.marker = marker

        def call(self, inputs: Any) -> Any:
            return mark(self.inner(inputs), self.marker)

        def compute_output_shape(self, input_shape: Any) -> Any:
            return self.inner.compute_output_shape(input_shape)

    return MarkedOutput
