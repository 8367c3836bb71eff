"""Dynamic-range quantized models: int8 weights, float activations.

QONNX says this exactly (a Quant on the weights, none on activations); QDQ cannot. TFLite's
hybrid kernels additionally quantize each input on the fly to int8; the converted graph
computes that quantization with standard ops (ops.hybrid.fully_connected), so it matches the kernel.
"""

from __future__ import annotations

import numpy as np
import pytest
from litert_compare import reference_interpreter, run_ours
from tf_models import _tf

import tflite2qonnx
from tflite2qonnx.quantization import dequantize
from tflite2qonnx.reader import read_model

pytestmark = pytest.mark.keras


@pytest.fixture(scope="module")
def dense_model() -> bytes:
    tf = _tf()
    tf.keras.utils.set_random_seed(11)
    inp = tf.keras.Input(batch_size=1, shape=(64,))
    model = tf.keras.Model(inp, tf.keras.layers.Dense(48, bias_initializer="random_uniform")(inp))
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]  # no representative data: hybrid
    return converter.convert()


def test_only_the_weights_are_quantized(dense_model):
    (sg,) = read_model(dense_model).subgraphs
    (fc,) = [op for op in sg.operators if op.name == "FULLY_CONNECTED"]
    assert sg.tensors[fc.inputs[1]].dtype == "int8"
    model = tflite2qonnx.convert(dense_model)
    quants = [n for n in model.graph.node if n.op_type == "Quant"]
    inits = {t.name for t in model.graph.initializer}
    assert len(quants) == 1 and quants[0].input[0] in inits
    assert model.graph.input[0].type.tensor_type.elem_type == 1  # float in, float out


def test_output_is_the_hybrid_kernel_bit_for_bit(dense_model):
    """The kernel quantizes each input row on the fly (asymmetric, per-channel weights);
    ops.hybrid.fully_connected follows its float32 steps, so the outputs are equal, not merely
    close, and
    differ from the float layer on the dequantized weights (what the kernel does not do)."""
    (sg,) = read_model(dense_model).subgraphs
    (fc,) = [op for op in sg.operators if op.name == "FULLY_CONNECTED"]
    w = dequantize(sg.tensors[fc.inputs[1]]).astype(np.float64)
    b = sg.tensors[fc.inputs[2]].data.astype(np.float64)
    model = tflite2qonnx.convert(dense_model)
    it = reference_interpreter(dense_model)
    (ind,), (outd,) = it.get_input_details(), it.get_output_details()
    rng = np.random.default_rng(6)
    for _ in range(8):
        x = rng.uniform(-1, 1, (1, 64)).astype(np.float32)
        it.set_tensor(ind["index"], x)
        it.invoke()
        theirs = it.get_tensor(outd["index"])
        ours = run_ours(model, {model.graph.input[0].name: x})[model.graph.output[0].name]
        np.testing.assert_array_equal(ours, theirs)
        assert np.abs(theirs - (x @ w.T + b)).max() > 1e-5  # the kernel really rounds x
