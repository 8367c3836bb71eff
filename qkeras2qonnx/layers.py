"""Layer registry: Keras layer class name -> how to strip it into a plain Keras layer.

A rule returns the plain layer class, its config, and the layer's quantizer slots (which
weight or the output each quantizer applies to). Plain Keras built-in layers pass through
unchanged; any other QKeras or custom layer is refused by name rather than converted
approximately. Adding a layer family = one rule here, one entry in ``LAYERS``, one test.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from qkeras2qonnx.backend import is_qkeras_object, keras
from qkeras2qonnx.quantizers import rule_for
from qonnx_ingest.errors import ConversionError

ACTIVATION = "activation"
# Config keys of QKeras layers that the plain Keras classes do not accept.
_QKERAS_KEYS = frozenset(
    {
        "kernel_quantizer",
        "bias_quantizer",
        "depthwise_quantizer",
        "kernel_range",
        "bias_range",
        "depthwise_range",
    }
)


@dataclass
class Slot:
    """One quantizer of a layer: on weight ``weight_index`` of ``get_weights()``, or (None) on
    the layer's output."""

    role: str
    quantizer: Any
    weight_index: int | None = None


@dataclass
class Stripped:
    layer_class: type
    config: dict
    slots: list[Slot] = field(default_factory=list)


LayerRule = Callable[[Any, str], Stripped]


def rule_for_layer(layer: Any, where: str) -> LayerRule:
    name = type(layer).__name__
    if name in LAYERS:
        return LAYERS[name]
    if is_qkeras_object(layer):
        supported = ", ".join(sorted(LAYERS))
        raise ConversionError(f"unsupported QKeras layer {name} (supported: {supported})", where)
    if type(layer).__module__.split(".")[0] in ("tf_keras", "keras"):
        return _plain
    raise ConversionError(
        f"unsupported custom layer class {name} from {type(layer).__module__}", where
    )


def _weighted(plain: str, weights: tuple[str, ...]) -> LayerRule:
    """A QKeras layer whose quantizer attributes ``weights[i]`` apply to ``get_weights()[i]``."""

    def strip(layer: Any, where: str) -> Stripped:
        config = {k: v for k, v in _config(layer).items() if not _training_only(k)}
        count = len(layer.get_weights())
        # QKeras quantizes a weight only when the constructor argument is truthy.
        slots = [
            Slot(role, getattr(layer, f"{role}_internal"), index)
            for index, role in enumerate(weights)
            if index < count and getattr(layer, role, None)
        ]
        slots += _activation_slot(layer.activation, config, where)
        return Stripped(getattr(keras().layers, plain), config, slots)

    return strip


def _qactivation(layer: Any, where: str) -> Stripped:
    full = _config(layer)
    config = {k: full[k] for k in ("name", "trainable", "dtype") if k in full}
    slots = _activation_slot(layer.quantizer, config, where)
    if not slots:  # QActivation("relu") etc.: a plain Keras activation function
        config["activation"] = keras().activations.serialize(layer.quantizer)
    return Stripped(keras().layers.Activation, config, slots)


def _plain(layer: Any, where: str) -> Stripped:
    config = _config(layer)
    slots = _activation_slot(getattr(layer, "activation", None), config, where)
    return Stripped(type(layer), config, slots)


def _config(layer: Any) -> dict:
    with warnings.catch_warnings():  # QKeras serializes quantizers as "constraints"
        warnings.simplefilter("ignore", UserWarning)
        return layer.get_config()


def _training_only(key: str) -> bool:
    """QKeras-only keys, and initializers/regularizers/constraints (QKeras's own classes,
    irrelevant once the trained weights are set) that the plain layer need not rebuild."""
    return key in _QKERAS_KEYS or key.endswith(("_initializer", "_regularizer", "_constraint"))


def _activation_slot(activation: Any, config: dict, where: str) -> list[Slot]:
    """A QKeras quantizer used as activation becomes its plain activation plus a slot."""
    if activation is None or not is_qkeras_object(activation):
        return []
    if inspect.isfunction(activation):
        raise ConversionError(
            f"unsupported QKeras activation function {activation.__name__}", f"{where} activation"
        )
    rule = rule_for(activation, f"{where} activation")
    config["activation"] = rule.activation
    return [Slot(ACTIVATION, activation)]


LAYERS: dict[str, LayerRule] = {
    "QDense": _weighted("Dense", ("kernel_quantizer", "bias_quantizer")),
    "QConv1D": _weighted("Conv1D", ("kernel_quantizer", "bias_quantizer")),
    "QConv2D": _weighted("Conv2D", ("kernel_quantizer", "bias_quantizer")),
    "QDepthwiseConv2D": _weighted("DepthwiseConv2D", ("depthwise_quantizer", "bias_quantizer")),
    "QActivation": _qactivation,
}
