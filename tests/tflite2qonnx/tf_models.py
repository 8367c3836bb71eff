"""Single-op TFLite models generated with TensorFlow's own converter (keras extra).

Each case is a small Keras model around one TFLite operator, converted twice: float, and full
integer (int8 activations and I/O, per-channel int8 weights) with a seeded representative set.
Input dims given as None stay dynamic, which keeps the shape ops TF folds on static shapes
(SHAPE, FILL, ZEROS_LIKE, EXPAND_DIMS, SQUEEZE); they run with size DYNAMIC_SIZE. Ops TF never
emits are made by editing one operator of a generated model (``edit``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from hand_built import edit_operator


@dataclass(frozen=True)
class OpCase:
    """A model builder, its input shapes and range, and the TFLite op it must contain."""

    op: str
    build: Callable  # (tf, inputs) -> output tensor
    shapes: tuple[tuple[int, ...], ...] = ((1, 8, 8, 4),)
    low: float = -1.0
    high: float = 1.0
    quantized: bool = True  # also convert with full-integer quantization
    # "reference": the builtin reference kernels; "default": the optimized kernels and XNNPACK,
    # where the reference kernels lack the op or disagree with TF (each such case says why)
    interpreter: str = "reference"
    # applied to the converted model (both variants), see hand_built.edit_operator
    edit: Callable[[bytes], bytes] | None = None


DYNAMIC_SIZE = 3  # a None input dim's size in the representative data and at run time


def run_shapes(case: OpCase) -> list[tuple[int, ...]]:
    """The input shapes with dynamic dims at DYNAMIC_SIZE."""
    return [tuple(DYNAMIC_SIZE if d is None else d for d in s) for s in case.shapes]


def _tf():
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    return tf


def _const(shape, seed):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def _layer(make):
    """A Keras layer (seeded weights) applied to the first input."""

    def build(tf, xs):
        tf.keras.utils.set_random_seed(7)
        return make(tf)(xs[0])

    return build


def _fn(f):
    """Raw TF ops wrapped in a Lambda so the Keras model traces them."""

    def build(tf, xs):
        return tf.keras.layers.Lambda(lambda t: f(tf, t))(xs if len(xs) > 1 else xs[0])

    return build


def _resize(align_corners: bool, half_pixel: bool, size=(12, 10)):
    return _fn(
        lambda tf, x: tf.compat.v1.image.resize_bilinear(
            x, size, align_corners=align_corners, half_pixel_centers=half_pixel
        )
    )


def _conv_then(f, channels: int = 4):
    """A 1x1 conv, then raw TF ops: the conv makes the layout pass store the activations
    channels-first, so axis-naming ops are checked after their axes were renumbered."""

    def build(tf, xs):
        tf.keras.utils.set_random_seed(7)
        conv = tf.keras.layers.Conv2D(channels, 1)
        ys = [conv(x) for x in xs] if len(xs) > 1 else conv(xs[0])
        return tf.keras.layers.Lambda(lambda t: f(tf, t))(ys)

    return build


def _nearest(align_corners: bool, half_pixel: bool, size=(12, 10)):
    return _fn(
        lambda tf, x: tf.compat.v1.image.resize_nearest_neighbor(
            x, size, align_corners=align_corners, half_pixel_centers=half_pixel
        )
    )


def _f(tf, x):
    return tf.cast(x, tf.float32)


TWO = ((1, 8, 8, 4), (1, 8, 8, 4))


def _vs_reversed(compare):
    """x compared with itself reversed along W, cast to float. Both operands share one int8
    grid, on which TFLite's rescaled comparison is exact (two inputs' grids differ, see LESS)."""
    return _fn(lambda tf, x: _f(tf, compare(tf)(x, tf.reverse(x, [2]))))


def _strided_slice_masks(options: dict, begin, end, strides, out_shape) -> OpCase:
    """The conv-then-STRIDED_SLICE model with other masks and spec: TF's converter rewrites
    ellipsis and new-axis masks into begin / end masks and a RESHAPE, and never sets offset."""
    return OpCase(
        "STRIDED_SLICE",
        _conv_then(lambda tf, x: x[:, 1:7:2, ::-1, 1:3]),
        edit=lambda data: edit_operator(
            data,
            "STRIDED_SLICE",
            options={"beginMask": 0, "endMask": 0, **options},
            constants={1: begin, 2: end, 3: strides},
            output_shape=out_shape,
        ),
    )


CASES: dict[str, OpCase] = {
    "add": OpCase("ADD", _fn(lambda tf, t: t[0] + t[1]), ((1, 8, 8, 4), (1, 8, 8, 4))),
    "add_relu_broadcast_constant": OpCase(
        "ADD", _fn(lambda tf, x: tf.nn.relu(x + _const((4,), 1))), ((1, 8, 8, 4),)
    ),
    "add_lower_rank_input": OpCase(
        "ADD", _fn(lambda tf, t: t[0] + t[1]), ((1, 6, 6, 4), (1, 4)), quantized=False
    ),
    "sub": OpCase("SUB", _fn(lambda tf, t: t[0] - t[1]), ((1, 8, 8, 4), (1, 1, 1, 4))),
    "mul": OpCase("MUL", _fn(lambda tf, t: t[0] * t[1]), ((1, 8, 8, 4), (1, 8, 8, 4))),
    "mul_broadcast_constant": OpCase(
        "MUL", _fn(lambda tf, x: x * _const((1, 1, 1, 4), 2)), ((1, 8, 8, 4),)
    ),
    "prelu": OpCase(
        "PRELU",
        _layer(
            lambda tf: tf.keras.layers.PReLU(
                alpha_initializer=tf.keras.initializers.RandomUniform(0.05, 0.5), shared_axes=[1, 2]
            )
        ),
    ),
    "hard_swish": OpCase(
        "HARD_SWISH", _fn(lambda tf, x: x * tf.nn.relu6(x + 3.0) * (1.0 / 6.0)), low=-5, high=5
    ),
    "logistic": OpCase("LOGISTIC", _fn(lambda tf, x: tf.sigmoid(x)), low=-6, high=6),
    "concat_channels": OpCase(
        "CONCATENATION",
        _fn(lambda tf, t: tf.concat([t[0], t[1]], axis=3)),
        ((1, 8, 8, 4), (1, 8, 8, 3)),
    ),
    "concat_height": OpCase(
        "CONCATENATION",
        _fn(lambda tf, t: tf.concat([t[0], t[1]], axis=1)),
        ((1, 8, 8, 4), (1, 5, 8, 4)),
    ),
    "pad": OpCase("PAD", _fn(lambda tf, x: tf.pad(x, [[0, 0], [1, 2], [3, 0], [0, 1]]))),
    "padv2": OpCase(
        "PADV2",
        _fn(lambda tf, x: tf.pad(x, [[0, 0], [2, 1], [0, 1], [0, 0]], constant_values=0.5)),
    ),
    "transpose": OpCase("TRANSPOSE", _fn(lambda tf, x: tf.transpose(x, [0, 2, 3, 1]))),
    "mean_spatial_keepdims": OpCase(
        "MEAN", _fn(lambda tf, x: tf.reduce_mean(x, [1, 2], keepdims=True))
    ),
    "mean_spatial": OpCase("MEAN", _fn(lambda tf, x: tf.reduce_mean(x, [1, 2]))),
    "mean_channels": OpCase("MEAN", _fn(lambda tf, x: tf.reduce_mean(x, [3], keepdims=True))),
    "resize_bilinear_asymmetric": OpCase("RESIZE_BILINEAR", _resize(False, False)),
    "resize_bilinear_align_corners": OpCase("RESIZE_BILINEAR", _resize(True, False)),
    "resize_bilinear_half_pixel": OpCase("RESIZE_BILINEAR", _resize(False, True)),
    "resize_bilinear_half_pixel_down": OpCase("RESIZE_BILINEAR", _resize(False, True, (5, 3))),
    "conv_same_stride2_relu6": OpCase(
        "CONV_2D",
        _layer(lambda tf: tf.keras.layers.Conv2D(6, 3, 2, padding="same", activation="relu6")),
        ((1, 9, 9, 4),),
    ),
    "conv_dilated_valid": OpCase(
        "CONV_2D",
        _layer(lambda tf: tf.keras.layers.Conv2D(5, 3, padding="valid", dilation_rate=2)),
        ((1, 10, 10, 3),),
    ),
    "depthwise_multiplier2": OpCase(
        "DEPTHWISE_CONV_2D",
        _layer(lambda tf: tf.keras.layers.DepthwiseConv2D(3, padding="same", depth_multiplier=2)),
    ),
    "fully_connected": OpCase(
        "FULLY_CONNECTED",
        _layer(lambda tf: tf.keras.layers.Dense(7, activation="relu")),
        ((1, 12),),
    ),
    "fully_connected_keep_num_dims": OpCase(
        "FULLY_CONNECTED", _layer(lambda tf: tf.keras.layers.Dense(5)), ((1, 3, 12),)
    ),
    "max_pool_same": OpCase(
        "MAX_POOL_2D", _layer(lambda tf: tf.keras.layers.MaxPool2D(3, 2, padding="same"))
    ),
    # int8 averages over 4 or 6 padded cells hit exact ties of integer division, which float
    # evaluation rounds either way: the padded case is checked in float, the int8 one on 3x3.
    "average_pool_same": OpCase(
        "AVERAGE_POOL_2D",
        _layer(lambda tf: tf.keras.layers.AveragePooling2D(3, 2, padding="same")),
        ((1, 9, 9, 4),),
        quantized=False,
    ),
    "average_pool_valid": OpCase(
        "AVERAGE_POOL_2D",
        _layer(lambda tf: tf.keras.layers.AveragePooling2D(3, 2, padding="valid")),
        ((1, 9, 9, 4),),
    ),
    "softmax": OpCase("SOFTMAX", _fn(lambda tf, x: tf.nn.softmax(x * 3.0)), ((1, 10),)),
    "reshape_after_nhwc": OpCase("RESHAPE", _fn(lambda tf, x: tf.reshape(x, [1, 16, 16]))),
    "relu": OpCase("RELU", _fn(lambda tf, x: tf.nn.relu(x))),
    "relu6": OpCase("RELU6", _fn(lambda tf, x: tf.nn.relu6(x)), low=-3, high=8),
    # ---- issue 6 breadth: binary arithmetic
    # int8: TF's converter keeps DIV in float, between DEQUANTIZE and QUANTIZE
    "div": OpCase("DIV", _fn(lambda tf, t: t[0] / (t[1] + 2.0)), TWO),
    "floor_div": OpCase(
        "FLOOR_DIV", _fn(lambda tf, x: tf.math.floordiv(x, _const((4,), 2) + 2.0)), low=-5, high=5
    ),
    "floor_mod": OpCase(
        "FLOOR_MOD", _fn(lambda tf, x: tf.math.floormod(x, _const((4,), 3) + 2.0)), low=-5, high=5
    ),
    "pow": OpCase("POW", _fn(lambda tf, t: tf.pow(t[0], t[1])), TWO, low=0.1, high=2),
    "squared_difference": OpCase(
        "SQUARED_DIFFERENCE", _fn(lambda tf, t: tf.math.squared_difference(t[0], t[1])), TWO
    ),
    "maximum": OpCase("MAXIMUM", _fn(lambda tf, t: tf.maximum(t[0], t[1])), TWO),
    "minimum": OpCase("MINIMUM", _fn(lambda tf, t: tf.minimum(t[0], t[1])), TWO),
    "add_n": OpCase("ADD_N", _fn(lambda tf, t: tf.add_n([t[0], t[1], t[0] * t[1]])), TWO),
    # ---- unary
    "abs": OpCase("ABS", _fn(lambda tf, x: tf.abs(x))),
    "neg": OpCase("NEG", _fn(lambda tf, x: -x)),
    "exp": OpCase("EXP", _fn(lambda tf, x: tf.exp(x)), low=-3, high=3),
    "log": OpCase("LOG", _fn(lambda tf, x: tf.math.log(x)), low=0.05, high=4),
    "sqrt": OpCase("SQRT", _fn(lambda tf, x: tf.sqrt(x)), low=0, high=4),
    "rsqrt": OpCase("RSQRT", _fn(lambda tf, x: tf.math.rsqrt(x)), low=0.1, high=4),
    "square": OpCase("SQUARE", _fn(lambda tf, x: tf.square(x)), low=-2, high=2),
    "tanh": OpCase("TANH", _fn(lambda tf, x: tf.tanh(x)), low=-3, high=3),
    "cos": OpCase("COS", _fn(lambda tf, x: tf.cos(x)), low=-4, high=4),
    "sin": OpCase("SIN", _fn(lambda tf, x: tf.sin(x)), low=-4, high=4),
    "floor": OpCase("FLOOR", _fn(lambda tf, x: tf.floor(x)), low=-3, high=3),
    # CEIL, ROUND and ELU have no reference kernel
    "ceil": OpCase(
        "CEIL", _fn(lambda tf, x: tf.math.ceil(x)), low=-3, high=3, interpreter="default"
    ),
    "round": OpCase(
        "ROUND", _fn(lambda tf, x: tf.round(x * 4.0)), low=-1, high=1, interpreter="default"
    ),
    "sign": OpCase("SIGN", _fn(lambda tf, x: tf.sign(x))),
    "elu": OpCase("ELU", _fn(lambda tf, x: tf.nn.elu(x)), low=-3, high=3, interpreter="default"),
    # int8: the reference kernel rounds the negative branch unlike the optimized one (equal
    # on ~89% of elements); ours agrees with the optimized kernels on ~97%
    "leaky_relu": OpCase(
        "LEAKY_RELU", _fn(lambda tf, x: tf.nn.leaky_relu(x, 0.3)), interpreter="default"
    ),
    "relu_n1_to_1": OpCase(
        "RELU_N1_TO_1", _fn(lambda tf, x: tf.maximum(tf.minimum(x, 1.0), -1.0)), low=-2, high=2
    ),
    # TF's converter never emits RELU_0_TO_1: the RELU_N1_TO_1 model with the other op code
    "relu_0_to_1": OpCase(
        "RELU_0_TO_1",
        _fn(lambda tf, x: tf.maximum(tf.minimum(x, 1.0), -1.0)),
        low=-2,
        high=2,
        edit=lambda data: edit_operator(data, "RELU_N1_TO_1", new_op="RELU_0_TO_1"),
    ),
    "gelu": OpCase("GELU", _fn(lambda tf, x: tf.nn.gelu(x)), low=-3, high=3),
    "gelu_tanh": OpCase("GELU", _fn(lambda tf, x: tf.nn.gelu(x, approximate=True)), low=-3, high=3),
    "log_softmax": OpCase("LOG_SOFTMAX", _fn(lambda tf, x: tf.nn.log_softmax(x * 3.0)), ((1, 10),)),
    # two LOG_SOFTMAX (with a MUL between)
    "log_softmax_twice": OpCase(
        "LOG_SOFTMAX",
        _fn(lambda tf, x: tf.nn.log_softmax(tf.nn.log_softmax(x * 3.0) * 0.5)),
        ((1, 10),),
    ),
    # two L2_NORMALIZATION (with a MUL between)
    "l2_normalization_twice": OpCase(
        "L2_NORMALIZATION",
        _fn(lambda tf, x: tf.math.l2_normalize(tf.math.l2_normalize(x * 3.0, -1) * 0.5, -1)),
        ((1, 10),),
    ),
    # int8: the reference kernel's fixed-point inverse sqrt is up to 2 steps off the optimized;
    # on the input directly: XNNPACK's conv rounds once and ours twice, as the builtin kernels
    # (issue 36), a step the normalization makes two. After a conv (the axis renumbered for
    # channels-first storage): float
    "l2_normalization": OpCase(
        "L2_NORMALIZATION",
        _fn(lambda tf, x: tf.math.l2_normalize(x, axis=-1)),
        ((1, 4, 4, 6),),
        interpreter="default",
    ),
    "l2_normalization_after_conv": OpCase(
        "L2_NORMALIZATION",
        _conv_then(lambda tf, x: tf.math.l2_normalize(x, axis=-1)),
        quantized=False,
        interpreter="default",
    ),
    # The reference kernel sums channels [c - r, c + r) (one short); TF and the optimized
    # kernel sum [c - r, c + r], as ONNX LRN does. Float only: TFLite's kernel is float-only
    "local_response_normalization": OpCase(
        "LOCAL_RESPONSE_NORMALIZATION",
        _conv_then(
            lambda tf, x: tf.nn.local_response_normalization(x, 2, bias=1.0, alpha=0.5, beta=0.75),
            channels=7,
        ),
        quantized=False,
        interpreter="default",
    ),
    # ---- comparisons and logic (bool results cast to float)
    # float only: TFLite compares int8 operands after fixed-point rescaling to a common scale,
    # which flips near-equal pairs (0.1-0.5% of elements) between 0 and 1
    "less": OpCase("LESS", _fn(lambda tf, t: _f(tf, tf.less(t[0], t[1]))), TWO, quantized=False),
    "less_equal": OpCase(
        "LESS_EQUAL", _fn(lambda tf, t: _f(tf, tf.less_equal(t[0], t[1]))), TWO, quantized=False
    ),
    "greater": OpCase(
        "GREATER", _fn(lambda tf, t: _f(tf, tf.greater(t[0], t[1]))), TWO, quantized=False
    ),
    "greater_equal": OpCase(
        "GREATER_EQUAL",
        _fn(lambda tf, t: _f(tf, tf.greater_equal(t[0], t[1]))),
        TWO,
        quantized=False,
    ),
    "equal": OpCase(
        "EQUAL",
        _fn(lambda tf, t: _f(tf, tf.equal(tf.floor(t[0] * 2.0), tf.floor(t[1] * 2.0)))),
        TWO,
        quantized=False,
    ),
    "not_equal": OpCase(
        "NOT_EQUAL",
        _fn(lambda tf, t: _f(tf, tf.not_equal(tf.floor(t[0] * 2.0), tf.floor(t[1] * 2.0)))),
        TWO,
        quantized=False,
    ),
    # the int8 comparison kernels, on operands that share a grid
    "less_reversed": OpCase("LESS", _vs_reversed(lambda tf: tf.less)),
    "less_equal_reversed": OpCase("LESS_EQUAL", _vs_reversed(lambda tf: tf.less_equal)),
    "greater_reversed": OpCase("GREATER", _vs_reversed(lambda tf: tf.greater)),
    "greater_equal_reversed": OpCase("GREATER_EQUAL", _vs_reversed(lambda tf: tf.greater_equal)),
    "equal_reversed": OpCase("EQUAL", _vs_reversed(lambda tf: tf.equal)),
    # (TF's converter keeps this one in float, between DEQUANTIZE and QUANTIZE)
    "not_equal_reversed": OpCase("NOT_EQUAL", _vs_reversed(lambda tf: tf.not_equal)),
    # float only, as the two-input comparisons: their int8 inputs are compared after rescaling
    "logical_and": OpCase(
        "LOGICAL_AND",
        _fn(
            lambda tf, t: _f(
                tf,
                tf.logical_or(tf.logical_and(t[0] > 0, t[1] > 0), tf.logical_not(t[0] > t[1])),
            )
        ),
        TWO,
        quantized=False,
    ),
    "logical_or": OpCase(
        "LOGICAL_OR",
        _fn(lambda tf, t: _f(tf, tf.logical_or(t[0] > 0.5, t[1] < 0))),
        TWO,
        quantized=False,
    ),
    "logical_not": OpCase(
        "LOGICAL_NOT",
        _fn(lambda tf, t: _f(tf, tf.logical_not(tf.logical_and(t[0] > 0, t[1] > 0)))),
        TWO,
    ),
    # compared with 0, which every int8 grid holds exactly (two inputs' grids differ, see LESS)
    "select": OpCase("SELECT", _fn(lambda tf, t: tf.where(t[0] > 0.0, t[0], t[1])), TWO),
    "select_v2_broadcast": OpCase(
        "SELECT_V2", _fn(lambda tf, x: tf.where(x > 0.2, x, tf.zeros_like(x[:, :1]) + 0.5))
    ),
    "cast": OpCase("CAST", _fn(lambda tf, x: _f(tf, tf.cast(x * 3.0, tf.int32)))),
    # ---- reductions (after a conv: the axes are renumbered for channels-first storage)
    # int8: the reference kernel returns one value for every channel here (a reference-kernel
    # bug); the optimized kernels agree with ours exactly
    "sum_spatial_keepdims": OpCase(
        "SUM",
        _conv_then(lambda tf, x: tf.reduce_sum(x, [1, 2], keepdims=True)),
        interpreter="default",
    ),
    "reduce_max_channels": OpCase("REDUCE_MAX", _conv_then(lambda tf, x: tf.reduce_max(x, [3]))),
    "reduce_min_height": OpCase("REDUCE_MIN", _conv_then(lambda tf, x: tf.reduce_min(x, [1]))),
    # float only: TFLite's int8 kernel rounds every partial product to the input grid, ours
    # rounds the product once (one step apart on 2-4% of elements)
    "reduce_prod_width": OpCase(
        "REDUCE_PROD",
        _fn(lambda tf, x: tf.reduce_prod(x, [2], keepdims=True)),
        low=0.5,
        high=1.5,
        quantized=False,
    ),
    "arg_max_channels": OpCase("ARG_MAX", _conv_then(lambda tf, x: _f(tf, tf.argmax(x, axis=3)))),
    "arg_min_height": OpCase(
        "ARG_MIN", _conv_then(lambda tf, x: _f(tf, tf.argmin(x, axis=1, output_type=tf.int32)))
    ),
    # float only: TFLite has no int8 CUMSUM (TF's int8 model dequantizes around it)
    "cumsum_exclusive_reverse": OpCase(
        "CUMSUM",
        _conv_then(lambda tf, x: tf.cumsum(x, axis=2, exclusive=True, reverse=True)),
        quantized=False,
    ),
    # ---- cutting, joining, indexing (after a conv)
    "split_channels": OpCase("SPLIT", _conv_then(lambda tf, x: tf.split(x, 2, axis=3))),
    "split_v_height": OpCase("SPLIT_V", _conv_then(lambda tf, x: tf.split(x, [3, -1, 2], axis=1))),
    "pack_axis1": OpCase("PACK", _conv_then(lambda tf, t: tf.stack(t, axis=1)), TWO),
    "unpack_channels": OpCase("UNPACK", _conv_then(lambda tf, x: tf.unstack(x, axis=3))),
    "slice": OpCase("SLICE", _conv_then(lambda tf, x: tf.slice(x, [0, 1, 2, 1], [1, 4, -1, 2]))),
    "strided_slice_steps_reverse": OpCase(
        "STRIDED_SLICE", _conv_then(lambda tf, x: x[:, 1:7:2, ::-1, 1:3])
    ),
    "strided_slice_shrink_negative": OpCase(
        "STRIDED_SLICE", _conv_then(lambda tf, x: x[:, -1, :, 1])
    ),
    # TF rewrites the ellipsis and the new axis into begin / end masks and a RESHAPE
    "strided_slice_ellipsis_new_axis": OpCase(
        "STRIDED_SLICE", _conv_then(lambda tf, x: x[..., None, 1:3])
    ),
    # x[:, 2:6, ..., None, 1:3] as the masks themselves
    "strided_slice_ellipsis_new_axis_masks": _strided_slice_masks(
        {"beginMask": 1, "endMask": 1, "ellipsisMask": 4, "newAxisMask": 8},
        [0, 2, 0, 0, 1],
        [0, 6, 0, 0, 3],
        [1, 1, 1, 1, 1],
        (1, 4, 8, 1, 2),
    ),
    # x[0:1, 1:5, 2, 0:2] with offset (ends relative to begins) and W shrunk
    "strided_slice_offset_shrink": _strided_slice_masks(
        {"offset": True, "shrinkAxisMask": 4},
        [0, 1, 2, 0],
        [1, 4, 3, 2],
        [1, 1, 1, 1],
        (1, 4, 2),
    ),
    "gather_channels": OpCase(
        "GATHER", _conv_then(lambda tf, x: tf.gather(x, [2, 0, 1, 1], axis=3))
    ),
    # batch_dims: one gather per batch index; the dims between the batch dims and axis stay
    # in front of the gathered ones
    "gather_batch_dims_channels": OpCase(
        "GATHER",
        _conv_then(lambda tf, x: tf.gather(x, [[2, 0, 1], [3, 3, 0]], axis=3, batch_dims=1)),
        ((2, 6, 5, 4),),
    ),
    "gather_batch_dims_width": OpCase(
        "GATHER",
        _conv_then(
            lambda tf, x: tf.gather(x, [[[1, 0], [4, 4]], [[0, 2], [3, 1]]], axis=2, batch_dims=1)
        ),
        ((2, 6, 5, 4),),
    ),
    "gather_batch_dims_computed_indices": OpCase(
        "GATHER",
        _fn(lambda tf, x: tf.gather(x, tf.argmax(x[:, 0], axis=2), axis=3, batch_dims=1)),
        ((2, 6, 5, 4),),
    ),
    "gather_batch_dims_2": OpCase(
        "GATHER",
        _fn(lambda tf, x: tf.gather(x, [[[1, 0], [4, 4]], [[0, 2], [3, 1]]], axis=2, batch_dims=2)),
        ((2, 2, 5, 4),),
    ),
    "gather_nd": OpCase("GATHER_ND", _conv_then(lambda tf, x: tf.gather_nd(x, [[0, 1], [0, 5]]))),
    # int8 TILE (version 3) and DEPTH_TO_SPACE (version 2) have no reference kernel
    "tile": OpCase(
        "TILE", _conv_then(lambda tf, x: tf.tile(x, [1, 2, 1, 3])), interpreter="default"
    ),
    "reverse": OpCase("REVERSE_V2", _conv_then(lambda tf, x: tf.reverse(x, [2]))),
    # TF's converter rewrites BROADCAST_TO (into MUL, or FILL on dynamic shapes): the TILE
    # model of the same result with BROADCAST_TO's op code and the target shape
    "broadcast_to": OpCase(
        "BROADCAST_TO",
        _fn(lambda tf, x: tf.tile(x, [1, 3, 1, 1])),
        ((1, 1, 8, 4),),
        edit=lambda data: edit_operator(
            data, "TILE", new_op="BROADCAST_TO", version=2, constants={1: [1, 3, 8, 4]}
        ),
    ),
    "mirror_pad_reflect": OpCase(
        "MIRROR_PAD",
        _conv_then(lambda tf, x: tf.pad(x, [[0, 0], [2, 1], [1, 3], [0, 0]], "REFLECT")),
    ),
    "mirror_pad_symmetric": OpCase(
        "MIRROR_PAD",
        _conv_then(lambda tf, x: tf.pad(x, [[0, 0], [2, 1], [1, 3], [0, 0]], "SYMMETRIC")),
    ),
    "batch_matmul": OpCase(
        "BATCH_MATMUL", _fn(lambda tf, t: tf.matmul(t[0], t[1])), ((1, 3, 4, 5), (1, 3, 5, 6))
    ),
    "batch_matmul_adj_y": OpCase(
        "BATCH_MATMUL",
        _fn(lambda tf, t: tf.matmul(t[0], t[1], transpose_b=True)),
        ((2, 4, 5), (2, 6, 5)),
    ),
    # ---- spatial
    "resize_nearest_asymmetric": OpCase("RESIZE_NEAREST_NEIGHBOR", _nearest(False, False)),
    "resize_nearest_align_corners": OpCase("RESIZE_NEAREST_NEIGHBOR", _nearest(True, False)),
    "resize_nearest_half_pixel": OpCase("RESIZE_NEAREST_NEIGHBOR", _nearest(False, True)),
    "resize_nearest_half_pixel_down": OpCase(
        "RESIZE_NEAREST_NEIGHBOR", _nearest(False, True, (5, 3))
    ),
    "depth_to_space": OpCase(
        "DEPTH_TO_SPACE",
        _fn(lambda tf, x: tf.nn.depth_to_space(x, 2)),
        ((1, 4, 5, 8),),
        interpreter="default",
    ),
    "space_to_depth": OpCase("SPACE_TO_DEPTH", _fn(lambda tf, x: tf.nn.space_to_depth(x, 2))),
    "transpose_conv_same_stride2": OpCase(
        "TRANSPOSE_CONV",
        _layer(lambda tf: tf.keras.layers.Conv2DTranspose(5, 3, 2, padding="same")),
        ((1, 5, 6, 4),),
    ),
    "transpose_conv_valid": OpCase(
        "TRANSPOSE_CONV",
        _layer(lambda tf: tf.keras.layers.Conv2DTranspose(3, (3, 2), (2, 1), padding="valid")),
        ((1, 5, 6, 4),),
    ),
    # ---- shape ops on dynamic dims (TF folds them on static shapes)
    "shape": OpCase("SHAPE", _fn(lambda tf, x: _f(tf, tf.shape(x))), ((None, 8, 8, 4),)),
    # TFLite has no ONES_LIKE: TF lowers tf.ones_like to SHAPE + FILL (a constant when static)
    "ones_like_as_fill": OpCase(
        "FILL", _fn(lambda tf, x: x + tf.ones_like(x)), ((None, 8, 8, 4),), low=-2, high=2
    ),
    # int8: TF's converter keeps ZEROS_LIKE in float (TFLite has no int8 kernel)
    "zeros_like": OpCase(
        "ZEROS_LIKE", _fn(lambda tf, x: x * 2.0 + tf.zeros_like(x)), ((None, 8, 8, 4),)
    ),
    "expand_dims": OpCase(
        "EXPAND_DIMS", _fn(lambda tf, x: tf.expand_dims(x, 2)), ((None, 8, 8, 4),)
    ),
    # two dynamic dims: with one, TF turns the SQUEEZE into a RESHAPE
    "squeeze": OpCase("SQUEEZE", _fn(lambda tf, x: tf.squeeze(x, 2)), ((None, None, 1, 4),)),
    # float only: TFLite's CONV_3D is float-only
    "conv_3d_same": OpCase(
        "CONV_3D",
        _layer(lambda tf: tf.keras.layers.Conv3D(4, 3, (1, 2, 1), padding="same")),
        ((1, 5, 6, 6, 3),),
        quantized=False,
    ),
}


def build_tflite(
    case: OpCase, quantized: bool, seed: int = 0, float_input: bool = False, int16: bool = False
) -> bytes:
    """Convert the case's Keras model with TFLiteConverter (full integer when ``quantized``).

    ``float_input`` keeps a float input, so the model starts with a QUANTIZE op. ``int16``:
    16x8 quantization (int16 activations and I/O, int8 weights, int64 biases) instead of int8.
    """
    tf = _tf()
    # named, so that calibration feeds by name: the converted model's input order is not
    # the Keras model's
    inputs = [
        tf.keras.Input(batch_size=s[0], shape=s[1:], name=f"x{k}")
        for k, s in enumerate(case.shapes)
    ]
    model = tf.keras.Model(inputs, case.build(tf, inputs))
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if quantized:
        rng = np.random.default_rng(seed)

        def representative():
            for _ in range(32):
                yield {
                    f"x{k}": rng.uniform(case.low, case.high, s).astype(np.float32)
                    for k, s in enumerate(run_shapes(case))
                }

        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative
        ops = tf.lite.OpsSet
        activations = tf.int16 if int16 else tf.int8
        converter.target_spec.supported_ops = [
            ops.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8
            if int16
            else ops.TFLITE_BUILTINS_INT8
        ]
        converter.inference_input_type = tf.float32 if float_input else activations
        converter.inference_output_type = activations
    data = converter.convert()
    return case.edit(data) if case.edit is not None else data
