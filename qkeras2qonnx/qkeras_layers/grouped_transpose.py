"""qkeras-v3's QDepthwiseConv2DTranspose and QSeparableConv2DTranspose: one grouped ConvTranspose.

What qkeras-v3 1.2.1 computes (its ``call``, not what the constructor arguments suggest):

* QDepthwiseConv2DTranspose: the input's C channels in C/g groups of ``group_size`` g; group i
  runs ``conv_transpose`` with the slice ``q(kernel)[:, :, g*i:g*(i+1), :]`` of the one
  quantized (kh, kw, C, g) kernel; the results are concatenated and ``depthwise_activation``
  applied. ``filters``, ``depth_multiplier``, ``output_padding`` and Keras's ``activation`` are
  ignored, and so are the bias and ``bias_quantizer`` (``call`` passes ``use_bias=False``).
* QSeparableConv2DTranspose: the same with g = 1 on a (kh, kw, 1, C) kernel, then
  ``depthwise_activation``, then a 1x1 ``conv_transpose`` with the quantized (1, 1, F, C)
  pointwise kernel, the quantized bias added, and ``pointwise_activation``.

The per-group loop is one ONNX ConvTranspose with ``group`` = C/g. The plain layer computes it
as one TF Conv2DBackpropInput whose filter is the kernel rearranged (reshape/transpose of the
one weight, which tf2onnx folds into one initializer, so the weight markers find it whole) to
(kh, kw, g, C): tf2onnx writes exactly ONNX's grouped weight (C, g, kh, kw) but cannot know the
group, so the TF op carries a tag in its name (numbered per conversion by ``strip``, so that a
second conversion in one process gives the same bytes) and ``set_groups`` sets ``group`` on
the ONNX node afterwards. TensorFlow only traces this op (its CPU kernel has no groups);
nothing runs it.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections import Counter
from typing import Any

import onnx
from onnx import helper

from qkeras2qonnx.compat import qkeras as compat_qkeras
from qkeras2qonnx.environment.backend import keras
from qkeras2qonnx.qkeras_layers.stripped import Slot, Stripped, activation_slot, config_of
from qonnx_ingest.errors import ConversionError
from qonnx_ingest.passes import PassResult

_TAG = "qkeras2qonnx_grouped_{}_{}"  # tag, groups
_TAG_RE = re.compile(r"qkeras2qonnx_grouped_(\d+)_(\d+)")
DEPTHWISE = "depthwise"  # the inner point of the separable layer's depthwise_activation


def strip_depthwise_transpose(layer: Any, where: str) -> Stripped:
    """QDepthwiseConv2DTranspose -> the plain grouped transposed convolution."""
    channels = _checked_channels(layer, where)
    group_size = int(layer.group_size)
    if channels % group_size:
        raise ConversionError(f"{channels} input channels in groups of {group_size}", where)
    if layer.filters != channels:
        raise ConversionError(
            f"filters={layer.filters} but qkeras-v3's QDepthwiseConv2DTranspose outputs its "
            f"{channels} input channels, so Keras's shapes disagree with what it computes",
            where,
        )
    quantizer = layer.depthwise_kernel_quantizer_internal
    slots = [Slot("depthwise_kernel_quantizer", quantizer, 0)] if quantizer else []  # truthy
    activation, activation_slots = _activation(layer, "depthwise_activation", where)
    config = _config(layer, channels, group_size, pointwise=0, use_bias=False)
    config.update(activation=activation)
    weights = layer.get_weights()[:1]  # the kernel; the bias is never used (see above)
    return _stripped(config, slots + activation_slots, weights)


def strip_separable_transpose(layer: Any, where: str) -> Stripped:
    """QSeparableConv2DTranspose -> grouped transposed convolution, 1x1 one, bias."""
    channels = _checked_channels(layer, where)
    quantizers = (
        layer.depthwise_kernel_quantizer_internal,
        layer.pointwise_kernel_quantizer_internal,
        layer.bias_quantizer_internal if layer.use_bias else None,
    )
    roles = ("depthwise_kernel_quantizer", "pointwise_kernel_quantizer", "bias_quantizer")
    pairs = enumerate(zip(roles, quantizers, strict=True))
    slots = [Slot(role, q, k) for k, (role, q) in pairs if q]
    inner, inner_slots = _activation(layer, "depthwise_activation", where)
    outer, outer_slots = _activation(layer, "pointwise_activation", where)
    slots += [dataclasses.replace(s, inner=DEPTHWISE) for s in inner_slots] + outer_slots
    config = _config(layer, channels, 1, pointwise=int(layer.filters), use_bias=layer.use_bias)
    config.update(depthwise_activation=inner, activation=outer)
    return _stripped(config, slots, layer.get_weights())  # kernels[, bias], as the plain layer


def set_groups(model: onnx.ModelProto, *, grouped: dict[int, str]) -> PassResult:
    """Give each tagged ConvTranspose of the tf2onnx graph its ``group`` (one pass); raise if
    a recorded layer's node is missing, repeated or not shaped like its grouped weight."""
    if not grouped:
        return model, False
    graph = model.graph
    dims = {t.name: list(t.dims) for t in graph.initializer}
    found: Counter[int] = Counter()
    for node in graph.node:
        match = _TAG_RE.search(node.name) if node.op_type == "ConvTranspose" else None
        if match is None or int(match.group(1)) not in grouped:
            continue
        tag, groups = int(match.group(1)), int(match.group(2))
        weight = dims.get(node.input[1])
        if weight is None or weight[0] != weight[1] * groups:
            raise ConversionError(
                f"tf2onnx wrote the grouped transposed convolution with weight {weight} "
                f"(expected channels x channels/{groups} x kh x kw)",
                grouped[tag],
            )
        kept = [a for a in node.attribute if a.name != "group"]
        del node.attribute[:]
        node.attribute.extend([*kept, helper.make_attribute("group", groups)])
        found[tag] += 1
    for tag, path in grouped.items():
        if found[tag] != 1:
            raise ConversionError(
                "the grouped transposed convolution was not found once in the tf2onnx graph "
                f"({found[tag]} matches; layers called more than once are not supported)",
                path,
            )
    return model, True


