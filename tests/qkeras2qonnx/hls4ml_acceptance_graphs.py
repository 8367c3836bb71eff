"""Graph helpers of the hls4ml acceptance test: the input grid a model is fed on, cutting a
graph at a tensor, and hls4ml's documented QONNX preparation."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import onnx


@dataclass(frozen=True)
class InputGrid:
    """The input quantizer the models lack: ``bits`` bits, ``integer`` of them (with the sign)
    left of the binary point, i.e. what a Quant(scale=2**(integer-bits), bits, signed) emits."""

    bits: int
    integer: int
    signed: bool

    @property
    def hls_type(self) -> str:
        return f"{'' if self.signed else 'u'}fixed<{self.bits},{self.integer}>"

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        low = -(2 ** (self.bits - 1)) if self.signed else 0
        q = rng.integers(low, low + 2**self.bits, shape)
        return (q * 2.0 ** (self.integer - self.bits)).astype(np.float32)


def cut(model: onnx.ModelProto, tensor: str) -> onnx.ModelProto:
    """A copy of ``model`` computing only ``tensor``, its output."""
    model = copy.deepcopy(model)
    graph = model.graph
    needed, kept = {tensor}, []
    for node in reversed(graph.node):
        if needed.intersection(node.output):
            kept.append(node)
            needed.update(node.input)
    del graph.node[:]
    graph.node.extend(reversed(kept))
    del graph.output[:]
    expose(graph, tensor)
    return model


def logits(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` whose final Softmax (if any) is cut off: its input becomes the
    output."""
    model = copy.deepcopy(model)
    graph = model.graph
    if len(graph.output) != 1:
        return model
    (output,) = graph.output
    softmax = next(n for n in graph.node if output.name in n.output)
    if softmax.op_type != "Softmax":
        return model
    graph.node.remove(softmax)
    graph.output.remove(output)
    expose(graph, softmax.input[0])
    return model


def expose(graph: onnx.GraphProto, name: str) -> None:
    """Make tensor ``name`` a graph output (qonnx refuses a value_info that is also an output)."""
    infos = [vi for vi in graph.value_info if vi.name == name]
    for vi in infos:
        graph.value_info.remove(vi)
    graph.output.append(
        infos[0]
        if infos
        else onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)
    )


def prepare_for_hls4ml(model: onnx.ModelProto):
    """hls4ml's documented QONNX preparation (docs: frontend/qonnx)."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean
    from qonnx.transformation.gemm_to_matmul import GemmToMatMul
    from qonnx.util.cleanup import cleanup_model

    wrapper = cleanup_model(ModelWrapper(copy.deepcopy(model)))
    wrapper = wrapper.transform(ConvertToChannelsLastAndClean())
    wrapper = wrapper.transform(GemmToMatMul())
    return cleanup_model(wrapper)
