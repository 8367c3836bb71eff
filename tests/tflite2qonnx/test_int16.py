"""16x8 quantization (int16 activations, int8 weights, int64 biases) on ARM's DS-CNN.

The int64 biases are quantized like int32 ones (real = scale * q); reading them as plain
integers once put every convolution off by its whole range while the conversion succeeded.
Rounding once then left 6% of outputs equal (22 steps apart): the 16x8 kernels requantize with
a 16-bit multiplier and SOFTMAX reads interpolated lookup tables, which the converter now
emulates (``tflite2qonnx.ops.exact.int16``, ``exact_softmax16``) by default and under
--bit-exact alike.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from litert_compare import compare, reference_interpreter, steps_per_op
from onnx import numpy_helper

import tflite2qonnx
from qonnx_ingest.errors import ConversionWarning
from qonnx_ingest.qcdq import to_qcdq
from qonnx_ingest.quant_lowering import lower_quants
from support import CORPUS, requires_corpus
from tflite2qonnx.quantization import dequantize
from tflite2qonnx.reader import read_model

pytestmark = requires_corpus

DS_CNN = CORPUS / "tflite" / "armzoo__ds_cnn_small_int16.tflite"


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


def test_biases_join_the_integer_accumulators_as_their_integers(subgraph):
    # the 16x8 kernels add the int64 bias to the int64 accumulator (on the s_in * s_w grid):
    # the graph adds exactly the stored integers, in float64 where they stay exact
    model = tflite2qonnx.convert(DS_CNN)
    wide = [
        numpy_helper.to_array(t)
        for t in model.graph.initializer
        if t.data_type == onnx.TensorProto.DOUBLE
    ]
    for bias in int64_biases(subgraph):
        assert any(np.array_equal(w.reshape(-1), bias.data.astype(np.float64)) for w in wide)


@pytest.mark.parametrize("bit_exact", [False, True], ids=["default", "bit_exact"])
def test_every_operator_equals_the_interpreter(subgraph, bit_exact):
    # the 16x8 kernels (16-bit requantization, SOFTMAX's lookup tables) are emulated either way
    per_op = steps_per_op(DS_CNN, subgraph, xnnpack=False, bit_exact=bit_exact)
    assert {name for _, name in per_op} >= {"CONV_2D", "DEPTHWISE_CONV_2D", "SOFTMAX"}
    for (index, name), steps in per_op.items():
        assert steps.max() == 0, f"operator {index} {name}: {steps.max()} steps"


@pytest.mark.parametrize("bit_exact", [False, True], ids=["default", "bit_exact"])
def test_end_to_end_equals_the_interpreter_on_16_inputs(bit_exact):
    # Quant nodes as standard ops (as --verify runs it): one onnxruntime session, not qonnx's
    # node-by-node executor (minutes on these 65536-entry tables)
    model = lower_quants(tflite2qonnx.convert(DS_CNN, bit_exact=bit_exact))
    pairs = compare(model, reference_interpreter(DS_CNN), n_inputs=16)
    assert len(pairs) == 16
    for pair in pairs:
        assert pair.steps().max() == 0


def test_channels_last_graph_equals_the_interpreter():
    # the channels-last pass folds each Conv's one weight reader: the int16 input's two bytes
    # share one Conv, and the pooling sum spells out its dilations
    model = tflite2qonnx.convert(DS_CNN, channels_last=True)
    assert any(n.op_type == "Conv" and n.domain != "" for n in model.graph.node)
    pairs = compare(model, reference_interpreter(DS_CNN), n_inputs=1)  # qonnx executor: slow
    for pair in pairs:
        assert pair.steps().max() == 0


def test_qcdq_form_stores_int16_and_equals_the_interpreter_on_16_inputs():
    # QuantizeLinear holds int16 from opset 21; the exact kernels' 32-bit rounding Quants have
    # no QuantizeLinear form and become the standard ops that compute them
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConversionWarning)  # HALF_UP ties: none on these inputs
        model = to_qcdq(tflite2qonnx.convert(DS_CNN))
    assert {(o.domain, o.version) for o in model.opset_import} == {("", 21)}
    assert not {"Quant", "BipolarQuant", "Trunc"} & {n.op_type for n in model.graph.node}
    inits = {t.name: t.data_type for t in model.graph.initializer}
    constants = {
        n.output[0]: n.attribute[0].t.data_type for n in model.graph.node if n.op_type == "Constant"
    }
    stored = [
        constants.get(n.input[2], inits.get(n.input[2]))
        for n in model.graph.node
        if n.op_type == "QuantizeLinear"
    ]
    assert stored and set(stored) == {onnx.TensorProto.INT16}
    pairs = compare(model, reference_interpreter(DS_CNN), n_inputs=16)
    assert len(pairs) == 16
    for pair in pairs:
        assert pair.steps().max() == 0
