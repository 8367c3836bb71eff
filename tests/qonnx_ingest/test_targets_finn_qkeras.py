"""``--format finn`` on what QKeras models hold: BipolarQuant activations and biases, power-of-two
weights without a Quant, 1D convolutions, hard activations' Clip / Round; and the QKeras corpus
models these bring through FINN's steps (AD03, neutdet w1/a2: in test_targets_finn.py's
table) computing what QKeras does."""

from __future__ import annotations

import numpy as np
import onnx
from finn_support import run_finn
from onnx import TensorProto, helper, numpy_helper

from qonnx_ingest.execute import execute_qonnx
from qonnx_ingest.targets.finn import to_finn
from qonnx_ingest.targets.finn_weight_grid import power_of_two_grid

QONNX = "qonnx.custom_op.general"


def _model(nodes, inputs, outputs, constants) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in constants.items()],
    )
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid(QONNX, 1)]
    return helper.make_model(graph, opset_imports=opsets)


def _bipolar(x: str, scale: str, y: str) -> onnx.NodeProto:
    return helper.make_node("BipolarQuant", [x, scale], [y], domain=QONNX)


def test_a_bipolar_activation_on_the_input_becomes_out_scale_1_thresholds_exactly() -> None:
    """QKeras's binary: +s where x >= 0 (0 and -0.0 included), -s below."""
    model = to_finn(_model([_bipolar("x", "s", "y")], [("x", [1, 8])], [("y", [1, 8])], {"s": 0.5}))
    ops = [n.op_type for n in model.graph.node]
    assert ops == ["MultiThreshold", "Mul", "Add"]
    mt = model.graph.node[0]
    assert {a.name: helper.get_attribute_value(a) for a in mt.attribute}["out_bias"] == 0.0
    x = np.float32([[-0.0, 0.0, -1e-45, 1e-45, -3.0, 3.0, -np.inf, np.inf]])
    want = np.float32([[0.5, 0.5, -0.5, 0.5, -0.5, 0.5, -0.5, 0.5]])
    np.testing.assert_array_equal(execute_qonnx(model, {"x": x})["y"], want)


