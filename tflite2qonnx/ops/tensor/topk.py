"""TOPK_V2: the k largest entries along the last axis, as ONNX TopK.

TFLite's kernel (kernels/topk_v2.cc) orders by value, descending, and breaks ties in favour
of the lower index; ONNX TopK with ``largest=1, sorted=1`` is defined with the same total
order, so the two agree element for element. The indices are int32 in TFLite, int64 in ONNX.
The values (int16 too) are the input's stored elements, copied: on a quantized tensor they are
read on the output's grid (``GraphBuilder.reinterpret``).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator

_SUPPORTED = ("float32", "uint8", "int8", "int16", "int32", "int64")


def topk_v2(b: GraphBuilder, op: Operator) -> None:
    x = b.tensor(op.inputs[0])
    if x.dtype not in _SUPPORTED:
        raise ConversionError(f"TOPK_V2 on {x.dtype} is not a TFLite kernel", op.where)
    values_out, indices_out = b.tensor(op.outputs[0]), b.tensor(op.outputs[1])
    if values_out.dtype != x.dtype or indices_out.dtype != "int32":
        raise ConversionError(
            f"outputs are {values_out.dtype} and {indices_out.dtype}; the kernel writes "
            f"{x.dtype} values and int32 indices",
            op.where,
        )
    if len(x.shape) < 1:
        raise ConversionError("TOPK_V2 needs an input of rank 1 or more", op.where)
    if b.tensor(op.inputs[1]).data is not None:
        k = b.int_constant(op.inputs[1], op.where).reshape(-1)
        if k.size != 1:
            raise ConversionError(f"k must be one value, got {k.size}", op.where)
        size = x.shape_signature[-1]
        if k[0] < 0 or (size >= 0 and k[0] > size):
            raise ConversionError(f"k = {k[0]} is outside [0, {size}]", op.where)
        k_name = b.const(k.astype(np.int64), "topk_k")
    else:
        k_name = b.emit("Cast", [b.input(op.inputs[1])], to=TensorProto.INT64)[0]
        k_name = b.emit("Reshape", [k_name, b.const(np.array([1], np.int64), "one_dim")])[0]
    axis = len(x.shape) - 1
    values, indices = b.emit(
        "TopK", [b.input(op.inputs[0]), k_name], 2, axis=axis, largest=1, sorted=1
    )
    b.set_output(op.outputs[0], b.reinterpret(values, op.inputs[0], op.outputs[0]))
    indices = b.emit("Cast", [indices], to=TensorProto.INT32)[0]
    b.set_output(op.outputs[1], indices)
