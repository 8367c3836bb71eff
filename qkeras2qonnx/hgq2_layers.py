"""HGQ2 layer registry: HGQ2 layer class name -> the plain Keras layer that computes it.

An HGQ2 layer quantizes its inputs (``iq``), computes with quantized weights (``qkernel``,
``qbias``: read from HGQ2 itself, so folded batch norms and every quantizer detail come out as
HGQ2 computes them) and, when enabled, quantizes its output (``oq``). A rule returns the plain
layer (class, config, the quantized weight values in ``get_weights()`` order with the
quantizer of each) and the input / output quantizers; ``hgq2_strip`` builds and records it.
Adding a layer family = one rule and one entry in ``HGQ2_LAYERS``, one test.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qkeras2qonnx.hgq2_quantizer import Fixed, read_quantizer
from qonnx_ingest.errors import ConversionError

# Keras activations that are exact in float32 on every runtime (no transcendental function or
# division whose last bit could move a value across a quantizer's rounding point; Keras 3's
# hard_sigmoid divides by 6).
EXACT_ACTIVATIONS = frozenset({"linear", "relu", "relu6", "leaky_relu"})


@dataclass
class Plan:
    """The plain layer of one HGQ2 layer and the quantizers around and inside it."""

    layer_class: type
    config: dict
    weights: list[np.ndarray] = field(default_factory=list)
    # (role, Fixed or None for a dummy quantizer), one per entry of ``weights``
    weight_quantizers: list[tuple[str, Fixed | None]] = field(default_factory=list)
    inputs: list[Fixed | None] = field(default_factory=list)  # one per input
    output: Fixed | None = None


Rule = Callable[[Any, str], Plan]


def rule_for_hgq2(layer: Any, where: str) -> Rule:
    name = type(layer).__name__
    if name not in HGQ2_LAYERS:
        supported = ", ".join(sorted(HGQ2_LAYERS))
        raise ConversionError(f"unsupported HGQ2 layer {name} (supported: {supported})", where)
    return HGQ2_LAYERS[name]


def _plain_config(layer: Any, cls: type, where: str) -> dict:
    """The HGQ2 layer's config, restricted to what the plain class takes (training-only
    initializers, regularizers and constraints left out: the trained weights are set)."""
    keep = set(inspect.signature(cls.__init__).parameters) | {"name", "trainable", "dtype"}
    config = {
        k: v
        for k, v in layer.get_config().items()
        if k in keep and not k.endswith(("_initializer", "_regularizer", "_constraint"))
    }
    if _feeds_a_quantizer(layer):
        _check_activation(config.get("activation"), where)
    return config


def _feeds_a_quantizer(layer: Any) -> bool:
    """False only for a layer without output quantizer whose output no layer consumes (a
    model output): a float activation there differs between runtimes in the last bit only,
    within the 1e-6 bound, while before a quantizer that bit can move a rounding."""
    return bool(getattr(layer, "enable_oq", False)) or bool(getattr(layer, "_outbound_nodes", 1))


def _check_activation(activation: Any, where: str) -> None:
    if activation is None:
        return
    name = activation if isinstance(activation, str) else getattr(activation, "__name__", None)
    if isinstance(activation, dict):
        name = activation.get("config", activation.get("class_name"))
    if name not in EXACT_ACTIVATIONS:
        raise ConversionError(
            f"activation {name!r} is a float function whose last bits differ between "
            "TensorFlow and ONNX runtimes before the next quantizer: not supported exactly",
            where,
        )


def _input_quantizers(layer: Any, where: str) -> list[Fixed | None]:
    if not layer.enable_iq:
        return [None]
    iq = layer.iq
    quantizers = list(iq) if hasattr(iq, "quantizers") else [iq]
    return [read_quantizer(q, f"{where} input") for q in quantizers]


def _output_quantizer(layer: Any, where: str) -> Fixed | None:
    return read_quantizer(layer.oq, f"{where} output") if layer.enable_oq else None


def _numpy(tensor: Any) -> np.ndarray:
    from keras import ops

    return np.asarray(ops.convert_to_numpy(tensor), dtype=np.float32)


def _weighted(plain: str) -> Rule:
    """QDense, QConv*, QEinsumDense and the batch-norm-folded QBatchNormDense /
    QEinsumDenseBatchnorm: the plain layer
    gets HGQ2's ``qkernel`` / ``qbias`` (folded where the layer folds), quantized by ``kq`` /
    ``bq``."""

    def strip(layer: Any, where: str) -> Plan:
        import keras

        cls = getattr(keras.layers, plain)
        config = _plain_config(layer, cls, where)
        weights = [_numpy(layer.qkernel)]
        quantizers = [("kernel", read_quantizer(layer.kq, f"{where} kernel"))]
        if layer.bias is not None:
            qbias = _numpy(layer.qbias)
            if qbias.size != int(np.prod(layer.bias.shape)):  # a fold that widens the bias
                raise ConversionError(
                    f"the folded bias has shape {qbias.shape}, the layer's bias "
                    f"{tuple(layer.bias.shape)}: not supported",
                    where,
                )
            weights.append(qbias.reshape(tuple(layer.bias.shape)))
            quantizers.append(("bias", read_quantizer(layer.bq, f"{where} bias")))
        if plain == "EinsumDense":
            config["bias_axes"] = config.get("bias_axes") if layer.bias is not None else None
        else:
            config["use_bias"] = layer.bias is not None
        return Plan(
            cls,
            config,
            weights,
            quantizers,
            _input_quantizers(layer, where),
            _output_quantizer(layer, where),
        )

    return strip


def _plain_op(plain: str) -> Rule:
    """Pooling, merges (QAdd, ...) and QUnaryFunctionLUT: the plain Keras layer between the
    input and output quantizers."""

    def strip(layer: Any, where: str) -> Plan:
        import keras

        cls = getattr(keras.layers, plain)
        config = _plain_config(layer, cls, where)
        return Plan(
            cls, config, [], [], _input_quantizers(layer, where), _output_quantizer(layer, where)
        )

    return strip


def _average(plain: str) -> Rule:
    """Average pooling is exact only when it divides by a power of two (a sum times an exact
    reciprocal); another count (a 3x3 window, a 'same' border) divides in float32, and
    TensorFlow and onnxruntime may then differ in the last bit before the next quantizer."""
    strip_plain = _plain_op(plain)

    def strip(layer: Any, where: str) -> Plan:
        if plain.startswith("Global"):
            shape = tuple(layer.input.shape)
            spatial = shape[1:-1] if layer.data_format == "channels_last" else shape[2:]
            count = int(np.prod(spatial)) if None not in spatial else 0
        else:
            count = int(np.prod(layer.pool_size)) if layer.padding == "valid" else 0
        if count < 1 or count & (count - 1):
            raise ConversionError(
                "average pooling over a window that is not a power of two (or 'same' "
                "padding) divides inexactly: not supported exactly",
                where,
            )
        return strip_plain(layer, where)

    return strip


def _batch_normalization(layer: Any, where: str) -> Plan:
    """QBatchNormalization at inference: ``iq(x) * kq(scale) + bq(offset)`` with HGQ2's own
    quantized scale and offset (``qscaler_and_qoffset``), broadcast along the layer's axis."""
    shape = tuple(layer._shape)
    scale, offset = (_numpy(t).reshape(shape) for t in layer.qscaler_and_qoffset)
    config = {"name": layer.name, "shape": shape}
    quantizers = [
        ("kernel", read_quantizer(layer.kq, f"{where} scale")),
        ("bias", read_quantizer(layer.bq, f"{where} offset")),
    ]
    return Plan(
        scale_shift_class(),
        config,
        [scale, offset],
        quantizers,
        _input_quantizers(layer, where),
        _output_quantizer(layer, where),
    )


