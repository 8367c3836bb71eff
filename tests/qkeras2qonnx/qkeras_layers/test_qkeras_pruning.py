"""Models saved with tensorflow-model-optimization's PruneLowMagnitude wrappers convert as their
inner layers with the pruned weights (weight * mask, which the wrapper assigns on every call)."""

import numpy as np
import pytest
from qkeras_helpers import assert_matches_qkeras, count_quantizers, keras, quant_nodes

pytestmark = pytest.mark.keras


@pytest.fixture(scope="module")
def pruned(tmp_path_factory):
    """A saved QConv1D + QDense model under PruneLowMagnitude whose masks zero half of each
    kernel while the stored kernels are still dense: only the mask makes them sparse."""
    import tensorflow_model_optimization as tfmot
    from qkeras import QActivation, QConv1D, QDense, quantized_bits, quantized_relu

    k = keras()
    prune = tfmot.sparsity.keras.prune_low_magnitude
    inp = k.Input((16, 2), name="x")
    h = prune(QConv1D(4, 3, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="conv"))(inp)
    h = QActivation(quantized_relu(4, 1), name="act")(h)
    h = k.layers.Flatten()(h)
    out = prune(QDense(3, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="fc"))(h)
    model = k.Model(inp, out)
    rng = np.random.default_rng(4)
    for layer in model.layers:
        for weight, mask, _ in getattr(layer, "pruning_vars", []):
            weight.assign(rng.normal(0, 0.5, weight.shape).astype(np.float32))
            mask.assign((rng.uniform(size=mask.shape) < 0.5).astype(np.float32))
    path = tmp_path_factory.mktemp("pruned") / "pruned.h5"
    model.save(path)
    return path


def test_pruned_model_converts_with_masked_weights(pruned):
    import qkeras2qonnx
    from qkeras2qonnx.environment.load import load_model

    model = load_model(pruned)  # loaded without any tfmot import by the caller's code
    kernels = {
        layer.name: (layer.layer.kernel.numpy(), mask.numpy())
        for layer in model.layers
        for _, mask, _ in getattr(layer, "pruning_vars", [])
    }
    assert len(kernels) == 2
    assert all(np.any((m == 0) & (w != 0)) for w, m in kernels.values())  # the mask matters
    onnx_model = qkeras2qonnx.convert(pruned)
    for batch in (1, 8):
        assert_matches_qkeras(model, onnx_model, batch=batch)
    assert len(quant_nodes(onnx_model)) == count_quantizers(model) == 3


def test_unmasked_weights_would_not_match(pruned):
    """The comparison above can fail: the same model with the masks set to one computes
    something else (so the conversion really applied the saved masks)."""
    from qkeras2qonnx.environment.load import load_model

    model = load_model(pruned)
    x = np.random.default_rng(0).uniform(-2, 2, (4, 16, 2)).astype(np.float32)
    masked = np.asarray(model(x, training=False))
    for layer in model.layers:
        for _, mask, _ in getattr(layer, "pruning_vars", []):
            mask.assign(np.ones(mask.shape, np.float32))
    fresh = load_model(pruned)
    fresh_layers = {layer.name: layer for layer in fresh.layers}
    for layer in model.layers:
        if getattr(layer, "pruning_vars", None):
            layer.layer.set_weights(fresh_layers[layer.name].layer.get_weights())
    assert not np.allclose(np.asarray(model(x, training=False)), masked)


@pytest.fixture(scope="module")
def pruned_folded(tmp_path_factory):
    """hls4ml tutorial part 6's shape: PruneLowMagnitude around QConv2DBatchnorm, whose kernel is
    folded with the batch-norm statistics before it is quantized (today's refusal: "the pruning
    mask cannot be applied"); the masks zero half of it, the statistics are far from identity."""
    import tensorflow_model_optimization as tfmot
    from qkeras import QActivation, QConv2DBatchnorm, QDense, quantized_bits, quantized_relu

    k = keras()
    prune = tfmot.sparsity.keras.prune_low_magnitude
    inp = k.Input((6, 6, 2), name="x")
    conv = QConv2DBatchnorm(
        4, 3, kernel_quantizer=quantized_bits(6, 2, alpha=1),
        bias_quantizer=quantized_bits(8, 3, alpha=1), name="conv_bn",
    )  # fmt: skip
    h = prune(conv)(inp)
    h = QActivation(quantized_relu(6, 2), name="act")(h)
    h = k.layers.Flatten()(h)
    out = QDense(3, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="fc")(h)
    model = k.Model(inp, out)
    rng = np.random.default_rng(6)
    wrapper = model.get_layer("prune_low_magnitude_conv_bn")
    for weight, mask, _ in wrapper.pruning_vars:
        weight.assign(rng.normal(0, 0.4, weight.shape).astype(np.float32))
        mask.assign((rng.uniform(size=mask.shape) < 0.5).astype(np.float32))
    bn = wrapper.layer.batchnorm
    bn.moving_mean.assign(rng.normal(0, 0.5, 4).astype(np.float32))
    bn.moving_variance.assign(rng.uniform(0.2, 3.0, 4).astype(np.float32))
    bn.gamma.assign(rng.uniform(0.5, 2.0, 4).astype(np.float32))
    path = tmp_path_factory.mktemp("pruned_folded") / "pruned_folded.h5"
    model.save(path)
    return path


def test_pruned_qconv2dbatchnorm_folds_the_masked_kernel(pruned_folded):
    import qkeras2qonnx
    from qkeras2qonnx.environment.load import load_model

    model = load_model(pruned_folded)
    wrapper = model.get_layer("prune_low_magnitude_conv_bn")
    (weight, mask, _), = wrapper.pruning_vars  # fmt: skip
    stored = weight.numpy()
    assert np.any((mask.numpy() == 0) & (stored != 0))  # only the mask makes it sparse
    onnx_model = qkeras2qonnx.convert(model)
    assert np.array_equal(weight.numpy(), stored)  # the caller's model is left as it was
    for batch in (1, 8):
        assert_matches_qkeras(model, onnx_model, batch=batch, step=1 / 16)
    assert len(quant_nodes(onnx_model)) == count_quantizers(model)
