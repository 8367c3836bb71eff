"""Composite quantizers: QKeras's exact float computation in standard ONNX ops, then a Quant.

Some QKeras quantizers round a function of x rather than x (quantized_sigmoid, quantized_tanh,
quantized_hswish), compare x with a threshold (ternary, binary_tanh), or put the negative side
on a grid of its own (quantized_relu with negative_slope). No single Quant node computes that,
so the quantizer becomes the same arithmetic in standard ONNX ops, op for op in QKeras's order
(IEEE float32 ops give the same bits in TensorFlow and ONNX Runtime), followed by a Quant /
BipolarQuant that is the identity on the result's grid, so consumers still read the bit width.

A float tanh or sigmoid (``use_real_*``) is the one exception: see ``exact_activations``.

Kept free of TensorFlow: ``run`` executes the emitted ops with onnxruntime, which is how
``quantizer_proof`` checks them against QKeras.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# The opset the emitted ops are written for (Clip/Unsqueeze/ReduceSum with tensor inputs).
OPSET = 13


class Builder:
    """Appends standard ONNX nodes (named under ``prefix``) and their constants."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def op(self, op_type: str, *inputs: str | float | np.ndarray, **attrs) -> str:
        """Add ``op_type`` on ``inputs`` (tensor names, or constants made float32 initializers
        unless already an integer array); return its output's name."""
        index = len(self.nodes)
        names = []
        for k, value in enumerate(inputs):
            if isinstance(value, str):
                names.append(value)
                continue
            array = np.asarray(value)
            if array.dtype.kind == "f":
                array = array.astype(np.float32)
            name = f"{self.prefix}/{op_type}_{index}_c{k}"
            self.initializers.append(numpy_helper.from_array(array, name))
            names.append(name)
        output = f"{self.prefix}/{op_type}_{index}"
        self.nodes.append(helper.make_node(op_type, names, [output], name=output, **attrs))
        return output


Emit = Callable[[Builder, str], str]


@dataclass(frozen=True)
class Composite:
    """The computation before the identity Quant.

    ``form`` says in words what it computes (metadata and report). ``emit`` adds the ops from
    the input tensor's name and returns the result's name. ``critical`` are the float32 inputs
    where QKeras's output changes or ties, around which the proof probes densely.
    """

    form: str
    emit: Emit
    critical: np.ndarray
    # True: ``critical`` are ties of a float approximation whose last bits TensorFlow computes
    # differently by tensor position; the proof leaves out a window of ulps around each.
    tie_window: bool = False


def run(composite: Composite, x: np.ndarray) -> np.ndarray:
    """The emitted ops executed by onnxruntime on the float32 vector ``x``."""
    import onnxruntime as ort

    builder = Builder("composite")
    out = composite.emit(builder, "x")
    graph = helper.make_graph(
        builder.nodes,
        "composite",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [None])],
        builder.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    options = ort.SessionOptions()
    # The proof is about the ops as written: no fusion or constant folding in between.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, {"x": np.asarray(x, dtype=np.float32)})[0]
