"""HGQ2 layer registry: HGQ2 layer class name -> the plain Keras layer that computes it.

An HGQ2 layer quantizes its inputs (``iq``), computes with quantized weights (``qkernel``,
``qbias``: read from HGQ2 itself, so folded batch norms and every quantizer detail come out as
HGQ2 computes them) and, when enabled, quantizes its output (``oq``). A rule returns the plain
layer (class, config, the quantized weight values in ``get_weights()`` order with the
quantizer of each) and the input / output quantizers; ``hgq2_strip`` builds and records it.
Float functions of a quantized input (QUnaryFunctionLUT, QSoftmax) become exact tables
(``hgq2_tables``); operations Keras has no layer for, ``hgq2_ops``.
Adding a layer family = one rule and one entry in ``HGQ2_LAYERS``, one test.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qkeras2qonnx.compat import hgq2 as compat_hgq2
from qkeras2qonnx.compat import keras as compat_keras
from qkeras2qonnx.hgq2_layers.hgq2_attention import attention, attention_class
from qkeras2qonnx.hgq2_layers.hgq2_quantizer import Fixed, read_quantizer
from qkeras2qonnx.hgq2_layers.hgq2_recurrent import gru, simple_rnn
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
    output_in_layer: bool = False  # the plain layer's table holds the output quantizer's values
    parts: dict[str, Any] = field(default_factory=dict)  # sublayers stripped on their own


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
    return bool(getattr(layer, "enable_oq", False)) or compat_keras.has_consumers(layer)


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
    """Pooling, merges (QAdd, ..., QDot) and an exact QUnaryFunctionLUT: the plain Keras
    layer between the input and output quantizers."""

    def strip(layer: Any, where: str) -> Plan:
        import keras

        cls = getattr(keras.layers, plain)
        config = _plain_config(layer, cls, where)
        return Plan(
            cls, config, [], [], _input_quantizers(layer, where), _output_quantizer(layer, where)
        )

    return strip


def _op(kind: str) -> Rule:
    """QSum / QMeanPow2 (a sum over axes times a power of two), QAveragePow2 (a sum of the
    inputs times a power of two), QAdd (the same sum), QEinsum: ``hgq2_ops.op_class`` between
    the quantizers."""

    def strip(layer: Any, where: str) -> Plan:
        from qkeras2qonnx.hgq2_layers.hgq2_ops import op_class

        if kind == "sum":
            params = {"axes": list(layer.axes), "keepdims": layer.keepdims}
            params["scale"] = float(layer.scale)
        elif kind == "average_pow2":
            params = {"scale": float(compat_hgq2.average_scale(layer))}
        elif kind == "add":  # QAdd: tf.add in order, as QAveragePow2 without its scale
            params = {"scale": 1.0}
        else:
            params = {"equation": layer.equation}
        op = "average_pow2" if kind == "add" else kind
        config = {"name": layer.name, "kind": op, "params": params}
        inputs, output = _input_quantizers(layer, where), _output_quantizer(layer, where)
        return Plan(op_class(), config, [], [], inputs, output)

    return strip


def _unary_lut(layer: Any, where: str) -> Plan:
    """QUnaryFunctionLUT / QAffinedUnaryFunctionLUT: an exact float activation (relu, ...) stays
    the plain Activation; any other function becomes the table HGQ2 computes on its input
    quantizer's grid (``hgq2_tables``), its output quantizer included."""
    name = type(layer).__name__
    activation = getattr(layer.activation, "__name__", None)
    if name == "QUnaryFunctionLUT" and activation in EXACT_ACTIVATIONS:
        return _plain_op("Activation")(layer, where)
    if not layer.enable_iq:
        raise ConversionError(
            f"{name} with function {activation!r} on an unquantized input (enable_iq False): "
            "a float function has no exact table there",
            where,
        )
    from qkeras2qonnx.hgq2_layers.hgq2_tables import build_table, lookup_class

    (iq,) = _input_quantizers(layer, where)
    if iq is None:
        raise ConversionError(f"{name}: its input quantizer is the identity, no grid", where)
    shape = _input_shape(layer, where)
    table = build_table(lambda x: layer(x, training=False), iq, shape, f"{where} table")
    config = {"name": layer.name, "table": table}
    output = _output_quantizer(layer, where)
    return Plan(lookup_class(), config, [], [], [iq], output, output_in_layer=True)


