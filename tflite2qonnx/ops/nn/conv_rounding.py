"""The int8 / uint8 convolutions' default kernel: the float CONV_2D / DEPTHWISE_CONV_2D graph
with its accumulator rounded twice, as the builtin kernels' ``MultiplyByQuantizedMultiplier``
rounds it (``kernel_rounding.requantize_accumulator``). Their records run it by default where
``kernel_rounding.accumulator_rounds_twice`` holds (``ops.dispatch``), so the converters hold
the float graph only; --bit-exact runs the emulated kernels before it.
"""

from __future__ import annotations

from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.kernel_rounding import requantize_accumulator
from tflite2qonnx.ops.nn import conv


def conv_2d(b: GraphBuilder, op: Operator) -> None:
    """int8 / uint8 CONV_2D, its accumulator rounded twice."""
    conv.conv_2d(b, op, requantize_accumulator)


def depthwise_conv_2d(b: GraphBuilder, op: Operator) -> None:
    """int8 / uint8 DEPTHWISE_CONV_2D, its accumulator rounded twice."""
    conv.depthwise_conv_2d(b, op, requantize_accumulator)
