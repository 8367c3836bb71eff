"""Graph-level guarantees: options of convert/from_keras, and that a quantizer whose tensor
goes missing in tf2onnx's graph is an error, not a silently unquantized model."""

import json

import numpy as np
import onnx
import pytest
from qkeras_helpers import (
    assert_matches_qkeras,
    count_quantizers,
    keras,
    quant_nodes,
    set_seeded_weights,
)

from qonnx_ingest.errors import ConversionError

pytestmark = pytest.mark.keras


@pytest.fixture(scope="module")
def model():
    from qkeras import QActivation, QConv2D, QDense, quantized_bits, quantized_relu

    k = keras()
    inp = k.Input((6, 6, 2), name="x")
    h = QConv2D(3, 3, kernel_quantizer=quantized_bits(6, 0, alpha="auto"), name="conv")(inp)
    h = QActivation(quantized_relu(5, 1), name="act")(h)
    h = k.layers.Flatten()(h)
    h = QDense(
        4,
        kernel_quantizer=quantized_bits(6, 0, alpha=1),
        bias_quantizer=quantized_bits(6, 2, alpha=1),
        name="fc",
    )(h)
    model = k.Model(inp, h)
    set_seeded_weights(model, 21)
    return model


@pytest.fixture(scope="module")
def stripped(model):
    """The tf2onnx graph with markers still in, and its layer map."""
    from qkeras2qonnx.emit.tf2onnx_step import to_onnx
    from qkeras2qonnx.strip import strip_model

    plain, layer_map = strip_model(model)
    return to_onnx(plain, opset=13), layer_map


def test_int_quant_emits_intquant_and_still_matches(model):
    import qkeras2qonnx

    onnx_model = qkeras2qonnx.convert(model, int_quant=True)
    ops = {n.op_type for n in quant_nodes(onnx_model)}
    assert ops == {"IntQuant"}
    assert_matches_qkeras(model, onnx_model, batch=8)


def test_batch_size_fixes_the_batch_dimension(model):
    import qkeras2qonnx

    onnx_model = qkeras2qonnx.convert(model, batch_size=1)
    (inp,) = onnx_model.graph.input
    assert [d.dim_value for d in inp.type.tensor_type.shape.dim] == [1, 6, 6, 2]
    assert_matches_qkeras(model, onnx_model, batch=1)


def test_dynamic_batch_by_default(model):
    import qkeras2qonnx

    onnx_model = qkeras2qonnx.convert(model)
    dims = onnx_model.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "batch"


def test_saved_file_reloads_and_checks(model, tmp_path):
    import qkeras2qonnx

    out = tmp_path / "model.onnx"
    converted = qkeras2qonnx.convert(model, out)
    reloaded = onnx.load(out)
    onnx.checker.check_model(reloaded, full_check=True)
    assert len(quant_nodes(reloaded)) == len(quant_nodes(converted)) == count_quantizers(model)
    domains = {o.domain: o.version for o in reloaded.opset_import}
    assert domains[""] == 13 and "qonnx.custom_op.general" in domains


def test_metadata_maps_nodes_to_qkeras_quantizers(model):
    import qkeras2qonnx

    onnx_model = qkeras2qonnx.convert(model)
    props = {p.key: p.value for p in onnx_model.metadata_props}
    mapping = json.loads(props["qkeras2qonnx.quantizers"])
    assert set(mapping) == {n.name for n in quant_nodes(onnx_model)}
    assert mapping["act/activation_quantizer"] == "quantized_relu(5,1)"


def test_convert_names_the_graph_after_the_keras_model(model):
    import qkeras2qonnx

    assert model.name and model.name != "tf2onnx"
    assert qkeras2qonnx.convert(model).graph.name == model.name


def test_from_keras_mirrors_the_old_api(model, tmp_path):
    import qkeras2qonnx

    out = tmp_path / "old_api.onnx"
    proto, storage = qkeras2qonnx.from_keras(model, "my_graph", opset=13, output_path=out)
    assert storage is None and out.exists()
    assert proto.graph.name == "my_graph"
    assert_matches_qkeras(model, proto, batch=8)
    with pytest.raises(ConversionError, match="large_model"):
        qkeras2qonnx.from_keras(model, large_model=True)


