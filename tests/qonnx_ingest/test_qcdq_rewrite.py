"""Our linear form of qonnx's QuantToQCDQ rule writes the nodes qonnx's own pass writes (same
ops, attributes and constants, in the same order) and so computes the same numbers in
onnxruntime; what the rule does not match is left to qonnx's pass."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from quant_models import activation_model, finished, ort_session

from qonnx_ingest import qcdq
from qonnx_ingest.errors import ConversionWarning
from qonnx_ingest.finish import remove_unused_tensors, sort_nodes
from qonnx_ingest.passes import run_passes
from qonnx_ingest.qcdq_rewrite import left_quants, lower_quants
from qonnx_ingest.quant import make_quant
from support import CORPUS, requires_corpus


def by_qonnx(model: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return qcdq._qonnx_quant_to_qcdq(copy)


def by_us(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    run_passes([lower_quants, sort_nodes, remove_unused_tensors], copy)
    return copy, left_quants(copy)


def signature(model: onnx.ModelProto) -> list:
    """The non-Constant nodes in order, each with its attributes and, per input, the value of
    the Constant producing it (dtype and numbers) or the name of the tensor it reads."""
    constants = {}
    for node in model.graph.node:
        if node.op_type == "Constant":
            value = numpy_helper.to_array(node.attribute[0].t)
            constants[node.output[0]] = (value.dtype.str, value.shape, value.tolist())
    produced = {o for n in model.graph.node if n.op_type != "Constant" for o in n.output}
    rows = []
    for node in model.graph.node:
        if node.op_type == "Constant":
            continue
        attrs = sorted(
            (a.name, helper.get_attribute_value(a)) for a in node.attribute if a.name != "axis"
        ) + [("axis", a.i) for a in node.attribute if a.name == "axis"]
        inputs = [
            constants.get(name) or ("tensor" if name in produced else name) for name in node.input
        ]
        outputs = [o if o not in produced or node.op_type == "DequantizeLinear" else "t"
                   for o in node.output]  # fmt: skip
        rows.append((node.op_type, attrs, inputs, outputs))
    return rows


def assert_same_as_qonnx(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    ours, left = by_us(model)
    theirs = by_qonnx(model)
    assert left == 0
    assert "Quant" not in {n.op_type for n in ours.graph.node}
    assert signature(ours) == signature(theirs)
    got = ort_session(ours).run(None, feeds)
    want = ort_session(theirs).run(None, feeds)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "quant",
    [{"bits": 8}, {"bits": 8, "narrow": True}, {"bits": 4, "signed": False},
     {"bits": 3, "signed": False, "narrow": True}, {"bits": 2}],
    ids=["int8", "int8_narrow", "uint4", "uint3_narrow", "int2"],
)  # fmt: skip
def test_activation_quantizers_lower_as_qonnx_lowers_them(quant):
    x = np.random.default_rng(1).uniform(-3, 3, (1, 8)).astype(np.float32)
    assert_same_as_qonnx(activation_model(relu=False, **quant), {"x": x})


def test_per_channel_scale_takes_qonnx_axis():
    graph = helper.make_graph(
        [], "per_channel",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4])],
    )  # fmt: skip
    make_quant("x", "y", [0.1, 0.2, 0.4], 0, 6, axis=1, x_shape=[1, 3, 4], name="q").add_to(graph)
    x = np.random.default_rng(2).uniform(-5, 5, (1, 3, 4)).astype(np.float32)
    assert_same_as_qonnx(finished(graph), {"x": x})


def test_quant_outside_the_rule_is_left_for_qonnx():
    model = activation_model(relu=False, bits=8)
    node = next(n for n in model.graph.node if n.op_type == "Quant")
    for attr in node.attribute:
        if attr.name == "rounding_mode":
            attr.s = b"FLOOR"
    _, left = by_us(model)
    assert left == 1


@requires_corpus
@pytest.mark.parametrize(
    "name", ["t2o__mobilenet_v1_0.25_128_quant.tflite", "t2o__depthwise-conv.uint8.tflite"]
)
def test_corpus_models_lower_as_qonnx_lowers_them(name):
    from tflite2qonnx import convert

    path = CORPUS / "tflite" / name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConversionWarning)
        prepared = qcdq.prepare(convert(path))
    assert sum(n.op_type == "Quant" for n in prepared.graph.node) >= 1
    (vi,) = prepared.graph.input
    shape = [d.dim_value or 1 for d in vi.type.tensor_type.shape.dim]
    x = np.random.default_rng(0).uniform(-1.2, 1.2, shape).astype(np.float32)
    assert_same_as_qonnx(prepared, {vi.name: x})


def test_to_qcdq_does_not_import_onnxscript_when_every_quant_matches():
    import subprocess
    import sys

    code = (
        "import sys, warnings; warnings.simplefilter('ignore');"
        "sys.path.insert(0, 'tests/qonnx_ingest');"
        "from quant_models import activation_model;"
        "from qonnx_ingest.qcdq import to_qcdq;"
        "to_qcdq(activation_model(bits=4));"
        "print('onnxscript' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
