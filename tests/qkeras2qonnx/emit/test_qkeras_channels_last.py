"""--channels-last: qonnx's channels-last ops (written by layout.channels_last); the result runs
in qonnx's executor and computes what the default output and QKeras compute."""

import numpy as np
import onnx
import pytest
from qkeras_helpers import quant_nodes

pytestmark = pytest.mark.keras


def _run(onnx_model, x):
    # execute_onnx directly: qonnx_ingest.execute.with_static_shapes drops value_info, and
    # qonnx's channels-last Conv cannot infer its shape from a Quant-produced weight without it.
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx

    name = onnx_model.graph.input[0].name
    out = execute_onnx(ModelWrapper(onnx_model), {name: x})
    return out[onnx_model.graph.output[0].name]


@pytest.mark.parametrize("family", ["qconv2d", "qdepthwise", "qconv2d_batchnorm"])
def test_channels_last_matches_default_and_qkeras(family):
    import qkeras_weight_layer_models

    import qkeras2qonnx

    model = getattr(qkeras_weight_layer_models, family)()
    default = qkeras2qonnx.convert(model, batch_size=1)
    last = qkeras2qonnx.convert(model, channels_last=True)
    assert len(quant_nodes(last)) == len(quant_nodes(default))
    domains = {n.domain for n in last.graph.node if n.op_type == "Conv"}
    assert domains == {"qonnx.custom_op.channels_last"}
    assert last.graph.node[0].op_type != "Transpose"  # the NHWC input feeds the model directly
    dims = [d.dim_value for d in last.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [1, *model.input.shape[1:]]
    rng = np.random.default_rng(7)
    for _ in range(8):
        x = rng.uniform(-2, 2, (1, *model.input.shape[1:])).astype(np.float32)
        ref = np.asarray(model(x, training=False))
        tol = 1e-6 * float(np.max(np.abs(ref)))
        np.testing.assert_allclose(_run(last, x), _run(default, x), rtol=1e-6, atol=tol)
        np.testing.assert_allclose(_run(last, x), ref, rtol=1e-6, atol=tol)


def test_cli_channels_last(tmp_path):
    import qkeras_weight_layer_models

    from qkeras2qonnx.cli import main

    model = qkeras_weight_layer_models.qconv2d()
    model.save(tmp_path / "m.h5")
    assert main([str(tmp_path / "m.h5"), "--channels-last"]) == 0
    converted = onnx.load(tmp_path / "m.onnx")
    assert "qonnx.custom_op.channels_last" in {n.domain for n in converted.graph.node}


@pytest.fixture(scope="module")
def pooled_depthwise():
    """QDepthwiseConv2D with a quantized bias -> QActivation -> a global pool (mean, max)."""
    from qkeras import QActivation, QDepthwiseConv2D, quantized_bits, quantized_relu
    from qkeras_helpers import keras, set_seeded_weights

    k = keras()
    models = {}
    for seed, pool in enumerate((k.layers.GlobalAveragePooling2D, k.layers.GlobalMaxPooling2D)):
        inp = k.Input((6, 6, 3), name="x")
        h = QDepthwiseConv2D(
            3,
            depthwise_quantizer=quantized_bits(6, 0, alpha=1),
            bias_quantizer=quantized_bits(6, 2, alpha=1),
            name="dw",
        )(inp)
        h = QActivation(quantized_relu(6, 2), name="act")(h)
        models[pool.__name__] = k.Model(inp, pool()(h))
        set_seeded_weights(models[pool.__name__], 21 + seed)
    return models


@pytest.mark.parametrize("pool", ["GlobalAveragePooling2D", "GlobalMaxPooling2D"])
def test_channels_last_keeps_bias_in_conv_and_global_pool_and_equals_qkeras(pooled_depthwise, pool):
    """A depthwise bias goes into the channels-last Conv and a global pool stays a global pool
    (not a ReduceMean / ReduceMax), as in the default output; values equal QKeras's."""
    import qkeras2qonnx

    model = pooled_depthwise[pool]
    last = qkeras2qonnx.convert(model, channels_last=True)
    ops = [n.op_type for n in last.graph.node]
    pooled = {"GlobalAveragePooling2D": "GlobalAveragePool", "GlobalMaxPooling2D": "GlobalMaxPool"}
    assert pooled[pool] in ops and not {"ReduceMean", "ReduceMax", "Add"} & set(ops), ops
    (conv,) = [n for n in last.graph.node if n.op_type == "Conv"]
    assert conv.domain == "qonnx.custom_op.channels_last" and len(conv.input) == 3
    x = (np.random.default_rng(3).integers(-32, 32, (6, 6, 6, 3)) / 16).astype(np.float32)
    expected = model.predict(x, verbose=0)
    got = np.concatenate([_run(last, row[None]) for row in x])
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6 * float(np.abs(expected).max()))


@pytest.fixture(scope="module")
def one_sided_pool():
    """QConv2D -> MaxPooling2D(2, padding='same') on 5x5: Keras pads the bottom and right
    only (pads [0, 0, 1, 1]); no ReLU before the pool, so negative maxima meet the padding."""
    from qkeras import QConv2D, quantized_bits
    from qkeras_helpers import keras, set_seeded_weights

    k = keras()
    inp = k.Input((5, 5, 2), name="x")
    h = QConv2D(3, 3, padding="same", kernel_quantizer=quantized_bits(6, 0, alpha=1))(inp)
    model = k.Model(inp, k.layers.MaxPooling2D(2, padding="same", name="pool")(h))
    set_seeded_weights(model, 31)
    return model


def test_channels_last_keeps_a_one_sided_max_pool_plain_and_equals_qkeras(one_sided_pool):
    """qonnx's channels-last MaxPool asserts even padding ("Uneven padding not supported"),
    so a MaxPool padded on one side stays a plain ONNX MaxPool between Transposes (the Conv
    still channels-last) instead of failing shape inference; values equal QKeras's."""
    import qkeras2qonnx

    model = one_sided_pool
    last = qkeras2qonnx.convert(model, channels_last=True)
    (pool,) = [n for n in last.graph.node if n.op_type == "MaxPool"]
    pads = [list(a.ints) for a in pool.attribute if a.name == "pads"]
    assert pool.domain == "" and pads == [[0, 0, 1, 1]]
    (conv,) = [n for n in last.graph.node if n.op_type == "Conv"]
    assert conv.domain == "qonnx.custom_op.channels_last"
    x = (np.random.default_rng(5).integers(-32, 32, (4, 5, 5, 2)) / 16).astype(np.float32)
    expected = model.predict(x, verbose=0)
    # negative maxima in the padded last row / column: zero padding would differ there
    assert (expected[:, -1] < 0).any() and (expected[:, :, -1] < 0).any()
    got = np.concatenate([_run(last, row[None]) for row in x])
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6 * float(np.abs(expected).max()))
