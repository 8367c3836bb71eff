"""The operator table: TFLite builtin (or custom code) -> converter function.

Adding an operator means writing one small converter ``f(builder, operator)`` and one row here.
"""

from __future__ import annotations

from collections.abc import Callable

from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.ops import elementwise as ew
from tflite2qonnx.ops import reduce, shape, slicing
from tflite2qonnx.ops.activation import relu, relu6
from tflite2qonnx.ops.conv import (
    conv_2d,
    conv_3d,
    depth_to_space,
    depthwise_conv_2d,
    local_response_normalization,
    space_to_depth,
    transpose_conv,
)
from tflite2qonnx.ops.densify import densify
from tflite2qonnx.ops.fully_connected import batch_matmul, fully_connected
from tflite2qonnx.ops.mediapipe import (
    convolution_2d_transpose_bias,
    max_pooling_with_argmax_2d,
    max_unpooling_2d,
)
from tflite2qonnx.ops.mediapipe_transform import (
    landmarks_to_transform_matrix,
    transform_landmarks,
    transform_tensor_bilinear,
)
from tflite2qonnx.ops.pool import average_pool_2d, max_pool_2d
from tflite2qonnx.ops.quantize import dequantize, quantize
from tflite2qonnx.ops.resize import resize_bilinear, resize_nearest_neighbor
from tflite2qonnx.ops.softmax import log_softmax, softmax
from tflite2qonnx.ops.tensor import concatenation, mean, pad, transpose
from tflite2qonnx.reader import Operator

Converter = Callable[[GraphBuilder, Operator], None]

CONVERTERS: dict[str, Converter] = {
    "ABS": ew.abs_,
    "ADD": ew.add,
    "ADD_N": ew.add_n,
    "ARG_MAX": reduce.arg_max,
    "ARG_MIN": reduce.arg_min,
    "AVERAGE_POOL_2D": average_pool_2d,
    "BATCH_MATMUL": batch_matmul,
    "BROADCAST_TO": shape.broadcast_to,
    "CAST": ew.cast,
    "CEIL": ew.ceil,
    "CONCATENATION": concatenation,
    "CONV_2D": conv_2d,
    "CONV_3D": conv_3d,
    "COS": ew.cos,
    "CUMSUM": reduce.cumsum,
    "DENSIFY": densify,
    "DEPTH_TO_SPACE": depth_to_space,
    "DEPTHWISE_CONV_2D": depthwise_conv_2d,
    "DEQUANTIZE": dequantize,
    "DIV": ew.div,
    "ELU": ew.elu,
    "EQUAL": ew.equal,
    "EXP": ew.exp,
    "EXPAND_DIMS": shape.expand_dims,
    "FILL": shape.fill,
    "FLOOR": ew.floor,
    "FLOOR_DIV": ew.floor_div,
    "FLOOR_MOD": ew.floor_mod,
    "FULLY_CONNECTED": fully_connected,
    "GATHER": slicing.gather,
    "GATHER_ND": slicing.gather_nd,
    "GELU": ew.gelu,
    "GREATER": ew.greater,
    "GREATER_EQUAL": ew.greater_equal,
    "HARD_SWISH": ew.hard_swish,
    "L2_NORMALIZATION": reduce.l2_normalization,
    "LEAKY_RELU": ew.leaky_relu,
    "LESS": ew.less,
    "LESS_EQUAL": ew.less_equal,
    "LOCAL_RESPONSE_NORMALIZATION": local_response_normalization,
    "LOG": ew.log,
    "LOG_SOFTMAX": log_softmax,
    "LOGICAL_AND": ew.logical_and,
    "LOGICAL_NOT": ew.logical_not,
    "LOGICAL_OR": ew.logical_or,
    "LOGISTIC": ew.logistic,
    "MAX_POOL_2D": max_pool_2d,
    "MAXIMUM": ew.maximum,
    "MEAN": mean,
    "MINIMUM": ew.minimum,
    "MIRROR_PAD": slicing.mirror_pad,
    "MUL": ew.mul,
    "NEG": ew.neg,
    "NOT_EQUAL": ew.not_equal,
    "PACK": slicing.pack,
    "PAD": pad,
    "PADV2": pad,
    "POW": ew.pow_,
    "PRELU": ew.prelu,
    "QUANTIZE": quantize,
    "REDUCE_MAX": reduce.reduce_max,
    "REDUCE_MIN": reduce.reduce_min,
    "REDUCE_PROD": reduce.reduce_prod,
    "RELU": relu,
    "RELU_0_TO_1": ew.relu_0_to_1,
    "RELU_N1_TO_1": ew.relu_n1_to_1,
    "RELU6": relu6,
    "RESHAPE": shape.reshape,
    "RESIZE_BILINEAR": resize_bilinear,
    "RESIZE_NEAREST_NEIGHBOR": resize_nearest_neighbor,
    "REVERSE_V2": slicing.reverse_v2,
    "ROUND": ew.round_,
    "RSQRT": ew.rsqrt,
    "SELECT": ew.select,
    "SELECT_V2": ew.select,
    "SHAPE": shape.shape,
    "SIGN": ew.sign,
    "SIN": ew.sin,
    "SLICE": slicing.slice_,
    "SOFTMAX": softmax,
    "SPACE_TO_DEPTH": space_to_depth,
    "SPLIT": slicing.split,
    "SPLIT_V": slicing.split_v,
    "SQRT": ew.sqrt,
    "SQUARE": ew.square,
    "SQUARED_DIFFERENCE": ew.squared_difference,
    "SQUEEZE": shape.squeeze,
    "STRIDED_SLICE": slicing.strided_slice,
    "SUB": ew.sub,
    "SUM": reduce.reduce_sum,
    "TANH": ew.tanh,
    "TILE": slicing.tile,
    "TRANSPOSE": transpose,
    "TRANSPOSE_CONV": transpose_conv,
    "UNPACK": slicing.unpack,
    "ZEROS_LIKE": shape.zeros_like,
}

# MediaPipe's custom ops, by custom code
CUSTOM_CONVERTERS: dict[str, Converter] = {
    "Convolution2DTransposeBias": convolution_2d_transpose_bias,
    "Landmarks2TransformMatrix": landmarks_to_transform_matrix,
    "MaxPoolingWithArgmax2D": max_pooling_with_argmax_2d,
    "MaxUnpooling2D": max_unpooling_2d,
    "TransformLandmarks": transform_landmarks,
    "TransformTensorBilinear": transform_tensor_bilinear,
}
CONVERTERS.update(CUSTOM_CONVERTERS)


def unsupported_message(op: Operator) -> str:
    """The error for an operator without a converter; a custom op's lists the custom ops."""
    text = f"unsupported operator {op.name} (operator {op.index})"
    if op.opcode.builtin == "CUSTOM":
        text += f"; supported custom ops: {', '.join(sorted(CUSTOM_CONVERTERS))}"
    return text
