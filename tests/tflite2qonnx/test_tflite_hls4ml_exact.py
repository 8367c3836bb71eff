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
import warnings

import numpy as np
import pytest

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
    config = hls4ml.utils.config.config_from_onnx_model(
        prepared, granularity="name", backend="Vivado", default_precision=DEFAULT_PRECISION
    )
    for node in prepared.graph.node:
        group = [a.i for a in node.attribute if a.name == "group"]
        if node.op_type == "Conv" and group and group[0] > 1:
            config["LayerName"][node.name]["Precision"]["result"] = DEPTHWISE_RESULT
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hls_model = hls4ml.converters.convert_from_onnx_model(
            prepared,
            output_dir=str(tmp_path_factory.mktemp(name.replace(".", "_"))),
            io_type="io_parallel",
            backend="Vivado",
            hls_config=config,
        )
        hls_model.compile()
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
