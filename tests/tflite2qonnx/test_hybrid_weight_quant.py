"""Hybrid (dynamic-range) recurrent and SVDF models: every int8 weight tensor reaches the
QONNX graph through an 8-bit Quant node (what hls4ml / FINN read), not as bare integer-valued
float constants; their numbers against the interpreter are pinned in test_rnn_hybrid,
test_lstm_hybrid and test_svdf."""

from __future__ import annotations

import numpy as np
import pytest
from lstm_hybrid_models import hybrid_lstm
from onnx import numpy_helper
from rnn_models import hybrid_rnn
from svdf_models import hybrid_svdf

import tflite2qonnx
from tflite2qonnx.reader import read_model

MODELS = {
    "rnn": lambda: hybrid_rnn(asymmetric=True),
    "svdf": lambda: hybrid_svdf(asymmetric=True),
    "lstm": lambda: hybrid_lstm(),
    "lstm_bidirectional": lambda: hybrid_lstm(
        bidirectional=True, merge_outputs=False, asymmetric=False, cifg=True
    ),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_int8_weight_of_a_hybrid_op_is_an_8_bit_quant(name: str) -> None:
    data = MODELS[name]()
    (sg,) = read_model(data).subgraphs
    int8 = {
        idx
        for op in sg.operators
        for idx in op.inputs
        if idx >= 0 and sg.tensors[idx].dtype == "int8" and sg.tensors[idx].data is not None
    }
    assert int8
    model = tflite2qonnx.convert(data)
    inits = {t.name: t for t in model.graph.initializer}
    quants = [n for n in model.graph.node if n.op_type == "Quant" and n.input[0] in inits]
    assert len(quants) == len(int8)
    for node in quants:
        assert float(numpy_helper.to_array(inits[node.input[3]])) == 8.0
        assert np.any(numpy_helper.to_array(inits[node.input[0]]) % 1 != 0)  # real values
