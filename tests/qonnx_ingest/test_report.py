"""--report: every quantized tensor with its MLIR quant-dialect type (seed 004), and the
inference cost from qonnx's analysis plus the QONNX paper's Eq. 5 BOPs (seed 000).

The cost figures are worked out by hand in each test from the model's shapes and bit widths
(the comments show the arithmetic); the MLIR strings are written from the seed's grammar.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from quant_models import DENSE_W, activation_model, conv_model, dense_model, finished

from qonnx_ingest.cli.command import make_parser, run
from qonnx_ingest.quant import QONNX_DOMAIN, make_bipolar_quant, make_quant
from qonnx_ingest.quant_info import ACTIVATION, BIAS, INPUT, WEIGHT, quantized_tensors
from qonnx_ingest.report import inference_cost, mlir_type, report
from support import CORPUS, requires_corpus

# MLIR's float-literal: [-+]?[0-9]+[.][0-9]*([eE][-+]?[0-9]+)?  (the point is mandatory)
FLOAT = r"[-+]?[0-9]+\.[0-9]*(?:[eE][-+]?[0-9]+)?"
# seed 004: storedType(<min:max>)? : expressedType (: axis)? , scale(:zp)? | {scale(:zp)?, ...}
PER_LAYER = re.compile(
    rf"!quant\.uniform<([iu])(\d+)(?:<(-?\d+):(-?\d+)>)?:f32, ({FLOAT})(?::(-?\d+))?>"
)


def only(model: onnx.ModelProto, role: str):
    (q,) = [q for q in quantized_tensors(model) if q.role == role]
    return q


# ----------------------------------------------------------------------------- cost by hand


def test_dense_cost_by_hand():
    cost = inference_cost(dense_model())
    # MatMul [1,4] x [4,3]: 3 outputs, each a 4-term dot product -> 3 * 4 = 12 MACs
    assert cost.macs == 12
    assert cost.weights == 12
    assert cost.weight_bits == 12 * 4  # 4-bit weights
    # qonnx: each MAC costs b_a * b_w bit operations, INT8 input x INT4 weights
    assert cost.bops == 12 * 8 * 4  # = 384
    # Eq. 5 with k = 1 (fully connected), n = 4 inputs, m = 3 outputs:
    # m n k^2 (b_a b_w + b_a + b_w + log2(n k^2)) = 3 * 4 * (32 + 8 + 4 + log2 4) = 12 * 46
    assert cost.bops_eq5 == pytest.approx(552)
    assert cost.unsupported == []


def test_conv_cost_by_hand():
    cost = inference_cost(conv_model())
    # 5x5 input, 3x3 kernel, stride 1, no padding -> 3x3 = 9 output positions;
    # per position m n k^2 = 2 * 3 * 9 = 54 MACs -> 9 * 54 = 486
    assert cost.macs == 9 * 54
    assert cost.weights == 2 * 3 * 3 * 3  # = 54
    assert cost.weight_bits == 54 * 4
    assert cost.bops == 486 * 8 * 4  # = 15552
    # Eq. 5 is per output position (m n k^2 (b_a b_w + b_a + b_w + log2(n k^2)), n k^2 = 27);
    # summed over the 9 positions:
    assert cost.bops_eq5 == pytest.approx(9 * 54 * (8 * 4 + 8 + 4 + math.log2(27)))


def test_zero_weights_are_discounted():
    w = DENSE_W.copy()
    w[0, 0] = w[2, 1] = w[3, 2] = 0.0  # 3 of the 12 weights are zero: density 9/12
    cost = inference_cost(dense_model(w))
    assert cost.macs == 12 * 9 / 12  # = 9
    assert cost.weights == 9
    assert cost.weight_bits == 9 * 4
    assert cost.bops == 9 * 8 * 4  # = 288
    # Eq. 5 on the non-zero MACs, with the mean non-zero fan-in of an output n = 9 / 3 = 3:
    assert cost.bops_eq5 == pytest.approx(9 * (8 * 4 + 8 + 4 + math.log2(3)))


def two_layer_model(names: bool) -> onnx.ModelProto:
    """x -> int8 -> MatMul(int4 W1, 4x3) -> Relu -> uint4 -> MatMul(int2 W2, 3x2) -> y.

    ``names=False`` leaves both MatMuls unnamed and skips finish_model, as a model from
    elsewhere might come."""
    graph = helper.make_graph(
        [],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
    )
    make_quant("x", "x_q", 1.0, 0, 8, name="in_quant").add_to(graph)
    graph.initializer.append(numpy_helper.from_array(DENSE_W, "w1"))
    make_quant("w1", "w1_q", 0.5, 0, 4, name="w1_quant").add_to(graph)
    w2 = np.array([[0.5, -1.0], [-0.5, 0.5], [-1.0, -1.0]], np.float32)  # 2-bit grid, no zero
    graph.initializer.append(numpy_helper.from_array(w2, "w2"))
    make_quant("w2", "w2_q", 0.5, 0, 2, name="w2_quant").add_to(graph)
    graph.node.append(
        helper.make_node("MatMul", ["x_q", "w1_q"], ["h"], name="fc1" if names else "")
    )
    graph.node.append(helper.make_node("Relu", ["h"], ["r"], name="relu" if names else ""))
    make_quant("r", "r_q", 0.0625, 0, 4, signed=False, name="act_quant").add_to(graph)
    graph.node.append(
        helper.make_node("MatMul", ["r_q", "w2_q"], ["y"], name="fc2" if names else "")
    )
    if names:
        return finished(graph)
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid(QONNX_DOMAIN, 1)]
    return helper.make_model(graph, opset_imports=opsets)


@pytest.mark.parametrize("names", [True, False], ids=["named", "unnamed_nodes"])
def test_activation_width_reaches_the_next_layer(names):
    cost = inference_cost(two_layer_model(names))
    # fc1: 4 -> 3 = 12 MACs (int8 x int4); fc2: 3 -> 2 = 6 MACs (uint4 x int2)
    assert cost.macs == 12 + 6
    assert cost.weights == 12 + 6
    assert cost.weight_bits == 12 * 4 + 6 * 2
    assert cost.bops == 12 * 8 * 4 + 6 * 4 * 2  # = 384 + 48
    # Eq. 5, k = 1: fc1 12 * (32 + 8 + 4 + log2 4); fc2 6 * (8 + 4 + 2 + log2 3)
    assert cost.bops_eq5 == pytest.approx(12 * 46 + 6 * (4 * 2 + 4 + 2 + math.log2(3)))


def test_bipolar_activation_costs_one_bit_and_is_not_listed_as_uncosted():
    graph = helper.make_graph(
        [],
        "bnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
    )
    make_bipolar_quant("x", "x_q", 1.0, name="in_quant").add_to(graph)
    graph.initializer.append(numpy_helper.from_array(DENSE_W, "w"))
    make_quant("w", "w_q", 0.5, 0, 4, name="w_quant").add_to(graph)
    graph.node.append(helper.make_node("MatMul", ["x_q", "w_q"], ["y"], name="dense"))
    cost = inference_cost(finished(graph))
    assert cost.bops == 12 * 1 * 4  # BIPOLAR x INT4
    assert cost.unsupported == []  # a quantizer has no MACs: nothing went uncosted


def test_a_zero_point_is_typed_float32_by_qonnx_and_the_report_says_so():
    graph = helper.make_graph(
        [],
        "dense_zp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
    )
    make_quant("x", "x_q", 1.0, 3, 8, signed=False, name="in_quant").add_to(graph)
    graph.initializer.append(numpy_helper.from_array(DENSE_W, "w"))
    make_quant("w", "w_q", 0.5, 0, 4, name="w_quant").add_to(graph)
    graph.node.append(helper.make_node("MatMul", ["x_q", "w_q"], ["y"], name="dense"))
    result = report(finished(graph))
    # qonnx's datatype inference: "Only zero_point=0 IntQuant nodes supported" -> FLOAT32
    assert result.cost.bops == 12 * 32 * 4
    assert "note: qonnx types the 1 quantized tensors with a zero point as FLOAT32" in (
        result.as_text()
    )
    assert "note:" not in report(dense_model()).as_text()


# ----------------------------------------------------------------------------- MLIR types


def weight_quant_model(values, scale, zero_point=0, bits=8, **kw) -> onnx.ModelProto:
    """A constant [C, 4] quantized per axis 0 (or per tensor) feeding an Identity."""
    w = np.asarray(values, np.float32)
    graph = helper.make_graph(
        [],
        "w",
        [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(w.shape))],
    )
    graph.initializer.append(numpy_helper.from_array(w, "w"))
    make_quant(
        "w", "w_q", scale, zero_point, bits, x_shape=list(w.shape), name="w_quant", **kw
    ).add_to(graph)
    graph.node.append(helper.make_node("Identity", ["w_q"], ["y"], name="out"))
    return finished(graph)


def test_mlir_signed_per_tensor_with_zero_point():
    q = only(activation_model(scale=0.0235, zero_point=-3, bits=8), ACTIVATION)
    assert mlir_type(q) == "!quant.uniform<i8:f32, 0.0235:-3>"


def test_mlir_unsigned_4_bit():
    q = only(activation_model(scale=0.0625, bits=4, signed=False), ACTIVATION)
    assert mlir_type(q) == "!quant.uniform<u4:f32, 0.0625>"


def test_mlir_narrow_per_channel():
    model = weight_quant_model(np.ones((3, 4)), [0.01, 0.02, 0.03], narrow=True, axis=0)
    q = only(model, WEIGHT)
    # narrow int8: storage bounds [-127, 127] (seed 004's storedType<min:max>)
    assert mlir_type(q) == "!quant.uniform<i8<-127:127>:f32:0, {0.01,0.02,0.03}>"
    assert mlir_type(q, max_channels=2) == "!quant.uniform<i8<-127:127>:f32:0, {0.01,0.02,...}>"


def test_mlir_per_axis_zero_points_as_in_the_seed():
    # seed 004: tensor<?x?x!quant.uniform<u16:f32:0, {2.0:10, 3.0:20}>>
    model = weight_quant_model(np.ones((2, 4)), [2.0, 3.0], [10, 20], 16, signed=False, axis=0)
    assert mlir_type(only(model, WEIGHT)) == "!quant.uniform<u16:f32:0, {2.0:10,3.0:20}>"


def test_mlir_unsigned_narrow_bounds():
    q = only(activation_model(scale=0.5, bits=4, signed=False, narrow=True), ACTIVATION)
    assert mlir_type(q) == "!quant.uniform<u4<0:14>:f32, 0.5>"  # 2^4 - 2 = 14


def test_mlir_scale_is_a_valid_float_literal():
    # numpy prints float32(1e-5) as "1e-05", which MLIR would lex as the integer 1
    q = only(activation_model(scale=1e-5, bits=8), ACTIVATION)
    text = mlir_type(q)
    assert text == "!quant.uniform<i8:f32, 1.0e-05>"
    assert np.float32(PER_LAYER.fullmatch(text).group(5)) == np.float32(1e-5)


def test_bipolar_has_no_mlir_type():
    model = activation_model(bipolar=True, scale=0.5)
    q = only(model, ACTIVATION)
    assert q.bipolar and mlir_type(q) is None
    (row,) = report(model, cost=False).as_dict()["quantized_tensors"]
    assert row["mlir"] is None and row["bipolar"] is True
    assert report(model, cost=False).as_text().splitlines()[2].endswith("-")


# ----------------------------------------------------------------------------- rows


def test_roles_input_weight_bias_activation():
    graph = helper.make_graph(
        [],
        "roles",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
    )
    make_quant("x", "x_q", 1.0, 0, 8, name="in_quant").add_to(graph)
    graph.initializer.append(numpy_helper.from_array(DENSE_W, "w"))
    make_quant("w", "w_q", 0.5, 0, 4, name="w_quant").add_to(graph)
    graph.initializer.append(numpy_helper.from_array(np.array([1, -2, 3], np.float32), "b"))
    make_quant("b", "b_q", 0.5, 0, 32, name="b_quant").add_to(graph)
    graph.node.append(helper.make_node("MatMul", ["x_q", "w_q"], ["mm"], name="dense"))
    graph.node.append(helper.make_node("Add", ["mm", "b_q"], ["z"], name="bias"))
    graph.node.append(helper.make_node("Relu", ["z"], ["r"], name="relu"))
    make_quant("r", "y", 0.25, 0, 4, signed=False, name="act_quant").add_to(graph)
    model = finished(graph)
    roles = {q.tensor: q.role for q in quantized_tensors(model)}
    assert roles == {"x": INPUT, "w": WEIGHT, "b": BIAS, "r": ACTIVATION}


def test_conv_bias_slot_and_per_channel_row():
    model = conv_model()
    q = only(model, WEIGHT)
    assert (q.axis, q.narrow, q.bit_width) == (0, True, 4)
    np.testing.assert_array_equal(q.scale, [0.5, 0.25])
    (row,) = [
        r for r in report(model, cost=False).as_dict()["quantized_tensors"] if r["tensor"] == "w"
    ]
    assert row["axis"] == 0 and row["scale"] == [0.5, 0.25] and row["zero_point"] == [0, 0]
    assert "per-channel axis 0 (x2)" in report(model, cost=False).as_text()


# ----------------------------------------------------------------------------- the CLI side

COST_FIELDS = {"macs", "weights", "weight_bits", "bops", "bops_eq5", "unsupported"}
ROW_FIELDS = {
    "tensor", "node", "op_type", "role", "bit_width", "signed", "narrow", "bipolar",
    "rounding_mode", "axis", "scale", "zero_point", "mlir", "composite",
}  # fmt: skip


def run_tool(tmp_path, *options):
    source = tmp_path / "model.bin"
    source.write_bytes(b"stand-in source")
    parser = make_parser("tool", "test tool", "the model")
    return run(parser, lambda args: dense_model(), [str(source), *map(str, options)])


def check_json_report(document: dict):
    assert set(document) == {"quantized_tensors", "cost"}
    assert set(document["cost"]) == COST_FIELDS
    assert document["cost"]["macs"] == 12 and document["cost"]["bops"] == 384
    rows = {r["tensor"]: r for r in document["quantized_tensors"]}
    assert set(rows) == {"x", "w"}
    for row in rows.values():
        assert set(row) == ROW_FIELDS
    assert rows["x"]["mlir"] == "!quant.uniform<i8:f32, 1.0>"
    assert rows["w"] | {"mlir": None} == {
        "tensor": "w", "node": "w_quant", "op_type": "Quant", "role": "weight",
        "bit_width": 4.0, "signed": True, "narrow": False, "bipolar": False,
        "rounding_mode": "ROUND", "axis": None, "scale": [0.5], "zero_point": [0.0],
        "mlir": None, "composite": None,
    }  # fmt: skip


def test_report_json_to_stdout_is_the_only_thing_on_stdout(tmp_path, capsys):
    assert run_tool(tmp_path, "--report-json", "-", "--report") == 0
    out, err = capsys.readouterr()
    check_json_report(json.loads(out))  # parses whole: the summary and table went to stderr
    assert "tool: wrote" in err and "MACs" in err


def test_report_json_file_and_text_table(tmp_path, capsys):
    path = tmp_path / "report.json"
    assert run_tool(tmp_path, "--report-json", path, "--report") == 0
    check_json_report(json.loads(path.read_text()))
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = lines.index(next(line for line in lines if line.startswith("tensor")))
    assert lines[header].split() == [
        "tensor", "role", "bits", "signed", "narrow", "scale", "zero", "point", "type"
    ]  # fmt: skip
    assert lines[header + 2].split() == [
        "x", "input", "8", "yes", "no", "per-tensor", "1.0", "0", "!quant.uniform<i8:f32,", "1.0>"
    ]  # fmt: skip
    assert re.search(r"MACs\s+12\n", out) and re.search(r"BOPs \(b_a\*b_w\)\s+384\n", out)
    assert re.search(r"BOPs \(Eq. 5\)\s+552\n", out) and re.search(r"weight bits\s+48\n", out)


def test_encodings_and_report_json_cannot_share_stdout(tmp_path, capsys):
    assert run_tool(tmp_path, "--report-json", "-", "--encodings", "-") == 2
    assert "cannot both write to stdout" in capsys.readouterr().err


@requires_corpus
def test_corpus_mlir_types_state_the_quant_nodes_parameters():
    from tflite2qonnx.api import convert

    model = convert(CORPUS / "tflite" / "tflm__hello_world_int8.tflite")
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    nodes = {n.name: n for n in model.graph.node}
    rows = report(model, cost=False).as_dict()["quantized_tensors"]
    assert len(rows) == sum(n.op_type == "Quant" for n in model.graph.node) == 10
    for row in rows:
        node = nodes[row["node"]]
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        m = PER_LAYER.fullmatch(row["mlir"])
        assert m, row["mlir"]
        sign, bits, lo, hi, scale, zero_point = m.groups()
        assert sign == ("i" if attrs["signed"] else "u")
        assert int(bits) == inits[node.input[3]]
        assert (lo is not None) == bool(attrs["narrow"])
        assert np.float32(scale) == inits[node.input[1]]  # the float32 scale, read back exact
        assert int(zero_point or 0) == inits[node.input[2]]