def _quantizer(layer: Any, where: str) -> Plan:
    """A standalone ``hgq.quantizer.Quantizer`` layer: its quantizer on a linear pass-through."""
    import keras

    config = {"name": layer.name, "activation": "linear"}
    return Plan(keras.layers.Activation, config, [], [], [read_quantizer(layer, where)], None)


@functools.cache
def scale_shift_class() -> type:
    """``x * scale + offset`` (Keras 3), the plain form of QBatchNormalization."""
    import keras

    class HGQ2ScaleShift(keras.layers.Layer):
        def __init__(self, shape: tuple[int, ...], **kwargs: Any):
            super().__init__(**kwargs)
            self.shape = tuple(shape)

        def build(self, input_shape: Any) -> None:
            self.scale = self.add_weight(name="scale", shape=self.shape, initializer="ones")
            self.offset = self.add_weight(name="offset", shape=self.shape, initializer="zeros")

        def call(self, inputs: Any) -> Any:
            return inputs * self.scale + self.offset

        def compute_output_shape(self, input_shape: Any) -> Any:
            return input_shape

    return HGQ2ScaleShift


_POOLING = (
    "MaxPooling1D",
    "MaxPooling2D",
    "AveragePooling1D",
    "AveragePooling2D",
    "GlobalMaxPooling1D",
    "GlobalMaxPooling2D",
    "GlobalAveragePooling1D",
    "GlobalAveragePooling2D",
)

HGQ2_LAYERS: dict[str, Rule] = {
    "Quantizer": _quantizer,
    "QDense": _weighted("Dense"),
    "QBatchNormDense": _weighted("Dense"),  # batch norm folded by HGQ2 (qkernel / qbias)
    "QConv1D": _weighted("Conv1D"),
    "QConv2D": _weighted("Conv2D"),
    "QEinsumDense": _weighted("EinsumDense"),
    "QEinsumDenseBatchnorm": _weighted("EinsumDense"),  # batch norm folded by HGQ2
    "QBatchNormalization": _batch_normalization,
    "QUnaryFunctionLUT": _plain_op("Activation"),
    "QAdd": _plain_op("Add"),
    "QSubtract": _plain_op("Subtract"),
    "QMultiply": _plain_op("Multiply"),
    "QMaximum": _plain_op("Maximum"),
    "QMinimum": _plain_op("Minimum"),
    **{f"Q{name}": (_average if "Average" in name else _plain_op)(name) for name in _POOLING},
}
