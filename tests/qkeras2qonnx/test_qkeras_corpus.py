"""Real QKeras models written and trained by others (read in place from the shared corpus)."""

import pytest
from qkeras_helpers import CORPUS, assert_matches_qkeras, count_quantizers, quant_nodes

from qonnx_ingest.errors import ConversionError
from support import requires_corpus

pytestmark = [
    pytest.mark.keras,
    requires_corpus,
]

# name: (model, weights, input range)
CONVERTIBLE = {
    "qkeras_3layer": ("qkeras_3layer.json", "qkeras_3layer_weights.h5", (-2.0, 2.0)),
    "qkeras_mnist_cnn": ("qkeras_mnist_cnn.json", "qkeras_mnist_cnn_weights.h5", (0.0, 1.0)),
    "part4_jettagger": ("part4_jettagger_KERAS_check_best_model.h5", None, (-2.0, 2.0)),
    "traintagger": ("TrainTagger_baseline_saved_model.h5", None, (-2.0, 2.0)),
    "qmodel_oct24": ("qmodel_oct24_savedmodel", None, (0.0, 4.0)),
}

# name: (model, what the error must say)
REFUSED = {
    "quantized_cnn": (
        "quantized_cnn.h5",
        "fused_convbn_0: unsupported QKeras layer QConv2DBatchnorm",
    ),
    "rn06": (
        "RN06_resnet_v1_eembc_quantized_tiny_model_best.h5",
        "q_conv2d_batchnorm: unsupported QKeras layer QConv2DBatchnorm",
    ),
    "ad03": (
        "AD03_autoqkeras_qbestModel.h5",
        "dense bias_quantizer: unsupported quantizer quantized_po2",
    ),
}


@pytest.fixture(scope="module", params=sorted(CONVERTIBLE))
def converted(request):
    import qkeras2qonnx
    from qkeras2qonnx.load import load_model

    source, weights, value_range = CONVERTIBLE[request.param]
    weights = CORPUS / weights if weights else None
    model = load_model(CORPUS / source, weights=weights)
    return model, qkeras2qonnx.convert(CORPUS / source, weights=weights), value_range


@pytest.mark.parametrize("batch", [1, 8])
def test_matches_qkeras(converted, batch):
    model, onnx_model, (low, high) = converted
    assert_matches_qkeras(model, onnx_model, batch=batch, low=low, high=high)


def test_one_node_per_quantizer(converted):
    model, onnx_model, _ = converted
    assert len(quant_nodes(onnx_model)) == count_quantizers(model) > 0


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_out_of_scope_models_are_refused_by_name(name):
    import qkeras2qonnx

    source, message = REFUSED[name]
    with pytest.raises(ConversionError, match=message):
        qkeras2qonnx.convert(CORPUS / source)


def test_legacy_weights_named_like_keras3_weights(tmp_path):
    """hls4ml-era weights in the legacy HDF5 layout still load when named *.weights.h5."""
    import qkeras2qonnx
    from qkeras2qonnx.load import load_model

    link = tmp_path / "qkeras_3layer.weights.h5"
    link.symlink_to(CORPUS / "qkeras_3layer_weights.h5")
    model = load_model(CORPUS / "qkeras_3layer.json", weights=link)
    onnx_model = qkeras2qonnx.convert(CORPUS / "qkeras_3layer.json", weights=link)
    assert_matches_qkeras(model, onnx_model, batch=8)
