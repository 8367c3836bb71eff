"""The uint8 corpus convolutions through hls4ml 1.3.0, bit-equal to the TFLite interpreter.

``--format hls4ml`` (``convert(..., channels_last=True, format="hls4ml")``) writes every
HALF_UP requantization of t2o__conv.uint8 and t2o__depthwise-conv.uint8 in a proven-equal
form (no deviation): the input's uint8 grid, the accumulator's first rounding (no tie on its
lattice), RoundingDivideByPOT as FLOOR(x + 1/2) (its negative ties clip to the output's zero
point 0), the output Quant as Mul(Quant(n, 1), s). hls4ml (Vivado, io_parallel, g++) then
compiles each, and its ``predict`` equals the interpreter's uint8 outputs (builtin kernels, no
XNNPACK) on 256 seeded inputs. One compile per model (module fixture), ~15 s each.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from hls4ml_support import compile_vivado

import tflite2qonnx
from qonnx_ingest.targets.hls4ml import DEVIATED, EXACT, FORM_KEY
from support import CORPUS, requires_corpus

hls4ml = pytest.importorskip(
    "hls4ml", reason="hls4ml is not installed: pip install -c constraints.txt -e '.[hls4ml]'"
)

pytestmark = [
    pytest.mark.hls4ml,
    requires_corpus,
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::qonnx_ingest.errors.ConversionWarning"),
]

SAMPLES = 256
IO_KEY = "tflite2qonnx.io_quantization"
# hls4ml applies TFLite's scales (1/s_in, s_in, 1/fine, 2^-r, s_out) as ApplyAlpha layers of
# the default precision: 40 fractional bits
DEFAULT_PRECISION = "fixed<64,24>"
# hls4ml 1.3.0's FuseBatchNormalization reads a Conv's ``weight_quantizer``, which its
# DepthwiseConv2D calls ``depthwise_quantizer``: it fuses the 1/fine ApplyAlpha into the
# depthwise weights and fails (ValueError: operands could not be broadcast together with
# shapes (5,5,2) (3,3,1,2)). A result precision on the Conv stops the fusion; this one holds
# the product of the input (40 fractional bits) and the weights (33) exactly.
DEPTHWISE_RESULT = "fixed<128,48>"
# model: whether its outputs reach the clip at zero point 0 (where negative ties are moot and
# hls4ml once dropped the saturation, see hls4ml_rounding's own-scale rule)
MODELS = {"t2o__conv.uint8": False, "t2o__depthwise-conv.uint8": True}


def _prepare(model):
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean
    from qonnx.transformation.gemm_to_matmul import GemmToMatMul
    from qonnx.util.cleanup import cleanup_model

    wrapper = cleanup_model(ModelWrapper(copy.deepcopy(model)))
    wrapper = wrapper.transform(ConvertToChannelsLastAndClean()).transform(GemmToMatMul())
    return cleanup_model(wrapper)


@pytest.fixture(scope="module", params=sorted(MODELS))
def compiled(request, tmp_path_factory):
    name = request.param
    path = CORPUS / "tflite" / f"{name}.tflite"
    form = tflite2qonnx.convert(path, channels_last=True, format="hls4ml")
    prepared = _prepare(form)
    depthwise = {
        node.name: DEPTHWISE_RESULT
        for node in prepared.graph.node
        if node.op_type == "Conv" and any(a.name == "group" and a.i > 1 for a in node.attribute)
    }
    output_dir = tmp_path_factory.mktemp(name.replace(".", "_"))
    hls_model = compile_vivado(prepared, output_dir, DEFAULT_PRECISION, depthwise)
    return name, path, form, hls_model


def test_every_requantization_is_written_exactly(compiled):
    name, _, form, _ = compiled
    record = json.loads({p.key: p.value for p in form.metadata_props}[FORM_KEY])
    assert DEVIATED not in record, name
    rules = sorted(reason.split(":")[0] for reason in record[EXACT].values())
    assert rules[:2] == ["accumulator", "input grid"] and rules[3] == "own scale", rules
    assert rules[2].startswith("integer over 2^"), rules


def test_hls4ml_predicts_the_interpreters_outputs(compiled):
    from tflite2qonnx.reference_paths import BUILTIN_REF, open_path

    name, path, form, hls_model = compiled
    io = json.loads({p.key: p.value for p in form.metadata_props}["tflite2qonnx.io_quantization"])
    i_name, o_name = form.graph.input[0].name, form.graph.output[0].name
    interpreter = open_path(path, BUILTIN_REF)
    (inp,), (out,) = interpreter.get_input_details(), interpreter.get_output_details()
    q = np.random.default_rng(0).integers(0, 256, (SAMPLES, *inp["shape"]))
    expected = []
    for sample in q:
        interpreter.set_tensor(inp["index"], sample.astype(np.uint8))
        interpreter.invoke()
        expected.append(interpreter.get_tensor(out["index"]).astype(np.int64))
    expected = np.stack(expected)
    x = (io[i_name]["scale"][0] * (q - io[i_name]["zero_point"][0])).astype(np.float32)
    y = np.asarray(hls_model.predict(np.ascontiguousarray(x.reshape(SAMPLES, -1))))
    steps = y.reshape(expected.shape) / io[o_name]["scale"][0] + io[o_name]["zero_point"][0]
    np.testing.assert_allclose(steps, np.round(steps), atol=1e-6, err_msg=name)  # on the grid
    assert len(np.unique(expected)) > 10, name  # not a constant
    assert bool(np.mean(expected == 0) > 0.05) == MODELS[name], name
    np.testing.assert_array_equal(np.round(steps).astype(np.int64), expected, err_msg=name)


# person_detect-sized int8 / uint8 MobileNets: every requantization but the logits' BiasAdd and
# the Softmax's output is written exactly (the Softmax is a lookup table in hls4ml; compare logits)
LOGITS = "MobilenetV1/Logits/SpatialSqueeze_quant"
MOBILENETS = ["tflm__person_detect", "t2o__mobilenet_v1_0.25_128_quant"]


@pytest.mark.parametrize("name", MOBILENETS)
def test_mobilenet_form_keeps_the_logits_of_the_default_conversion(name):
    """86 of 88 HALF_UP Quants proven or split (RELU6 Clips folded, the average pool as a sum
    MatMul); the logits' BiasAdd Quant (a zero point hls4ml would drop on the unit scale the
    own-scale rule writes) and the Softmax's are not. On a seeded input (no tie met at the
    BiasAdd) qonnx's execution of the form equals that of the default conversion (checked
    against the interpreter by the converter's tests; person_detect's the interpreter
    refuses) on the logits and the final output, on a seeded input."""
    from qonnx_ingest.execute import execute_qonnx
    from qonnx_ingest.targets.hls4ml import LAYERS, to_hls4ml

    path = CORPUS / "tflite" / f"{name}.tflite"
    default = tflite2qonnx.convert(path, channels_last=True)
    form = to_hls4ml(default, round_unproven_ties=True)
    record = json.loads({p.key: p.value for p in form.metadata_props}[FORM_KEY])
    assert record[DEVIATED] == [
        "MobilenetV1/Logits/Conv2d_1c_1x1/BiasAdd_quant",
        "MobilenetV1/Predictions/Reshape_1_quant",
    ], record[DEVIATED]
    assert len(record[EXACT]) == 86
    assert record[LAYERS]["global average as MatMul"]
    assert not any(n.op_type in ("Clip", "AveragePool") for n in form.graph.node)
    logits = [n for n in default.graph.node if n.name == LOGITS][0].output[0]
    for model in (default, form):
        info = [v for v in model.graph.value_info if v.name == logits]
        model.graph.value_info.remove(info[0])
        model.graph.output.append(info[0])
    io = json.loads({p.key: p.value for p in default.metadata_props}[IO_KEY])
    i_name = default.graph.input[0].name
    shape = [d.dim_value for d in default.graph.input[0].type.tensor_type.shape.dim]
    low = -128 if io[i_name]["dtype"] == "int8" else 0
    q = np.random.default_rng(0).integers(low, low + 256, shape)
    x = (io[i_name]["scale"][0] * (q - io[i_name]["zero_point"][0])).astype(np.float32)
    expected, got = execute_qonnx(default, {i_name: x}), execute_qonnx(form, {i_name: x})
    assert len(np.unique(expected[logits])) > 1
    for out in (logits, default.graph.output[0].name):
        np.testing.assert_array_equal(got[out], expected[out], err_msg=f"{name} {out}")