def test_a_bipolar_activation_behind_a_matrix_layer_is_left_to_finn() -> None:
    """FINN merges bipolar thresholds into the matrix layer in front (its XNOR path)."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("MatMul", ["r", "w"], ["m"]),
        _bipolar("m", "s", "y"),
    ]
    constants = {"w": np.eye(4), "s": 1.0}
    model = to_finn(_model(nodes, [("x", [1, 4])], [("y", [1, 4])], constants))
    ops = [n.op_type for n in model.graph.node]
    assert ops[-2:] == ["MatMul", "BipolarQuant"] and "MultiThreshold" not in ops


def test_a_bipolar_constant_bias_is_written_as_its_values() -> None:
    nodes = [_bipolar("b", "s", "bq"), helper.make_node("Add", ["x", "bq"], ["y"])]
    constants = {"b": [0.3, -0.2, 0.0, -5.0], "s": 0.25}
    model = to_finn(_model(nodes, [("x", [1, 4])], [("y", [1, 4])], constants))
    assert [n.op_type for n in model.graph.node] == ["Add"]
    got = execute_qonnx(model, {"x": np.zeros((1, 4), np.float32)})["y"]
    np.testing.assert_array_equal(got, np.float32([[0.25, -0.25, 0.25, -0.25]]))


def test_power_of_two_weights_have_the_grid_that_holds_them() -> None:
    po2 = np.float32([2.0**-8, -(2.0**-3), 2.0**-5, 0.0, -(2.0**-8)])
    assert power_of_two_grid(po2) == (2.0**-8, 6)  # -32 .. 1 on 2^-8: 6 signed bits
    assert power_of_two_grid(np.float32([4.0, -8.0])) == (4.0, 2)  # -2 .. 1 on 4: 2 bits
    assert power_of_two_grid(np.float32([0.1, 0.2])) is None  # float weights: > 16 bits
    assert power_of_two_grid(np.zeros(3, np.float32)) is None


def test_power_of_two_weights_are_read_through_an_exact_quant() -> None:
    w = np.float32([[2.0**-8, -(2.0**-3)], [2.0**-5, 0.0]])
    model = to_finn(
        _model(
            [helper.make_node("MatMul", ["x", "w"], ["y"])],
            [("x", [1, 2])],
            [("y", [1, 2])],
            {"w": w},
        )
    )
    assert [n.op_type for n in model.graph.node] == ["Quant", "MatMul"]
    x = np.float32([[3.0, -7.0]])
    np.testing.assert_array_equal(execute_qonnx(model, {"x": x})["y"], x @ w)


def _conv1d_model() -> onnx.ModelProto:
    """NWC input -> Transpose -> Conv1D (k 3, stride 2, pads 1/0) -> *0.5 -> MaxPool1D (2) ->
    GlobalMaxPool -> Squeeze -> Flatten (Reshape)."""
    rng = np.random.default_rng(5)
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
        helper.make_node(
            "Conv", ["t", "w", "b"], ["c"], kernel_shape=[3], strides=[2], pads=[1, 0]
        ),
        helper.make_node("Mul", ["c", "half"], ["h"]),
        helper.make_node("MaxPool", ["h"], ["p"], kernel_shape=[2], strides=[2], pads=[0, 0]),
        helper.make_node("GlobalMaxPool", ["p"], ["g"]),
        helper.make_node("Squeeze", ["g", "axes"], ["q"]),
        helper.make_node("Reshape", ["q", "flat"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 13, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        [
            numpy_helper.from_array(
                np.round(rng.normal(size=(3, 2, 3)) * 8).astype(np.float32) / 8, "w"
            ),
            numpy_helper.from_array(np.float32([0.5, -1.0, 0.25]), "b"),
            numpy_helper.from_array(np.float32(0.5), "half"),
            numpy_helper.from_array(np.int64([2]), "axes"),
            numpy_helper.from_array(np.int64([1, 3]), "flat"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_a_1d_convolution_is_written_as_2d_over_a_height_of_1_computing_the_same() -> None:
    source = _conv1d_model()
    model = to_finn(source)
    convs = [n for n in model.graph.node if n.op_type in ("Conv", "MaxPool")]
    assert len(convs) == 3  # the Conv, the MaxPool and the global pool as a (1, W) MaxPool
    for node in convs:
        kernel = next(a for a in node.attribute if a.name == "kernel_shape")
        assert len(kernel.ints) == 2 and kernel.ints[0] == 1
    assert "Squeeze" not in [n.op_type for n in model.graph.node]
    x = np.random.default_rng(6).normal(size=(1, 13, 2)).astype(np.float32)
    want = execute_qonnx(source, {"x": x})["y"]
    np.testing.assert_array_equal(execute_qonnx(model, {"x": x})["y"], want)


def test_a_hard_activations_clip_and_round_are_folded_into_the_thresholds() -> None:
    """Round(Clip(x * 0.5 + 0.5, 0, 1) * 4) then a 3-bit unsigned Quant: every tie of the
    Round (x * 0.5 + 0.5 = k/4 + 1/8) goes to even, as ONNX's Round does."""
    nodes = [
        helper.make_node("Mul", ["x", "a"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["s"]),
        helper.make_node("Clip", ["s", "lo", "hi"], ["c"]),
        helper.make_node("Mul", ["c", "four"], ["f"]),
        helper.make_node("Round", ["f"], ["r"]),
        helper.make_node(
            "Quant",
            ["r", "one", "zero", "bits"],
            ["y"],
            domain=QONNX,
            signed=0,
            narrow=0,
            rounding_mode="ROUND",
        ),
    ]
    constants = {
        "a": 0.5,
        "b": 0.5,
        "lo": 0.0,
        "hi": 1.0,
        "four": 4.0,
        "one": 1.0,
        "zero": 0.0,
        "bits": 3.0,
    }
    source = _model(nodes, [("x", [1, 64])], [("y", [1, 64])], constants)
    model = to_finn(source)
    assert [n.op_type for n in model.graph.node] == ["MultiThreshold", "Mul"]
    ties = (np.arange(-4, 4) / 4 + 1 / 8 - 0.5) / 0.5  # where x * 0.5 + 0.5 is k/4 + 1/8
    probe = np.concatenate(
        [ties, np.nextafter(ties, 9), np.nextafter(ties, -9), [-3, -1, 0, 1, 3, 0.3, -0.7, 9]]
    ).astype(np.float32)
    x = np.resize(probe, (1, 64)).astype(np.float32)
    want = np.clip(np.round(np.clip(x * 0.5 + 0.5, 0, 1) * 4), 0, 7)  # by hand
    np.testing.assert_array_equal(execute_qonnx(model, {"x": x})["y"], want)
    np.testing.assert_array_equal(execute_qonnx(source, {"x": x})["y"], want)


def _quant(x: str, prefix: str, y: str, signed: int) -> onnx.NodeProto:
    return helper.make_node(
        "Quant",
        [x, f"{prefix}s", f"{prefix}z", f"{prefix}b"],
        [y],
        domain=QONNX,
        signed=signed,
        narrow=0,
        rounding_mode="ROUND",
    )


def test_thresholds_behind_an_exact_layer_sit_half_a_grid_step_from_its_values() -> None:
    """2-bit levels * 1/4 -> MatMul by integers * 1/4 -> + bias on 1/8 -> a 1/2-step Quant:
    the layer's values are multiples of 1/16, and ties (k + 1/2) / 2 are among them. Each
    threshold then sits on an odd multiple of 1/32, and the form still computes the source
    on every input level."""
    weights = np.float32([[1, -2, 3], [2, 1, -1], [-3, 2, 1], [1, 1, 1]]) / 4
    nodes = [
        _quant("x", "a", "q", 0),
        _quant("w", "w", "wq", 1),
        helper.make_node("MatMul", ["q", "wq"], ["m"]),
        helper.make_node("Add", ["m", "bias"], ["s"]),
        _quant("s", "o", "y", 1),
    ]
    constants = {
        "as": 0.25, "az": 0.0, "ab": 2.0,
        "w": weights, "ws": 0.25, "wz": 0.0, "wb": 4.0,
        "bias": [0.125, -0.375, 0.0],
        "os": 0.5, "oz": 0.0, "ob": 4.0,
    }  # fmt: skip
    source = _model(nodes, [("x", [1, 4])], [("y", [1, 3])], constants)
    model = to_finn(source)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    last = [n for n in model.graph.node if n.op_type == "MultiThreshold"][-1]
    thresholds = inits[last.input[1]].astype(np.float64)
    assert thresholds.shape == (3, 15)  # per channel now
    levels = np.stack(np.meshgrid(*[np.arange(4)] * 4, indexing="ij"), -1).reshape(-1, 4)
    values = levels / 4 @ weights.astype(np.float64) + constants["bias"]  # exact, by hand
    low, high = values.min(axis=0)[:, None], values.max(axis=0)[:, None]
    inside = (thresholds > low) & (thresholds <= high)  # the thresholds some input decides
    steps = thresholds[inside] * 32
    assert inside.sum() == 8 and np.any(values * 4 % 2 == 1)  # ties are reachable
    assert np.all(steps == np.round(steps)) and np.all(np.round(steps) % 2 == 1)
    for row in levels.astype(np.float32) / 4:
        got = execute_qonnx(model, {"x": row[None]})["y"]
        np.testing.assert_array_equal(got, execute_qonnx(source, {"x": row[None]})["y"])


def test_a_float_input_is_typed_float32_beside_its_layout_annotation() -> None:
    """qonnx's Im2Col executor reads the input's finn_datatype (FINN's default type for it)."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2])]
    model = to_finn(_model(nodes, [("x", [1, 2, 2, 3])], [("t", [1, 3, 2, 2])], {}))
    (annotation,) = [a for a in model.graph.quantization_annotation if a.tensor_name == "x"]
    entries = {e.key: e.value for e in annotation.quant_parameter_tensor_names}
    assert entries["finn_datatype"] == "FLOAT32"
    assert entries["tensor_layout"] == str(["N", "H", "W", "C"])


def test_a_binary_activation_behind_the_float_input_layer_reaches_specialize_layers() -> None:
    """FINN leaves the layer on the float input to the host; FINN's own bipolar thresholds
    behind it stop (``out_scale must be 1``), the out_scale-1 form maps, computing the
    source graph (x = 0 and -0.0 included)."""
    rng = np.random.default_rng(1)
    nodes = [
        _bipolar("w1", "one", "w1q"),
        helper.make_node("MatMul", ["x", "w1q"], ["m"]),
        _bipolar("m", "one", "r"),
        _quant("w2", "w", "w2q", 1),
        helper.make_node("MatMul", ["r", "w2q"], ["y"]),
    ]
    constants = {
        "one": 1.0, "w1": rng.normal(size=(16, 8)),
        "w2": np.round(rng.normal(size=(8, 4)) * 2) / 2, "ws": 0.5, "wz": 0.0, "wb": 4.0,
    }  # fmt: skip
    source = _model(nodes, [("x", [1, 16])], [("y", [1, 4])], constants)
    x = rng.normal(size=(1, 16)).astype(np.float32)
    x[0, :2] = [0.0, -0.0]
    run = run_finn(to_finn(source), {"x": x})
    assert run.reached == "specialize_layers", run.stopped
    want = execute_qonnx(source, {"x": x})["y"]
    for step, (output,) in run.outputs.items():
        np.testing.assert_array_equal(output, want, err_msg=step)
