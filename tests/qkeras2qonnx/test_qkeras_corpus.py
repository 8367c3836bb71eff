"""Real QKeras models written and trained by others (read in place from the shared corpus)."""

import json

import numpy as np
import pytest
from qkeras_helpers import (
    CORPUS,
    assert_matches_qkeras,
    count_non_uniform,
    count_quantizers,
    quant_nodes,
)

from support import requires_corpus

pytestmark = [
    pytest.mark.keras,
    requires_corpus,
]

# name: (model, weights, input range[, input grid step])
CONVERTIBLE = {
    "qkeras_3layer": ("qkeras_3layer.json", "qkeras_3layer_weights.h5", (-2.0, 2.0)),
    "qkeras_mnist_cnn": ("qkeras_mnist_cnn.json", "qkeras_mnist_cnn_weights.h5", (0.0, 1.0)),
    "part4_jettagger": ("part4_jettagger_KERAS_check_best_model.h5", None, (-2.0, 2.0)),
    "traintagger": ("TrainTagger_baseline_saved_model.h5", None, (-2.0, 2.0)),
    # inputs on a grid: arbitrary floats let the conv's accumulation order (TF vs onnxruntime)
    # move a sum across a quantizer's rounding boundary (one step, seen at batch 1)
    "qmodel_oct24": ("qmodel_oct24_savedmodel", None, (0.0, 4.0, 2**-8)),
    # QConv2DBatchnorm (folded BN)
    "quantized_cnn": ("quantized_cnn.h5", None, (0.0, 1.0)),
    "rn06": ("RN06_resnet_v1_eembc_quantized_tiny_model_best.h5", None, (0.0, 1.0, 2**-8)),
    # QBatchNormalization, binary/ternary alpha='auto_po2', quantized_po2 weights (lost)
    "ad03": ("AD03_autoqkeras_qbestModel.h5", None, (-2.0, 2.0)),
    # quantized_sigmoid(2) as a QDense activation= (composite form), 1-bit alpha=True kernels
    "neutdet": ("neutdet_quant_w1_a2_Vplane_nu.h5", None, (-2.0, 2.0)),
    # quantized_sigmoid(16, symmetric=6): symmetric counts steps, the floor is 6/2**16
    "neutdet_w16": ("neutdet_quant_w16_a16_Vplane_nu.h5", None, (-2.0, 2.0)),
    # saved with tensorflow-model-optimization PruneLowMagnitude wrappers on every layer
    "mitbih_pruned": ("mitbih_Conv1D_int8_pqmodel.h5", None, (-2.0, 2.0)),
    # QLSTM unrolled over 15 steps (state quantizer on c and h, quantized_tanh(9) twice per
    # step); its float 'sigmoid' gates differ from TF's by ulps (within 1e-6 relative);
    # quantized_relu(9,2,use_sigmoid=1) activations (composite form)
    "uwacme_qlstm": ("uwacme_btag_2int_qlstm_6frac.h5", None, (-2.0, 2.0, 2**-8)),
}


@pytest.fixture(scope="module", params=sorted(CONVERTIBLE))
def converted(request):
    import warnings

    import qkeras2qonnx
    from qkeras2qonnx.environment.load import load_model

    source, weights, value_range = CONVERTIBLE[request.param]
    weights = CORPUS / weights if weights else None
    model = load_model(CORPUS / source, weights=weights)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lost po2 annotations: asserted on below
        onnx_model = qkeras2qonnx.convert(CORPUS / source, weights=weights)
    return model, onnx_model, value_range


@pytest.mark.parametrize("batch", [1, 8])
def test_matches_qkeras(converted, batch):
    model, onnx_model, (low, high, *step) = converted
    assert_matches_qkeras(
        model, onnx_model, batch=batch, low=low, high=high, step=(step or [None])[0]
    )


def test_one_node_per_quantizer(converted):
    """Every quantizer is a node, except non-uniform weight quantizers (quantized constants),
    which the model's metadata lists as lost."""
    model, onnx_model, _ = converted
    lost = count_non_uniform(model)
    assert len(quant_nodes(onnx_model)) == count_quantizers(model) - lost > 0
    props = {p.key: p.value for p in onnx_model.metadata_props}
    assert len(json.loads(props.get("qkeras2qonnx.lost_quantizers", "{}"))) == lost


def test_ad03_warns_about_each_lost_po2_annotation():
    import qkeras2qonnx
    from qkeras2qonnx.qkeras_layers.quantizers import QuantizerAnnotationLost

    with pytest.warns(QuantizerAnnotationLost) as record:
        qkeras2qonnx.convert(CORPUS / "AD03_autoqkeras_qbestModel.h5")
    messages = [str(w.message) for w in record if w.category is QuantizerAnnotationLost]
    assert len(messages) == 8
    assert any(m.startswith("dense_2 kernel_quantizer quantized_po2(4,1)") for m in messages)


def test_legacy_weights_named_like_keras3_weights(tmp_path):
    """hls4ml-era weights in the legacy HDF5 layout still load when named *.weights.h5."""
    import qkeras2qonnx
    from qkeras2qonnx.environment.load import load_model

    link = tmp_path / "qkeras_3layer.weights.h5"
    link.symlink_to(CORPUS / "qkeras_3layer_weights.h5")
    model = load_model(CORPUS / "qkeras_3layer.json", weights=link)
    onnx_model = qkeras2qonnx.convert(CORPUS / "qkeras_3layer.json", weights=link)
    assert_matches_qkeras(model, onnx_model, batch=8)


def test_mitbih_channels_last_keeps_its_one_sided_max_pool_plain_and_equals_qkeras():
    """mitbih's first MaxPooling1D(4, padding='same') on 319 samples pads one side only
    (pads [0, 1]), which qonnx's channels-last MaxPool refuses ("Uneven padding not
    supported"): it stays a plain ONNX MaxPool between Transposes, the even one and the
    three Conv1Ds become channels-last ops, and the outputs equal QKeras's predict."""
    import warnings

    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx

    import qkeras2qonnx
    from qkeras2qonnx.environment.load import load_model

    source = CORPUS / "mitbih_Conv1D_int8_pqmodel.h5"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = load_model(source)
        last = qkeras2qonnx.convert(source, channels_last=True)
    pools = [
        (n.domain, *(list(a.ints) for a in n.attribute if a.name == "pads"))
        for n in last.graph.node
        if n.op_type == "MaxPool"
    ]
    assert pools == [("", [0, 1]), ("qonnx.custom_op.channels_last", [0, 0])]
    convs = [n.domain for n in last.graph.node if n.op_type == "Conv"]
    assert convs == ["qonnx.custom_op.channels_last"] * 3
    rng = np.random.default_rng(0)
    wrapper = ModelWrapper(last)
    name, out = last.graph.input[0].name, last.graph.output[0].name
    for _ in range(4):
        x = (np.round(rng.uniform(-2, 2, (1, 319, 1)) * 16) / 16).astype(np.float32)
        expected = model.predict(x, verbose=0)
        got = execute_onnx(wrapper, {name: x})[out]
        np.testing.assert_allclose(
            got, expected, rtol=1e-6, atol=1e-6 * float(np.abs(expected).max())
        )
