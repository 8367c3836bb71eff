"""Readable names: the graph is named after the .tflite file, nodes after the TFLite tensor
their operator produces, Quant nodes and their parameters after the tensor they quantize,
never after TFLite's ';'-joined fused names (hls4ml turns node names into layer names)."""

from __future__ import annotations

import re

import pytest

from qonnx_ingest.names import short_name
from support import CORPUS, requires_corpus
from tflite2qonnx import convert
from tflite2qonnx.reader import read_model

CORAL = CORPUS / "tflite" / "coral__tf2_mobilenet_v2_1.0_224_ptq.tflite"
HELLO = CORPUS / "tflite" / "tflm__hello_world_int8.tflite"

pytestmark = [requires_corpus, pytest.mark.filterwarnings("ignore::UserWarning")]


def test_short_name_keeps_the_ops_own_part():
    fused = "model/conv/Relu;model/bn/FusedBatchNormV3;model/conv/BiasAdd"
    assert short_name(fused) == "model/conv/Relu"
    assert short_name("plain") == "plain"
    long = "a/" * 60 + "Relu6"
    assert len(short_name(long)) <= 80 and short_name(long).endswith("Relu6")


def test_graph_is_named_after_the_file():
    assert read_model(HELLO).subgraphs[0].name == "main"  # what it was named before
    assert convert(HELLO).graph.name == "tflm__hello_world_int8"


def test_nodes_are_named_after_tflite_tensors_without_fused_chains():
    model = convert(CORAL)
    tensors = {t.name for t in read_model(CORAL).subgraphs[0].tensors}
    assert any(";" in t for t in tensors)  # the source does fuse names
    ours = list(model.graph.node)  # the layout pass's Reshape included
    assert any(n.name.endswith("_Reshape") for n in ours)
    names = [n.name for n in ours]
    assert len(set(names)) == len(names)
    assert all(";" not in n and len(n) <= 100 for n in names), max(names, key=len)
    convs = [n.name for n in ours if n.op_type == "Conv"]
    assert "MobileNetV2/Conv2d_0_0/relu6/Relu6/Conv" in convs
    quants = [n for n in ours if n.op_type == "Quant"]
    assert quants
    for q in quants:
        assert re.fullmatch(r"[^;]+_quant(_\d+)?", q.name), q.name  # <tensor>_quant
        for param in q.input[1:]:  # scale, zero point, bit width (shared where equal)
            assert ";" not in param and len(param) <= 100, param
