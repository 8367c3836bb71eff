"""What a layer rule produces: the plain layer to build and the quantizer slots it records.

Shared by the layer rules of ``layers``, ``batchnorm`` and ``pooling``, which import this module
and not each other (``layers`` holds the table that names them).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from qkeras2qonnx.environment.backend import is_qkeras_object
from qkeras2qonnx.qkeras_layers.quantizers import rule_for

ACTIVATION = "activation"


@dataclass
class Slot:
    """One quantizer of a layer: on weight ``weight_index`` of ``get_weights()``, or (None) on
    the layer's output."""

    role: str
    quantizer: Any
    weight_index: int | None = None
    # The shape QKeras quantizes the weight in, when it reshapes it first: an explicit
    # ``scale_axis`` or the rank of an 'auto' scale depends on it.
    shape: tuple[int, ...] | None = None
    # An activation applied inside the layer (not on its output): the name of that point. The
    # plain layer gets config ``markers`` {inner: marker id} and marks the point itself.
    inner: str | None = None


@dataclass
class Stripped:
    """The plain layer to build; ``weights`` (None: the layer's own ``get_weights()``) are what
    it is given, e.g. kernel and bias with a batch normalization folded in."""

    layer_class: type
    config: dict
    slots: list[Slot] = field(default_factory=list)
    weights: list[Any] | None = None
    # Quantizers that only act on constants and were folded exactly: "layer role" -> why.
    folded: dict[str, str] = field(default_factory=dict)
    # A recurrent layer's plan (``recurrent.Recurrent``): unrolled in ONNX after tf2onnx.
    recurrent: Any = None
    # A grouped transposed convolution whose ONNX node gets its group after tf2onnx
    # (``grouped_transpose``): ``strip`` numbers it per conversion in ``config["tag"]``.
    grouped: bool = False


LayerRule = Callable[[Any, str], Stripped]


def config_of(layer: Any) -> dict:
    with warnings.catch_warnings():  # QKeras serializes quantizers as "constraints"
        warnings.simplefilter("ignore", UserWarning)
        return layer.get_config()


def activation_slot(activation: Any, config: dict, where: str) -> list[Slot]:
    """A QKeras quantizer used as activation becomes its plain activation plus a slot."""
    if activation is None or not is_qkeras_object(activation):
        return []
    rule = rule_for(activation, f"{where} activation")
    config["activation"] = rule.activation_for(activation).name
    return [Slot(ACTIVATION, activation)]
