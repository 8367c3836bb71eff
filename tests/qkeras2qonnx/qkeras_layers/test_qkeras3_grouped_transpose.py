"""qkeras-v3's QDepthwiseConv2DTranspose and QSeparableConv2DTranspose convert exactly: one
grouped ONNX ConvTranspose per depthwise stage, each quantizer a Quant node on its weight or
activation.

The models are built, run (qkeras-v3's predict) and converted by ``qkeras3_grouped_models.py``
under qkeras-v3; this process only compares files.
"""

import numpy as np
import onnx
import pytest
from qkeras3_support import assert_matches_reference, run_qkeras3
from qkeras_helpers import quant_nodes

pytestmark = pytest.mark.keras

CONVERTED = (
    "dw_s1_valid",
    "dw_s2_same_groups",
    "dw_one_group_unquantized_act",
    "sep_s1_same",
    "sep_s2_valid",
    "chain",
    "file_sep",
)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    out = tmp_path_factory.mktemp("qkeras3_grouped")
    run_qkeras3("qkeras3_grouped_models.py", out)
    return out


def reference(made, name):
    return dict(np.load(made / f"{name}.npz"))


@pytest.mark.parametrize("name", CONVERTED)
def test_grouped_transposed_convolutions_match_qkeras3_predict(made, name):
    converted = onnx.load(made / f"{name}.inmemory.onnx")
    onnx.checker.check_model(converted)
    ref = reference(made, name)
    assert len(quant_nodes(converted)) == int(ref["quantizers"])
    assert_matches_reference(converted, ref)


@pytest.mark.parametrize("name", CONVERTED)
def test_each_depthwise_stage_is_one_convtranspose_with_its_group(made, name):
    """No per-group split: one ConvTranspose with group C/group_size per layer, plus the 1x1
    pointwise one (group 1) per separable layer."""
    converted = onnx.load(made / f"{name}.inmemory.onnx")
    ref = reference(made, name)
    separable = sum(str(layer).startswith("sept") for layer in ref["group_layers"])
    expected = sorted([int(g) for g in ref["group_counts"]] + [1] * separable)
    got = sorted(
        next((a.i for a in n.attribute if a.name == "group"), 1)
        for n in converted.graph.node
        if n.op_type == "ConvTranspose"
    )
    assert got == expected


@pytest.mark.parametrize("name", ["sep_s1_same", "chain"])
def test_every_quantizer_is_a_quant_node_on_its_tensor(made, name):
    """Kernels feed a ConvTranspose's weight, the bias its Add (or ConvTranspose bias),
    activations sit on computed tensors."""
    converted = onnx.load(made / f"{name}.inmemory.onnx")
    graph = converted.graph
    initializers = {t.name for t in graph.initializer}
    readers = {}
    for node in graph.node:
        for slot, tensor in enumerate(node.input):
            readers.setdefault(tensor, []).append((node.op_type, slot))
    quants = {n.name: n for n in quant_nodes(converted)}
    roles = {
        "depthwise_kernel_quantizer": {("ConvTranspose", 1)},
        "pointwise_kernel_quantizer": {("ConvTranspose", 1)},
        "bias_quantizer": {("Add", 0), ("Add", 1), ("ConvTranspose", 2)},
    }
    for role, uses in roles.items():
        node = quants[f"sept/{role}"]
        assert node.input[0] in initializers, role
        assert set(readers[node.output[0]]) <= uses, role
    for role in ("depthwise_activation_quantizer", "pointwise_activation_quantizer"):
        assert quants[f"sept/{role}"].input[0] not in initializers, role


def test_keras_file_with_both_layers_converts(made):
    """A .keras file (loaded by qkeras2qonnx) gives the same exact model."""
    converted = onnx.load(made / "file_sep.file.onnx")
    onnx.checker.check_model(converted)
    ref = reference(made, "file_sep")
    assert len(quant_nodes(converted)) == int(ref["quantizers"])
    assert_matches_reference(converted, ref)


def test_a_second_conversion_in_one_process_gives_the_same_bytes(made):
    """The grouped layers' tags are numbered per conversion, not from a process-wide counter
    (the tag is in the ConvTranspose's name)."""
    first = (made / "file_sep.inmemory.onnx").read_bytes()
    assert (made / "file_sep.again.onnx").read_bytes() == first
    names = [n.name for n in onnx.load(made / "file_sep.again.onnx").graph.node]
    assert any("qkeras2qonnx_grouped_0_" in n for n in names), names


@pytest.mark.parametrize(
    "name, start",
    [
        ("refused_filters", "dwt: filters=3 but qkeras-v3's QDepthwiseConv2DTranspose outputs"),
        ("refused_dilation", "s: dilation_rate (2, 2): TensorFlow's CPU transposed convolution"),
    ],
)
def test_forms_without_a_reference_are_refused_naming_the_layer(made, name, start):
    assert not (made / f"{name}.inmemory.onnx").exists()
    assert (made / f"{name}.error.txt").read_text().startswith(start)
