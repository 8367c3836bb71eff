"""``convert(..., channels_last=True)``: NHWC graph I/O, qonnx's channels-last Conv / MaxPool
ops, the same numbers as the default (NCHW) conversion and as the TFLite interpreter, and the
op structure qonnx's own ConvertToChannelsLastAndClean makes of the default conversion.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest

import tflite2qonnx
from layout import stored_perms
from layout.channels_last import CHANNELS_LAST_DOMAIN
from qonnx_ingest.errors import InputError
from qonnx_ingest.execute import execute_qonnx
from support import CORPUS, requires_corpus

TFLITE = CORPUS / "tflite"
pytestmark = [
    requires_corpus,
    pytest.mark.filterwarnings("ignore::qonnx_ingest.errors.ConversionWarning"),
]


def _dims(vi: onnx.ValueInfoProto) -> list:
    return [
        d.dim_value if d.HasField("dim_value") else d.dim_param
        for d in vi.type.tensor_type.shape.dim
    ]


def _ops(model: onnx.ModelProto) -> Counter:
    return Counter((n.domain, n.op_type) for n in model.graph.node)


def _feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {vi.name: rng.uniform(-1, 1, _dims(vi)).astype(np.float32) for vi in model.graph.input}


def _assert_same_as_default(source, channels_last: onnx.ModelProto) -> None:
    """qonnx's execution of the channels-last model on NHWC inputs equals that of the default
    conversion on the same inputs in its (NCHW) layout, output for output."""
    default = tflite2qonnx.convert(source)
    perms = stored_perms(default)
    feeds = _feeds(channels_last)
    ours = execute_qonnx(channels_last, feeds)
    theirs = execute_qonnx(
        default, {k: v.transpose(perms[k]) if k in perms else v for k, v in feeds.items()}
    )
    assert [o.name for o in default.graph.output] == list(ours)
    for name, value in ours.items():
        expected = theirs[name]
        if name in perms:
            expected = expected.transpose(np.argsort(perms[name]))
        np.testing.assert_array_equal(value, expected, err_msg=name)


@pytest.mark.parametrize(
    ("model", "cl_ops", "transposes"),
    [
        ("t2o__conv.uint8", {"Conv": 1}, 0),
        ("t2o__depthwise-conv.uint8", {"Conv": 1}, 0),
        # MobileNet v1: 28 Conv; the AveragePool (no channels-last form) between 2 Transposes
        ("t2o__mobilenet_v1_0.25_128_quant", {"Conv": 28}, 2),
    ],
)
def test_channels_last_computes_as_default_conversion(model, cl_ops, transposes):
    source = TFLITE / f"{model}.tflite"
    converted = tflite2qonnx.convert(source, channels_last=True)
    ops = _ops(converted)
    assert {t: c for (d, t), c in ops.items() if d == CHANNELS_LAST_DOMAIN} == cl_ops
    assert not any(ops[("", t)] for t in ("Conv", "MaxPool", "BatchNormalization"))
    assert ops[("", "Transpose")] == transposes
    _assert_same_as_default(source, converted)


def test_channels_last_blazeface_maxpool_and_selfie_avgpool():
    """MediaPipe models (qonnx's own pass: minutes): MaxPool becomes channels-last; the
    AveragePools (no channels-last form) sit between Transposes, 2 each, as qonnx leaves them."""
    face = _ops(tflite2qonnx.convert(TFLITE / "mediapipe__face_detection_short_range.tflite",
                                     channels_last=True))  # fmt: skip
    assert face[(CHANNELS_LAST_DOMAIN, "Conv")] == 37
    assert face[(CHANNELS_LAST_DOMAIN, "MaxPool")] == 3
    assert face[("", "Transpose")] == 0
    selfie = _ops(tflite2qonnx.convert(TFLITE / "mediapipe__selfie_segmentation.tflite",
                                       channels_last=True))  # fmt: skip
    assert selfie[(CHANNELS_LAST_DOMAIN, "Conv")] == 54
    assert selfie[("", "AveragePool")] == 10
    assert selfie[("", "Transpose")] == 28


@pytest.mark.parametrize("model", ["t2o__conv.uint8", "t2o__depthwise-conv.uint8"])
def test_channels_last_agrees_with_tflite_interpreter_in_nhwc(model):
    """--verify feeds the interpreter's NHWC inputs unpermuted (no layout metadata)."""
    converted = tflite2qonnx.convert(TFLITE / f"{model}.tflite", channels_last=True, verify=True)
    assert stored_perms(converted) == {}


def test_channels_last_io_is_nhwc_with_batch_one():
    converted = tflite2qonnx.convert(TFLITE / "tflm__person_detect.tflite", channels_last=True)
    assert [_dims(vi) for vi in converted.graph.input] == [[1, 96, 96, 1]]
    assert [_dims(vi) for vi in converted.graph.output] == [[1, 2]]
    # hello_world's batch is dynamic in the default conversion
    default = tflite2qonnx.convert(TFLITE / "tflm__hello_world_int8.tflite")
    assert _dims(default.graph.input[0]) == ["batch", 1]
    mlp = tflite2qonnx.convert(TFLITE / "tflm__hello_world_int8.tflite", channels_last=True)
    assert _dims(mlp.graph.input[0]) == [1, 1]
    infos = (*mlp.graph.value_info, *mlp.graph.output)
    assert all(isinstance(d, int) and d > 0 for vi in infos for d in _dims(vi))


def test_channels_last_conv_weight_is_ohwi_as_tflite_stores_it():
    """qonnx's channels-last Conv reads its weight OHWI: the TFLite kernel, unpermuted."""
    from tflite2qonnx.flatbuffer import read_model

    source = TFLITE / "t2o__conv.uint8.tflite"
    converted = tflite2qonnx.convert(source, channels_last=True)
    (conv,) = [n for n in converted.graph.node if n.op_type == "Conv"]
    quant = next(n for n in converted.graph.node if n.output[0] == conv.input[1])
    init = {t.name: t for t in converted.graph.initializer}[quant.input[0]]
    weight = onnx.numpy_helper.to_array(init)
    subgraph = read_model(source).subgraphs[0]
    kernels = [t for t in subgraph.tensors if t.data is not None and len(t.shape) == 4]
    assert [tuple(k.shape) for k in kernels] == [weight.shape]


def test_channels_last_has_qonnx_structure():
    """Node for node (domain, op type), what qonnx's ConvertToChannelsLastAndClean (with
    make_input_channels_last) makes of the default conversion, less the Transpose qonnx leaves
    on the output (ours keeps the output NHWC too)."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean

    for model in ("t2o__conv.uint8", "t2o__depthwise-conv.uint8"):
        source = TFLITE / f"{model}.tflite"
        default = tflite2qonnx.convert(source)
        theirs = ModelWrapper(default).transform(
            ConvertToChannelsLastAndClean(make_input_channels_last=True)
        )
        ours = tflite2qonnx.convert(source, channels_last=True)
        expected = [(n.domain, n.op_type) for n in theirs.graph.node if n.op_type != "Transpose"]
        assert [(n.domain, n.op_type) for n in ours.graph.node] == expected
        (conv_theirs,) = [n for n in theirs.graph.node if n.op_type == "Conv"]
        (conv_ours,) = [n for n in ours.graph.node if n.op_type == "Conv"]
        assert conv_ours.attribute == conv_theirs.attribute
        assert [o.version for o in ours.opset_import if o.domain == CHANNELS_LAST_DOMAIN] == [
            o.version for o in theirs.model.opset_import if o.domain == CHANNELS_LAST_DOMAIN
        ]


def test_channels_last_refuses_explicit_layouts():
    with pytest.raises(InputError, match="explicit layouts"):
        tflite2qonnx.convert(
            TFLITE / "t2o__conv.uint8.tflite", channels_last=True, layouts={"input": "NCHW"}
        )


@pytest.mark.keras
def test_generated_cnn_channels_last_matches_default_and_interpreter(small_cnn):
    converted = tflite2qonnx.convert(small_cnn, channels_last=True, verify=True)
    ops = _ops(converted)
    assert ops[(CHANNELS_LAST_DOMAIN, "Conv")] == 2
    assert ops[(CHANNELS_LAST_DOMAIN, "MaxPool")] == 1
    assert ops[("", "Transpose")] == 0
    _assert_same_as_default(small_cnn, converted)


@pytest.fixture(scope="module")
def small_cnn() -> bytes:
    pytest.importorskip("tensorflow", reason="needs the keras extra (TensorFlow)")
    from small_tflite import small_cnn

    return small_cnn()


@pytest.mark.keras
def test_channels_last_weight_shared_by_two_convs_is_transposed_once_before_both(shared_cnn):
    """Coral's AutoML video detector shares its box / class tower weights across feature-map
    levels: each Conv appended its own Transpose with the same output name (a value produced
    twice, which qonnx's ModelWrapper rejects) after the Convs reading it."""
    converted = tflite2qonnx.convert(shared_cnn, channels_last=True, verify=True)
    produced = [o for n in converted.graph.node for o in n.output]
    assert len(produced) == len(set(produced))
    (moved,) = [n for n in converted.graph.node if n.output[0].endswith("_ohwi")]
    readers = [n for n in converted.graph.node if moved.output[0] in n.input]
    assert [(n.domain, n.op_type) for n in readers] == [(CHANNELS_LAST_DOMAIN, "Conv")] * 2
    order = list(converted.graph.node)
    assert all(order.index(moved) < order.index(n) for n in readers)
    _assert_same_as_default(shared_cnn, converted)


@pytest.fixture(scope="module")
def shared_cnn() -> bytes:
    pytest.importorskip("tensorflow", reason="needs the keras extra (TensorFlow)")
    from small_tflite import shared_weight_cnn

    return shared_weight_cnn()
