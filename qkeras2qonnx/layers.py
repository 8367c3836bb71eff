"""Layer registry: Keras layer class name -> how to strip it into a plain Keras layer.

A rule returns the plain layer class, its config, and the layer's quantizer slots (which
weight or the output each quantizer applies to). Plain Keras built-in layers pass through
unchanged; any other QKeras or custom layer is refused by name rather than converted
approximately. Adding a layer family = one rule here, one entry in ``LAYERS``, one test.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from qkeras2qonnx.compat import qkeras as compat_qkeras
from qkeras2qonnx.environment.backend import is_qkeras_object, keras
from qkeras2qonnx.environment.load import PRUNING_WRAPPERS
from qkeras2qonnx.qkeras_layers import pruning
from qkeras2qonnx.qkeras_layers.batchnorm import strip_qbatchnorm
from qkeras2qonnx.qkeras_layers.grouped_transpose import (
    strip_depthwise_transpose,
    strip_separable_transpose,
)
from qkeras2qonnx.qkeras_layers.pooling import pooling_rule
from qkeras2qonnx.qkeras_layers.scale_shift import strip_scale_shift
from qkeras2qonnx.qkeras_layers.stripped import (
    LayerRule,
    Slot,
    Stripped,
    activation_slot,
    config_of,
)
from qkeras2qonnx.qkeras_recurrent.bidirectional import strip_bidirectional
from qkeras2qonnx.qkeras_recurrent.recurrent import strip_recurrent
from qonnx_ingest.errors import ConversionError

# Config keys of QKeras layers that the plain Keras classes do not accept.
_QKERAS_KEYS = frozenset(
    {
        "kernel_quantizer",
        "bias_quantizer",
        "depthwise_quantizer",
        "pointwise_quantizer",
        "kernel_range",
        "bias_range",
        "depthwise_range",
        "mask",  # qkeras-v3's QConv2D kernel mask (refused when set, see _weighted)
    }
)


def rule_for_layer(layer: Any, where: str) -> LayerRule:
    name = type(layer).__name__
    if name in LAYERS:
        return LAYERS[name]
    if name in PRUNING_WRAPPERS:  # tensorflow-model-optimization: the inner layer, masked
        return pruning.unwrapped(rule_for_layer(layer.layer, where))
    wrapped = getattr(layer, "forward_layer", None)
    if name == "QBidirectional" or (wrapped is not None and is_qkeras_object(wrapped)):
        # unrolled in ONNX (see bidirectional); what it wraps is checked there
        return strip_bidirectional
    if is_qkeras_object(layer):
        supported = ", ".join(sorted(LAYERS))
        raise ConversionError(f"unsupported QKeras layer {name} (supported: {supported})", where)
    module = type(layer).__module__
    # a class revived from a SavedModel without its Python code is a custom one, not Keras's
    if module.split(".")[0] in ("tf_keras", "keras") and ".saved_model.load" not in module:
        return _plain
    raise ConversionError(
        f"unsupported custom layer class {name} from {type(layer).__module__}", where
    )


def _weighted(
    plain: str, weights: tuple[str, ...], expanded: frozenset[str] = frozenset()
) -> LayerRule:
    """A QKeras layer whose quantizer attributes ``weights[i]`` apply to ``get_weights()[i]``;
    the roles in ``expanded`` quantize the weight with a leading axis of 1 added (QKeras's
    QSeparableConv1D runs its kernels through a 2-D separable convolution)."""

    def strip(layer: Any, where: str) -> Stripped:
        if compat_qkeras.kernel_mask(layer) is not None:
            raise ConversionError(
                "a kernel mask (qkeras-v3 QConv2D mask=...) multiplies the quantized kernel: "
                "not supported",
                where,
            )
        config = {k: v for k, v in config_of(layer).items() if not _training_only(k)}
        values = layer.get_weights()
        # QKeras quantizes a weight only when the constructor argument is truthy.
        slots = [
            Slot(
                role,
                getattr(layer, f"{role}_internal"),
                index,
                (1, *values[index].shape) if role in expanded else None,
            )
            for index, role in enumerate(weights)
            if index < len(values) and getattr(layer, role, None)
        ]
        slots += activation_slot(layer.activation, config, where)
        return Stripped(getattr(keras().layers, plain), config, slots)

    return strip


def _folded(plain: str, kernel_role: str) -> LayerRule:
    """QConv2DBatchnorm / QDepthwiseConv2DBatchnorm at inference: QKeras folds the moving
    statistics into kernel and bias (``get_folded_weights``, the same TF ops as its ``call``),
    quantizes both and always adds the folded bias, so the plain layer is a conv with bias."""

    def strip(layer: Any, where: str) -> Stripped:
        cls = getattr(keras().layers, plain)
        keep = set(inspect.signature(cls.__init__).parameters) | {"name", "trainable", "dtype"}
        config = {k: v for k, v in config_of(layer).items() if k in keep and not _training_only(k)}
        config["use_bias"] = True
        weights = [np.asarray(w, dtype=np.float32) for w in layer.get_folded_weights()]
        slots = []
        # QKeras tests ``is not None`` here (not truthiness, unlike the unfolded layers).
        if getattr(layer, kernel_role, None) is not None:
            slots.append(Slot(kernel_role, getattr(layer, f"{kernel_role}_internal"), 0))
        if layer.bias_quantizer_internal is not None:
            slots.append(Slot("bias_quantizer", layer.bias_quantizer_internal, 1))
        slots += activation_slot(layer.activation, config, where)
        return Stripped(cls, config, slots, weights)

    return strip


def _qactivation(layer: Any, where: str) -> Stripped:
    full = config_of(layer)
    config = {k: full[k] for k in ("name", "trainable", "dtype") if k in full}
    # QKeras 0.9 keeps the quantizer in ``quantizer``, qkeras-v3 in ``activation``.
    quantizer = layer.quantizer if hasattr(layer, "quantizer") else layer.activation
    if _float_function(quantizer):  # the same QKeras function on the plain layer: exact
        config["activation"] = quantizer
        return Stripped(keras().layers.Activation, config, [])
    slots = activation_slot(quantizer, config, where)
    if not slots:  # QActivation("relu") etc.: a plain Keras activation function
        config["activation"] = keras().activations.serialize(quantizer)
    return Stripped(keras().layers.Activation, config, slots)


# QKeras activation functions that compute a float (no quantization): QActivation("hard_sigmoid")
# etc. Their output has no grid, so no Quant node; the function's own ops are converted.
_FLOAT_FUNCTIONS = frozenset({"hard_sigmoid", "hard_tanh", "smooth_sigmoid", "smooth_tanh"})


def _float_function(obj: Any) -> bool:
    return (
        inspect.isfunction(obj)
        and obj.__name__ in _FLOAT_FUNCTIONS
        and obj.__module__.split(".")[0] == "qkeras"
    )


def _plain(layer: Any, where: str) -> Stripped:
    config = config_of(layer)
    slots = activation_slot(getattr(layer, "activation", None), config, where)
    return Stripped(type(layer), config, slots)


def _training_only(key: str) -> bool:
    """QKeras-only keys, and initializers/regularizers/constraints (QKeras's own classes,
    irrelevant once the trained weights are set) that the plain layer need not rebuild."""
    return key in _QKERAS_KEYS or key.endswith(("_initializer", "_regularizer", "_constraint"))


_SEPARABLE = ("depthwise_quantizer", "pointwise_quantizer", "bias_quantizer")
_SEPARABLE_KERNELS = frozenset(_SEPARABLE[:2])

LAYERS: dict[str, LayerRule] = {
    "QDense": _weighted("Dense", ("kernel_quantizer", "bias_quantizer")),
    "QConv1D": _weighted("Conv1D", ("kernel_quantizer", "bias_quantizer")),
    "QConv2D": _weighted("Conv2D", ("kernel_quantizer", "bias_quantizer")),
    "QConv2DTranspose": _weighted("Conv2DTranspose", ("kernel_quantizer", "bias_quantizer")),
    "QDepthwiseConv2D": _weighted("DepthwiseConv2D", ("depthwise_quantizer", "bias_quantizer")),
    "QSeparableConv1D": _weighted("SeparableConv1D", _SEPARABLE, _SEPARABLE_KERNELS),
    "QSeparableConv2D": _weighted("SeparableConv2D", _SEPARABLE),
    "QConv2DBatchnorm": _folded("Conv2D", "kernel_quantizer"),
    "QDepthwiseConv2DBatchnorm": _folded("DepthwiseConv2D", "depthwise_quantizer"),
    "QDenseBatchnorm": _folded("Dense", "kernel_quantizer"),  # qkeras-v3
    "QActivation": _qactivation,
    "QBatchNormalization": strip_qbatchnorm,
    "QAveragePooling2D": pooling_rule("AveragePooling2D"),
    "QGlobalAveragePooling2D": pooling_rule("GlobalAveragePooling2D"),
    "QSimpleRNN": strip_recurrent,  # unrolled in ONNX (see recurrent)
    "QLSTM": strip_recurrent,
    "QGRU": strip_recurrent,
    "QScaleShift": strip_scale_shift,  # qkeras-v3
    "QDepthwiseConv2DTranspose": strip_depthwise_transpose,  # qkeras-v3, grouped ConvTranspose
    "QSeparableConv2DTranspose": strip_separable_transpose,  # qkeras-v3
}