def _checked_channels(layer: Any, where: str) -> int:
    """The input channel count, after refusing what qkeras-v3 does not compute as described."""
    if layer.data_format != "channels_last":
        raise ConversionError("data_format channels_first: qkeras-v3 splits the last axis", where)
    if tuple(layer.dilation_rate) != (1, 1):
        raise ConversionError(
            f"dilation_rate {tuple(layer.dilation_rate)}: TensorFlow's CPU transposed "
            "convolution (qkeras-v3's predict) has no dilation, so there is no reference",
            where,
        )
    shape = tuple(compat_qkeras.built_input_shape(layer) or ())  # qkeras-v3 keeps it in build
    if len(shape) != 4 or any(d is None for d in shape[1:]):
        raise ConversionError(f"needs a static (batch, rows, cols, channels) input {shape}", where)
    return int(shape[-1])


def _activation(layer: Any, role: str, where: str) -> tuple[str | None, list[Slot]]:
    """The plain activation the layer applies as ``role``, and its quantizer's slot."""
    function = getattr(layer, role, None)
    if function is None:
        return None, []
    config: dict = {}
    slots = activation_slot(function, config, f"{where} {role}")
    if slots:
        return config["activation"], [dataclasses.replace(slots[0], role=role)]
    k = keras()
    try:
        name = k.activations.serialize(function)
        same = isinstance(name, str) and k.activations.get(name) is function
    except (TypeError, ValueError):
        same = False
    if not same:
        raise ConversionError(
            f"{role} {function!r}: no QKeras quantizer or Keras activation", where
        )
    return name, []


def _config(layer: Any, channels: int, group_size: int, *, pointwise: int, use_bias: bool) -> dict:
    full = config_of(layer)
    config = {k: full[k] for k in ("name", "trainable", "dtype") if k in full}
    config.update(
        channels=channels,
        kernel_size=[int(k) for k in layer.kernel_size],
        group_size=group_size,
        strides=[int(s) for s in layer.strides],
        padding=layer.padding,
        pointwise=pointwise,
        use_bias=bool(use_bias),
    )
    return config


def _stripped(config: dict, slots: list[Slot], weights: list) -> Stripped:
    return Stripped(grouped_transpose_class(), config, slots, weights, grouped=True)


