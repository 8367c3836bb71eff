"""The operator table: TFLite builtin (or custom code) -> converter function.

Adding an operator means writing one small converter ``f(builder, operator)`` and one row here.
"""

from __future__ import annotations

from collections.abc import Callable

from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.ops.activation import relu, relu6
from tflite2qonnx.ops.fully_connected import fully_connected
from tflite2qonnx.ops.quantize import dequantize, quantize
from tflite2qonnx.reader import Operator

Converter = Callable[[GraphBuilder, Operator], None]

CONVERTERS: dict[str, Converter] = {
    "DEQUANTIZE": dequantize,
    "FULLY_CONNECTED": fully_connected,
    "QUANTIZE": quantize,
    "RELU": relu,
    "RELU6": relu6,
}
