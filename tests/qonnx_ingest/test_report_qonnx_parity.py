"""The report's cost equals qonnx's own ``qonnx.util.inference_cost`` where the report takes
shortcuts: one InferDataTypes pass, the totals summed without importing qonnx's CLI module
(which pulls in clize), shapes not re-inferred when the converter left them all static."""

from __future__ import annotations

import subprocess
import sys

import onnx
import pytest
from quant_models import conv_model, dense_model

import tflite2qonnx
from qonnx_ingest.report import _batch_one, cost_totals, inference_cost
from support import CORPUS, ROOT, requires_corpus

# qonnx's own pipeline deep-copies and re-folds per step: a minute on person_detect here, so
# the end-to-end comparison runs on the corpus's small models
SMALL = (
    "tflm__hello_world_int8.tflite",
    "t2o__conv.uint8.tflite",
    "t2o__depthwise-conv.uint8.tflite",
)
CORAL = "coral__tf2_mobilenet_v2_1.0_224_ptq.tflite"


@pytest.fixture(scope="module")
def mobilenet_v2() -> onnx.ModelProto:
    return tflite2qonnx.convert(CORPUS / "tflite" / CORAL)


def qonnx_totals(model: onnx.ModelProto) -> tuple[float, float, float, float]:
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.util.inference_cost import inference_cost as qonnx_inference_cost

    total = qonnx_inference_cost(ModelWrapper(_batch_one(model)), discount_sparsity=True)
    total = total["total_cost"]
    return (
        total["total_macs"],
        total["total_bops"],
        total["total_mem_w_elems"],
        total["total_mem_w_bits"],
    )


def ours(model: onnx.ModelProto) -> tuple[float, float, float, float]:
    cost = inference_cost(model)
    return cost.macs, cost.bops, cost.weights, cost.weight_bits


@requires_corpus
@pytest.mark.parametrize("name", SMALL)
def test_corpus_cost_equals_qonnx_inference_cost(name):
    model = tflite2qonnx.convert(CORPUS / "tflite" / name)
    expected = qonnx_totals(model)
    assert expected[0] > 0  # the comparison counts something
    assert ours(model) == expected


@pytest.mark.parametrize("build", [dense_model, conv_model], ids=["dense", "conv"])
def test_hand_built_cost_equals_qonnx_inference_cost(build):
    assert ours(build()) == qonnx_totals(build())


@requires_corpus
def test_cost_totals_sum_as_qonnx_does_on_mobilenet_v2(mobilenet_v2):
    """The model's cost dict and every node's, summed by qonnx's functions and by ours."""
    from qonnx.analysis.inference_cost import inference_cost as qonnx_analysis
    from qonnx.transformation.infer_datatypes import InferDataTypes
    from qonnx.util.inference_cost import assign_mem_bits_and_elems, compute_bops_and_macs

    from qonnx_ingest.indexed import IndexedModelWrapper
    from qonnx_ingest.report import _name_nodes_uniquely

    model = mobilenet_v2
    wrapper = IndexedModelWrapper(_batch_one(model))
    _name_nodes_uniquely(wrapper.model.graph)
    InferDataTypes(allow_scaledint_dtypes=True).apply(wrapper)
    result = qonnx_analysis(wrapper, discount_sparsity=True, cost_breakdown=True)
    dicts = [result["total_cost"], *result["node_cost"].values()]
    assert len(dicts) > 50  # the total and each Conv and Gemm
    for costs in dicts:
        bops, macs = compute_bops_and_macs(dict(costs))
        totals = assign_mem_bits_and_elems(dict(costs))
        expected = (macs, bops, totals["total_mem_w_elems"], totals["total_mem_w_bits"])
        assert cost_totals(costs) == expected
    assert cost_totals(result["total_cost"])[0] > 3e8  # MobileNet v2 at 224: ~300M MACs


@requires_corpus
def test_one_infer_datatypes_pass_reaches_qonnx_fixpoint_on_mobilenet_v2(mobilenet_v2):
    from qonnx.transformation.infer_datatypes import InferDataTypes

    from qonnx_ingest.indexed import IndexedModelWrapper

    model = mobilenet_v2
    once = IndexedModelWrapper(_batch_one(model))
    InferDataTypes(allow_scaledint_dtypes=True).apply(once)
    fixpoint = IndexedModelWrapper(_batch_one(model)).transform(
        InferDataTypes(allow_scaledint_dtypes=True), make_deepcopy=False, cleanup=False
    )
    names = [o for node in model.graph.node for o in node.output]
    kinds = {fixpoint.get_tensor_datatype(n).name for n in names}
    assert {"INT8", "UINT8"} <= kinds or len(kinds) > 2, kinds  # real types, not all FLOAT32
    for name in names:
        assert once.get_tensor_datatype(name) == fixpoint.get_tensor_datatype(name), name


def test_report_cost_does_not_import_clize():
    code = (
        "import sys\n"
        "sys.path[:0] = ['tests/qonnx_ingest', 'tests']\n"
        "from quant_models import dense_model\n"
        "from qonnx_ingest.report import report\n"
        "assert report(dense_model()).cost.macs == 12\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'clize'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout
