"""One small model per layer family (and per graph shape that once lost quantizers): the QONNX
model computes what QKeras computes at batch 1 and 8, with one node per quantizer.
The models: qkeras_layer_families."""

import warnings

import numpy as np
import onnx
import pytest
from qkeras_helpers import (
    assert_matches_qkeras,
    count_non_uniform,
    count_quantizers,
    quant_nodes,
)
from qkeras_layer_families import FAMILIES
from qkeras_weight_layer_models import (
    qconv2d,
    qconv2d_transpose_auto_alpha,
    qdepthwise,
    qseparable_conv1d_auto_alpha,
    qseparable_conv2d_auto_alpha,
)

pytestmark = pytest.mark.keras


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def converted(request):
    import qkeras2qonnx
    from qkeras2qonnx.qkeras_layers.quantizers import QuantizerAnnotationLost

    model = FAMILIES[request.param]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuantizerAnnotationLost)  # qbatchnorm's po2 defaults
        return request.param, model, qkeras2qonnx.convert(model)


@pytest.mark.parametrize("batch", [1, 8])
def test_matches_qkeras(converted, batch):
    _, model, onnx_model = converted
    assert_matches_qkeras(model, onnx_model, batch=batch)


def test_one_node_per_quantizer(converted):
    _, model, onnx_model = converted
    lost = count_non_uniform(model)
    assert len(quant_nodes(onnx_model)) == count_quantizers(model) - lost > 0


def test_passes_onnx_checker(converted):
    _, _, onnx_model = converted
    onnx.checker.check_model(onnx_model, full_check=True)


def test_no_markers_or_conv_batchnorm_fusion_left(converted):
    name, _, onnx_model = converted
    ops = [n.op_type for n in onnx_model.graph.node]
    assert "Clip" not in ops and "CheckNumerics" not in ops
    if name == "conv_then_batchnorm":
        assert "BatchNormalization" in ops


def test_conv_weight_scales_are_per_output_channel():
    """Conv weights are [O, I, kh, kw] in ONNX: a per-channel scale lies on axis 0; the
    depthwise kernel [kh, kw, C, M] becomes a grouped Conv weight [C*M, 1, kh, kw]."""
    from onnx import numpy_helper

    import qkeras2qonnx

    for build, node, channels in (
        (qconv2d, "conv/kernel_quantizer", 5),
        (qdepthwise, "dw/depthwise_quantizer", 8),
    ):
        onnx_model = qkeras2qonnx.convert(build())
        inits = {t.name: numpy_helper.to_array(t) for t in onnx_model.graph.initializer}
        kernel = next(n for n in quant_nodes(onnx_model) if n.name == node)
        scale = inits[kernel.input[1]]
        assert scale.shape == (channels, 1, 1, 1)
        assert len(np.unique(scale)) > 1


def _qkeras_scale(layer, role, expand=False):
    """QKeras's own per-channel scale for ``role`` (in the Keras kernel's axes), as a Quant
    scale: quantized_bits(6, 0, alpha='auto') returns ``scale * z / 2**5``."""
    kernel = getattr(
        layer, "kernel" if role == "kernel_quantizer" else role.replace("quantizer", "kernel")
    )
    quantizer = getattr(layer, f"{role}_internal")
    quantizer(kernel[None] if expand else kernel)
    return np.asarray(quantizer.scale) / 2**5


def test_separable_and_transpose_weight_scales_follow_the_qkeras_axis():
    """Each per-channel scale lands where QKeras computed it: ConvTranspose weights are
    [in, out, kh, kw] and the Keras kernel [kh, kw, out, in] is scaled per *input* channel (axis
    0); a depthwise kernel [kh, kw, C, M] is scaled per depth multiplier, i.e. channel c*M + m
    of the grouped Conv weight [C*M, 1, kh, kw] repeats M scales; the pointwise kernel is
    scaled per output filter; QSeparableConv1D's scale_axis=2 counts axes of [1, k, C, M] (its
    ONNX weight is the 1-D [C*M, 1, k])."""
    from onnx import numpy_helper

    import qkeras2qonnx

    cases = {
        qconv2d_transpose_auto_alpha: [("deconv", "kernel_quantizer", lambda s: s, 3)],
        qseparable_conv2d_auto_alpha: [
            ("sep", "depthwise_quantizer", lambda s: np.tile(s, 3), 6),  # C=3, M=2
            ("sep", "pointwise_quantizer", lambda s: s, 6),
        ],
        qseparable_conv1d_auto_alpha: [
            ("sep_axis", "depthwise_quantizer", lambda s: np.repeat(s, 2), 12),  # C=6, M=2
        ],
    }
    for build, checks in cases.items():
        model = build()
        onnx_model = qkeras2qonnx.convert(model)
        inits = {t.name: numpy_helper.to_array(t) for t in onnx_model.graph.initializer}
        nodes = {n.name: n for n in quant_nodes(onnx_model)}
        for layer, role, to_onnx, channels in checks:
            scale = inits[nodes[f"{layer}/{role}"].input[1]]
            expand = build is qseparable_conv1d_auto_alpha
            # the 1-D separable conv's weights are rank 3 (qkeras2qonnx.emit.conv1d)
            shape = (channels, 1, 1) if expand else (channels, 1, 1, 1)
            assert scale.shape == shape, (layer, role, scale.shape)
            expected = to_onnx(_qkeras_scale(model.get_layer(layer), role, expand).ravel())
            assert len(np.unique(expected)) > 1
            np.testing.assert_allclose(scale.ravel(), expected, rtol=1e-6)