def _input_shape(layer: Any, where: str) -> tuple:
    """The layer's input shape without the batch axis (a table is built for it); a sublayer
    (QMultiHeadAttention's softmax) has no node of its own: the shape it was built for."""
    try:
        return tuple(layer.input.shape[1:])
    except (AttributeError, ValueError) as exc:  # never called itself: a sublayer
        built = (layer.get_build_config() or {}).get("input_shape")
        if built is not None and None not in built[1:]:
            return tuple(built[1:])
        raise ConversionError(f"a table needs the layer's one input shape: {exc}", where) from exc


def _softmax(layer: Any, where: str) -> Plan:
    """QSoftmax: HGQ2's exp and inverse tables (``hgq2_tables.SoftmaxTables``)."""
    from qkeras2qonnx.hgq2_layers.hgq2_tables import SoftmaxTables, build_table, softmax_class

    (iq,) = _input_quantizers(layer, where)
    exp_iq = read_quantizer(layer.exp_table.iq, f"{where} exp input") if layer.stable else None
    exp_grid = exp_iq if layer.stable else iq
    if exp_grid is None:
        raise ConversionError(
            "QSoftmax(stable=False) without an input quantizer: exp of a float input has no "
            "exact table",
            where,
        )
    shape = _input_shape(layer, where)
    inv_shape = tuple(1 if j + 1 in layer.axes else d for j, d in enumerate(shape))
    exp = build_table(
        lambda x: layer.exp_table(x, training=False), exp_grid, shape, f"{where} exp table"
    )
    inv_iq = read_quantizer(layer.inv_table.iq, f"{where} inverse input")
    if inv_iq is None:
        raise ConversionError("QSoftmax without an inverse-table input quantizer", where)
    inv = build_table(
        lambda x: layer.inv_table(x, training=False), inv_iq, inv_shape, f"{where} inverse table"
    )
    axes = tuple(int(a) for a in layer.axes)
    tables = SoftmaxTables(axes, bool(layer.stable), exp_iq, exp, inv_iq, inv)
    config = {"name": layer.name, "tables": tables}
    return Plan(softmax_class(), config, [], [], [iq], _output_quantizer(layer, where))


def _attention(layer: Any, where: str) -> Plan:
    """QMultiHeadAttention: its parts (projections, softmax) stripped on their own by
    ``hgq2_strip`` under ``<layer>/<part>``, between HGQ2's two einsums (``hgq2_attention``)."""
    parts, config, output = attention(layer, where)
    return Plan(attention_class(), config, [], [], [None], output, parts=parts)


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
    shape = tuple(compat_hgq2.batchnorm_shape(layer))
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
    "MaxPooling3D",
    "AveragePooling3D",
    "GlobalMaxPooling3D",
    "GlobalAveragePooling3D",
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
    "QUnaryFunctionLUT": _unary_lut,
    "QAffinedUnaryFunctionLUT": _unary_lut,
    "QSoftmax": _softmax,
    "QSum": _op("sum"),
    "QMeanPow2": _op("sum"),
    "QAveragePow2": _op("average_pow2"),
    "QEinsum": _op("einsum"),
    "QDot": _plain_op("Dot"),
    "QConv3D": _weighted("Conv3D"),
    "QAdd": _op("add"),
    "QSubtract": _plain_op("Subtract"),
    "QMultiply": _plain_op("Multiply"),
    "QMaximum": _plain_op("Maximum"),
    "QMinimum": _plain_op("Minimum"),
    "QSimpleRNN": simple_rnn,  # unrolled (hgq2_recurrent)
    "QGRU": gru,
    "QMultiHeadAttention": _attention,
    "QLinformerAttention": _attention,
    **{f"Q{name}": (_average if "Average" in name else _plain_op)(name) for name in _POOLING},
}