# The removed converter's signature: qonnx 0.x qonnx.converters.keras.from_keras.
OLD_FROM_KERAS = (
    ("name", "qkeras_to_qonnx_converted"),
    ("input_signature", None),
    ("opset", None),
    ("custom_ops", None),
    ("custom_op_handlers", None),
    ("custom_rewriter", None),
    ("inputs_as_nchw", None),
    ("extra_opset", None),
    ("shape_override", None),
    ("target", None),
    ("large_model", False),
    ("output_path", None),
)


def test_from_keras_has_every_argument_of_the_removed_converter_in_order():
    import inspect

    import qkeras2qonnx

    params = list(inspect.signature(qkeras2qonnx.from_keras).parameters.values())
    assert params[0].name == "model"
    assert [(p.name, p.default) for p in params[1:]] == list(OLD_FROM_KERAS)


def test_from_keras_raises_opset_9_to_13_with_one_warning(model):
    """qonnx's old converter tests call from_keras(..., opset=9)."""
    import warnings

    import qkeras2qonnx
    from qkeras2qonnx.pipeline import OpsetRaised

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        proto, _ = qkeras2qonnx.from_keras(model, opset=9)
    raised = [w for w in caught if issubclass(w.category, OpsetRaised)]
    assert len(raised) == 1 and "opset 9" in str(raised[0].message)
    default = [o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")]
    assert default == [13]
    assert_matches_qkeras(model, proto, batch=8)


def test_lost_output_marker_is_an_error(stripped):
    """If tf2onnx ever drops a quantized layer's output, the conversion fails naming it."""
    from qkeras2qonnx.emit.markers import marker_id
    from qkeras2qonnx.emit.reinsert import reinsert

    proto, layer_map = stripped
    proto = _copy(proto)
    graph = proto.graph
    marker = next(n for n in graph.node if marker_id(n) is not None)
    for node in graph.node:
        node.input[:] = [marker.input[0] if i == marker.output[0] else i for i in node.input]
    graph.node.remove(marker)
    with pytest.raises(ConversionError, match="marker") as info:
        reinsert(proto, layer_map=layer_map)
    assert str(info.value).startswith(layer_map.outputs[marker_id(marker)])


def test_changed_weight_is_an_error(stripped):
    """A weight tf2onnx altered arithmetically (e.g. folded) cannot silently lose its Quant."""
    from onnx import numpy_helper

    from qkeras2qonnx.emit.markers import decode_weight_markers
    from qkeras2qonnx.emit.reinsert import reinsert

    proto, layer_map = stripped
    proto = _copy(proto)
    for init in proto.graph.initializer:
        values = numpy_helper.to_array(init)
        if decode_weight_markers(values) is not None:
            init.CopyFrom(numpy_helper.from_array(values * np.float32(1.5), init.name))
            break
    with pytest.raises(ConversionError, match="not found"):
        reinsert(proto, layer_map=layer_map)


def test_stripped_model_has_no_qkeras_layers(model):
    from qkeras2qonnx.strip import strip_model

    plain, layer_map = strip_model(model)
    layers = [getattr(layer, "inner", layer) for layer in plain.layers]
    assert not [layer for layer in layers if type(layer).__module__.split(".")[0] == "qkeras"]
    assert len(layer_map.entries) == count_quantizers(model)
    roles = sorted((e.layer, e.role) for e in layer_map.entries)
    expected = [("act", "activation"), ("conv", "kernel_quantizer")]
    expected += [("fc", "bias_quantizer"), ("fc", "kernel_quantizer")]
    assert roles == expected
    conv = next(e for e in layer_map.entries if e.layer == "conv")
    assert conv.spec.scale.shape == (1, 1, 1, 3) and conv.spec.axis == 3


def _copy(proto):
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    return copy


def test_conv_and_pooling_nodes_carry_explicit_pads(model):
    """qonnx's channels-last ops and hls4ml's QONNX frontend read ``pads``; tf2onnx omits the
    attribute when the padding is zero (ONNX's default)."""
    import qkeras2qonnx

    onnx_model = qkeras2qonnx.convert(model)
    convs = [n for n in onnx_model.graph.node if n.op_type == "Conv"]
    assert convs
    for node in convs:
        pads = next(list(a.ints) for a in node.attribute if a.name == "pads")
        assert pads == [0, 0, 0, 0]  # the "valid" 3x3 QConv2D above
