"""Ops that move or combine tensors: CONCATENATION, PAD, TRANSPOSE.

Axes are written in TFLite's (source) order; the layout pass renumbers them when it stores a
tensor channels-first.
"""

from __future__ import annotations

import numpy as np

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.common import rank_of
from tflite2qonnx.ops.tensor.operand_values import onnx_pads, required_constant


def concatenation(b: GraphBuilder, op: Operator) -> None:
    """Concat. The int8 and int16 kernels copy each input's integers, whatever its grid (int16
    inputs may differ from the output's: ``GraphBuilder.reinterpret``); uint8's rescales them
    (ConcatenationWithScaling: once in float by default, its record's ``kernel`` under
    bit_exact). Integer constants keep their type (a shape built in a WHILE body joins int32
    values)."""
    out = op.outputs[0]
    copies = b.tensor(out).dtype != "uint8"
    values = [b.reinterpret(b.input(i), i, out) if copies else b.input(i) for i in op.inputs]
    axis = int(op.options.get("axis", 0)) % rank_of(b, out)
    y = b.emit("Concat", values, axis=axis)[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))


def pad(b: GraphBuilder, op: Operator) -> None:
    """PAD / PADV2: [rank, 2] paddings (constant or computed) -> ONNX's begins-then-ends list.

    A quantized tensor pads with its zero point, i.e. with real 0 (or PADV2's value, on the
    output's grid: the kernel requires it); the input's integers are copied
    (``GraphBuilder.reinterpret``).
    """
    pads = onnx_pads(b, op, op.inputs[1])
    inputs = [b.raw_input(op.inputs[0], op.outputs[0]), pads]
    if len(op.inputs) > 2 and op.inputs[2] >= 0:
        value = b.stored_constant(op.inputs[2])  # an int32 tensor pads with an int32
        if value is None:
            raise ConversionError("PADV2's constant value must be a constant", op.where)
        inputs.append(b.const(np.asarray(value).reshape(()), "pad_value"))
    b.set_output(op.outputs[0], b.emit("Pad", inputs, mode="constant")[0])


def transpose(b: GraphBuilder, op: Operator) -> None:
    why = "ONNX Transpose takes the permutation as an attribute"
    perm = [int(p) for p in required_constant(b, op, 1, "perm", why)]
    b.set_output(
        op.outputs[0], b.emit("Transpose", [b.raw_input(op.inputs[0], op.outputs[0])], perm=perm)[0]
    )
