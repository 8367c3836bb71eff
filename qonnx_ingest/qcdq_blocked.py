"""Constant quantizers with blockwise scales (LiteRT's blockwise int4 weights, which
tflite2qonnx writes as a Quant whose scale has the weight's full shape, constant along each
block) lowered to opset 21's blocked DequantizeLinear (``axis`` + ``block_size``).

onnxruntime 1.31 runs blocked DequantizeLinear on int8 and int4 storage (measured); the
integers are stored as int8 here. QCDQ has no blocked form below opset 21, so a model that
holds one is upgraded (onnx's version converter), as 16-bit activations already are. Scales
that vary along two axes in any other way keep quant_info's refusal.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.quant_info import constant_quantizer_output

BLOCKED_OPSET = 21


def blocked_quantizers(model: onnx.ModelProto) -> list[tuple[onnx.NodeProto, int, int]]:
    """(node, axis, block size) of each Quant on a constant whose scale has the constant's
    full shape and repeats in blocks along exactly one axis (every other axis unblocked)."""
    constants = {t.name: t for t in model.graph.initializer}
    found = []
    for node in model.graph.node:
        if node.op_type not in ("Quant", "IntQuant") or node.input[0] not in constants:
            continue
        if len(node.input) < 4 or node.input[1] not in constants:
            continue
        x = constants[node.input[0]]
        scale = numpy_helper.to_array(constants[node.input[1]])
        if scale.ndim != len(x.dims) or sum(d > 1 for d in scale.shape) < 2:
            continue
        if tuple(scale.shape) != tuple(x.dims):
            continue
        blocks = [_block(scale, axis) for axis in range(scale.ndim)]
        if sum(b > 1 for b in blocks) == 1:
            axis = int(np.argmax(blocks))
            found.append((node, axis, blocks[axis]))
    return found


def _block(a: np.ndarray, axis: int) -> int:
    """The largest block size along ``axis`` over which ``a`` is constant."""
    size = a.shape[axis]
    for block in sorted((d for d in range(1, size + 1) if size % d == 0), reverse=True):
        first = np.take(a, np.arange(0, size, block), axis=axis)
        if np.array_equal(np.repeat(first, block, axis=axis), a):
            return block
    return 1


def lower_blocked(model: onnx.ModelProto, upgrade) -> onnx.ModelProto:
    """``model`` with each blocked constant quantizer a blocked DequantizeLinear (upgraded to
    opset 21 by ``upgrade(model, opset)`` first when it holds any)."""
    if not blocked_quantizers(model):
        return model
    model = upgrade(model, BLOCKED_OPSET)
    graph = model.graph
    constants = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    replaced = {}
    for node, axis, block in blocked_quantizers(model):
        where = f"{node.op_type} {node.name or node.output[0]}"
        bits = float(constants[node.input[3]].item())
        if bits > 8:
            raise ConversionError(f"blockwise {bits:g}-bit constant: no int8 storage", where)
        values = constant_quantizer_output(node, constants, graph).astype(np.float64)
        scale = constants[node.input[1]].astype(np.float64)
        zero = np.broadcast_to(constants[node.input[2]].astype(np.float64), scale.shape)
        stored = np.round(values / scale + zero).astype(np.int8)
        keep = np.arange(0, scale.shape[axis], block)
        base = node.name or node.output[0]
        tensors = [
            numpy_helper.from_array(stored, f"{base}_int"),
            numpy_helper.from_array(np.take(scale, keep, axis).astype(np.float32), f"{base}_bs"),
            numpy_helper.from_array(np.take(zero, keep, axis).astype(np.int8), f"{base}_bzp"),
        ]
        graph.initializer.extend(tensors)
        replaced[node.output[0]] = helper.make_node(
            "DequantizeLinear", [t.name for t in tensors], [node.output[0]],
            name=f"{base}_dequantize", axis=axis, block_size=block,
        )  # fmt: skip
    nodes = [replaced.get(n.output[0], n) if n.output else n for n in graph.node]
    del graph.node[:]
    graph.node.extend(nodes)
    return model
