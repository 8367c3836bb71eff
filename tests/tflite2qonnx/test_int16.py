"""16x8 quantization (int16 activations, int8 weights, int64 biases) on ARM's DS-CNN.

The int64 biases are quantized like int32 ones (real = scale * q); reading them as plain
integers once put every convolution off by its whole range while the conversion succeeded.
"""

from __future__ import annotations

import numpy as np
import pytest
from litert_compare import compare, reference_interpreter, steps_per_op
from onnx import numpy_helper

import tflite2qonnx
from support import CORPUS, requires_corpus
from tflite2qonnx.quantization import dequantize
from tflite2qonnx.reader import read_model

pytestmark = requires_corpus

DS_CNN = CORPUS / "tflite" / "armzoo__ds_cnn_small_int16.tflite"
# TFLite's int16 SOFTMAX reads exp and 1/(1+x) from 513-entry lookup tables with linear
# interpolation; the exact softmax is within 1e-3 of its output range (33 steps of 1/32768).
# Every other kernel here requantizes with a 16-bit multiplier: one step at most.
SOFTMAX_STEPS = 33


@pytest.fixture(scope="module")
def subgraph():
    return read_model(DS_CNN).subgraphs[0]


def int64_biases(subgraph) -> list:
    return [t for t in subgraph.tensors if t.dtype == "int64" and t.data is not None]


def test_int64_biases_are_scale_times_their_integers(subgraph):
    biases = int64_biases(subgraph)
    assert len(biases) == 10 and {t.dtype for t in biases} == {"int64"}
    for bias in biases:
        q = bias.quantization
        expected = (q.scale.astype(np.float64) * bias.data.astype(np.float64)).astype(np.float32)
        np.testing.assert_array_equal(dequantize(bias), expected)
        args = bias.quant
        assert (args.bit_width, args.signed) == (64, True)


def test_bias_quantizers_hold_the_real_bias(subgraph):
    model = tflite2qonnx.convert(DS_CNN)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    wide = [n for n in model.graph.node if n.op_type == "Quant" and inits[n.input[3]] == 64]
    assert len(wide) == len(int64_biases(subgraph))
    for node in wide:
        # real biases of a keyword spotter are small; raw int64 values are in the thousands
        assert np.max(np.abs(inits[node.input[0]])) < 100


def test_every_operator_within_its_kernel_rounding_of_the_interpreter(subgraph):
    per_op = steps_per_op(DS_CNN, subgraph, xnnpack=False)
    assert {name for _, name in per_op} >= {"CONV_2D", "DEPTHWISE_CONV_2D", "SOFTMAX"}
    for (index, name), steps in per_op.items():
        bound = SOFTMAX_STEPS if name == "SOFTMAX" else 1
        assert steps.max() <= bound, f"operator {index} {name}: {steps.max()} steps"


def test_end_to_end_keyword_is_the_interpreters():
    pairs = compare(tflite2qonnx.convert(DS_CNN), reference_interpreter(DS_CNN), n_inputs=8)
    for pair in pairs:
        assert pair.ours.argmax() == pair.reference.argmax()
        # probabilities on 1/32768 steps: within 1e-3 of the output range
        assert pair.steps().max() <= SOFTMAX_STEPS
