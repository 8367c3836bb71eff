"""The operator table: TFLite builtin (or custom code) -> converter function.

Adding an operator means writing one small converter ``f(builder, operator)`` and one row here.
"""

from __future__ import annotations

from collections.abc import Callable

from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.ops.activation import relu, relu6
from tflite2qonnx.ops.conv import conv_2d, depthwise_conv_2d
from tflite2qonnx.ops.elementwise import add, hard_swish, logistic, mul, prelu, sub
from tflite2qonnx.ops.fully_connected import fully_connected
from tflite2qonnx.ops.pool import average_pool_2d, max_pool_2d
from tflite2qonnx.ops.quantize import dequantize, quantize
from tflite2qonnx.ops.resize import resize_bilinear
from tflite2qonnx.ops.shape import reshape
from tflite2qonnx.ops.softmax import softmax
from tflite2qonnx.ops.tensor import concatenation, mean, pad, transpose
from tflite2qonnx.reader import Operator

Converter = Callable[[GraphBuilder, Operator], None]

CONVERTERS: dict[str, Converter] = {
    "ADD": add,
    "AVERAGE_POOL_2D": average_pool_2d,
    "CONCATENATION": concatenation,
    "CONV_2D": conv_2d,
    "DEPTHWISE_CONV_2D": depthwise_conv_2d,
    "DEQUANTIZE": dequantize,
    "FULLY_CONNECTED": fully_connected,
    "HARD_SWISH": hard_swish,
    "LOGISTIC": logistic,
    "MAX_POOL_2D": max_pool_2d,
    "MEAN": mean,
    "MUL": mul,
    "PAD": pad,
    "PADV2": pad,
    "PRELU": prelu,
    "QUANTIZE": quantize,
    "RELU": relu,
    "RELU6": relu6,
    "RESHAPE": reshape,
    "RESIZE_BILINEAR": resize_bilinear,
    "SOFTMAX": softmax,
    "SUB": sub,
    "TRANSPOSE": transpose,
}
