"""Small QONNX models built by hand for the report, encodings, QCDQ and --verify tests.

Every model is a handful of nodes whose numbers can be worked out on paper: the tests derive
their expectations from the builders' arguments, never from the code under test.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from qonnx_ingest.finish import finish_model
from qonnx_ingest.quant import make_bipolar_quant, make_quant

# Dense 4 -> 3: every weight a non-zero multiple of the 4-bit step 0.5, in [-4, 3.5].
DENSE_W = np.array(
    [[1.0, -0.5, 2.0], [1.5, 3.0, -1.0], [-2.0, 0.5, 1.0], [0.5, -1.5, 2.5]], np.float32
)


def finished(graph: onnx.GraphProto) -> onnx.ModelProto:
    return finish_model(helper.make_model(graph), rename_tensors=False)[0]


def dense_model(w: np.ndarray = DENSE_W) -> onnx.ModelProto:
    """x[1,4] -> Quant(int8, scale 1, zp 0) -> MatMul(Quant(w, int4, scale 0.5)) -> y[1,3]."""
    graph = helper.make_graph(
        [],
        "dense",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
    )
    make_quant("x", "x_q", 1.0, 0, 8, signed=True, name="in_quant").add_to(graph)
    graph.initializer.append(numpy_helper.from_array(np.asarray(w, np.float32), "w"))
    make_quant("w", "w_q", 0.5, 0, 4, signed=True, name="w_quant").add_to(graph)
    graph.node.append(helper.make_node("MatMul", ["x_q", "w_q"], ["y"], name="dense"))
    return finished(graph)


def conv_weights() -> np.ndarray:
    """2 output channels x 3 input channels x 3 x 3, non-zero, on each channel's 4-bit grid."""
    index = np.arange(54, dtype=np.float32).reshape(2, 3, 3, 3)
    steps = np.where(index % 2 == 1, -1, 1) * (index % 7 + 1)  # +-1..7, never 0
    return (steps * np.array([0.5, 0.25]).reshape(2, 1, 1, 1)).astype(np.float32)


def conv_model() -> onnx.ModelProto:
    """x[1,3,5,5] -> Quant(int8, scale 1) -> Conv 3x3 (per-channel narrow int4 weights)."""
    graph = helper.make_graph(
        [],
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3, 3])],
    )
    make_quant("x", "x_q", 1.0, 0, 8, signed=True, name="in_quant").add_to(graph)
    graph.initializer.append(numpy_helper.from_array(conv_weights(), "w"))
    make_quant(
        "w", "w_q", [0.5, 0.25], 0, 4, signed=True, narrow=True, axis=0, x_shape=[2, 3, 3, 3],
        name="w_quant",
    ).add_to(graph)  # fmt: skip
    graph.node.append(
        helper.make_node("Conv", ["x_q", "w_q"], ["y"], name="conv", kernel_shape=[3, 3])
    )
    return finished(graph)


def activation_model(
    width: int = 8, *, bipolar: bool = False, relu: bool = True, **quant
) -> onnx.ModelProto:
    """x[1,width] -> [Relu] -> one activation quantizer "act_quant" -> y."""
    graph = helper.make_graph(
        [],
        "act",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])],
    )
    src = "x"
    if relu:
        graph.node.append(helper.make_node("Relu", ["x"], ["r"], name="relu"))
        src = "r"
    if bipolar:
        make_bipolar_quant(src, "y", quant.get("scale", 1.0), name="act_quant").add_to(graph)
    else:
        scale = quant.pop("scale", 0.25)
        zero_point = quant.pop("zero_point", 0)
        bits = quant.pop("bits", 8)
        make_quant(src, "y", scale, zero_point, bits, name="act_quant", **quant).add_to(graph)
    return finished(graph)


def ort_session(model: onnx.ModelProto) -> ort.InferenceSession:
    """onnxruntime with graph optimizations off, so QDQ pairs are not fused into integer
    kernels with their own requantization."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = ort_session(model)
    names = [o.name for o in model.graph.output]
    return dict(zip(names, session.run(names, feeds), strict=True))


def zero_state_model(batch: int | None) -> onnx.ModelProto:
    """A recurrent cell's first step as qkeras2qonnx unrolls it: the zero state
    ConstantOfShape(Concat(Shape(x)[:1], [5])), then h = Tanh(zeros) wr, y = h w2 (the state
    reaches y through no broadcast that would restore its batch)."""
    wr = numpy_helper.from_array(np.full((5, 5), 0.25, np.float32), "wr")
    w2 = numpy_helper.from_array(np.full((5, 2), 0.5, np.float32), "w2")
    starts, ends = (numpy_helper.from_array(np.int64([v]), n) for n, v in (("s", 0), ("e", 1)))
    units = numpy_helper.from_array(np.int64([5]), "units")
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        helper.make_node("Slice", ["shape", "s", "e"], ["b"], name="batch"),
        helper.make_node("Concat", ["b", "units"], ["dims"], name="dims", axis=0),
        helper.make_node("ConstantOfShape", ["dims"], ["zeros"], name="zeros"),
        helper.make_node("Relu", ["x"], ["rx"], name="rx"),
        helper.make_node("Add", ["zeros", "rx"], ["state"], name="state"),
        helper.make_node("MatMul", ["state", "wr"], ["h"], name="h"),
        helper.make_node("MatMul", ["h", "w2"], ["y"], name="y"),
    ]
    graph = helper.make_graph(
        nodes,
        "cell",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch or "batch", 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch or "batch", 2])],
        [wr, w2, starts, ends, units],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