def output_length(length: int, kernel: int, stride: int, padding: str) -> int:
    """Keras's transposed-convolution output length without ``output_padding``."""
    if padding == "same":
        return length * stride
    return length * stride + max(kernel - stride, 0)


@functools.cache
def grouped_transpose_class() -> type:
    """The plain layer (lazily: it needs TensorFlow)."""
    import tensorflow as tf

    from qkeras2qonnx.emit.markers import mark

    k = keras()

    class GroupedConv2DTranspose(k.layers.Layer):
        """Grouped transposed convolution [-> activation -> 1x1 transposed conv + bias]
        [-> activation], with qkeras-v3's kernel layouts (see the module docstring)."""

        def __init__(
            self,
            channels: int,
            kernel_size: list,
            group_size: int,
            strides: list,
            padding: str,
            pointwise: int = 0,
            use_bias: bool = False,
            depthwise_activation: str | None = None,
            activation: str | None = None,
            tag: int = 0,
            markers: dict | None = None,
            **kwargs: Any,
        ):
            super().__init__(**kwargs)
            self.channels, self.group_size, self.tag = channels, group_size, tag
            self.kernel_size, self.strides = tuple(kernel_size), tuple(strides)
            self.padding, self.pointwise, self.use_bias = padding, pointwise, use_bias
            self.depthwise_activation, self.activation = depthwise_activation, activation
            self.markers = dict(markers or {})

        def build(self, input_shape: Any) -> None:
            kh, kw = self.kernel_size
            c, g = self.channels, self.group_size
            shape = (kh, kw, 1, c) if self.pointwise else (kh, kw, c, g)
            self.depthwise_kernel = self.add_weight(name="depthwise_kernel", shape=shape)
            if self.pointwise:
                shape = (1, 1, self.pointwise, c)
                self.pointwise_kernel = self.add_weight(name="pointwise_kernel", shape=shape)
                if self.use_bias:
                    self.bias = self.add_weight(name="bias", shape=(self.pointwise,))
            self.built = True

        def call(self, inputs: Any) -> Any:
            kh, kw = self.kernel_size
            c, g = self.channels, self.group_size
            groups = c // g
            kernel = self.depthwise_kernel
            if not self.pointwise:  # filter[h, w, o, g*i + j] = kernel[h, w, g*i + o, j]
                kernel = tf.reshape(kernel, (kh, kw, groups, g, g))
                kernel = tf.reshape(tf.transpose(kernel, (0, 1, 3, 2, 4)), (kh, kw, g, c))
            size = self.compute_output_shape(inputs.shape)
            sizes = tf.stack([tf.shape(inputs)[0], size[1], size[2], c])
            y = tf.nn.conv2d_transpose(
                inputs,
                kernel,
                sizes,
                strides=self.strides,
                padding=self.padding.upper(),
                name=_TAG.format(self.tag, groups),
            )
            y = self._activate(y, self.depthwise_activation if self.pointwise else self.activation)
            if DEPTHWISE in self.markers:
                y = mark(y, self.markers[DEPTHWISE])
            if not self.pointwise:
                return y
            y = k.ops.conv_transpose(y, self.pointwise_kernel, strides=1, padding=self.padding)
            if self.use_bias:
                y = y + self.bias
            return self._activate(y, self.activation)

        @staticmethod
        def _activate(y: Any, name: str | None) -> Any:
            return y if name is None else k.activations.get(name)(y)

        def compute_output_shape(self, input_shape: Any) -> Any:
            _, h, w, _ = input_shape
            (kh, kw), (sh, sw) = self.kernel_size, self.strides
            return (
                input_shape[0],
                output_length(h, kh, sh, self.padding),
                output_length(w, kw, sw, self.padding),
                self.pointwise or self.channels,
            )

        def get_config(self) -> dict:
            config = super().get_config()
            config.update(
                channels=self.channels,
                kernel_size=list(self.kernel_size),
                group_size=self.group_size,
                strides=list(self.strides),
                padding=self.padding,
                pointwise=self.pointwise,
                use_bias=self.use_bias,
                depthwise_activation=self.depthwise_activation,
                activation=self.activation,
                tag=self.tag,
                markers=self.markers,
            )
            return config

    return GroupedConv2DTranspose
