"""dp_net: 2,338 operators whose unrolled recurrences share their weights (776 FULLY_CONNECTED
on a few buffers). The output keeps one initializer per distinct constant and still computes
what the interpreter computes."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from litert_compare import compare, reference_interpreter
from onnx import numpy_helper

import tflite2qonnx
from support import CORPUS, requires_corpus
from tflite2qonnx.reader import read_model

pytestmark = requires_corpus

DP_NET = CORPUS / "tflite" / "tflm__dp_net.tflite"
# log(1 + exp(x)) saturates where exp overflows: one ulp of x decides between FLT_MAX (log 88.72)
# and inf, and TFLite's own two CPU paths disagree there too (XNNPACK: 88.38).
SATURATED = float(np.log(np.finfo(np.float32).max)) - 0.5


@pytest.fixture(scope="module")
def model():
    return tflite2qonnx.convert(DP_NET)


@pytest.fixture(scope="module")
def weight_bytes():
    """The TFLite file's constant-tensor bytes (2.1 MB)."""
    return sum(t.data.nbytes for t in read_model(DP_NET).subgraphs[0].tensors if t.data is not None)


def test_one_initializer_per_distinct_constant(model, weight_bytes):
    digests = [
        hashlib.sha256(numpy_helper.to_array(t).tobytes()).hexdigest()
        + str((t.data_type, tuple(t.dims)))
        for t in model.graph.initializer
    ]
    assert len(digests) == len(set(digests))
    stored = sum(numpy_helper.to_array(t).nbytes for t in model.graph.initializer)
    assert stored <= 1.05 * weight_bytes  # 2,089 initializers (20.7 MB) before sharing


def test_outputs_agree_with_the_interpreter(model):
    pairs = compare(model, reference_interpreter(DP_NET), n_inputs=2, low=0.0, high=1.0)
    assert len(pairs) == 10
    for pair in pairs:
        ours, ref = pair.ours, pair.reference
        saturated = ~np.isfinite(ours) & (ref >= SATURATED)
        assert np.count_nonzero(saturated) <= 2, pair.name
        bound = 1e-4 * max(1.0, float(np.max(np.abs(ref))))
        assert np.max(np.abs(np.where(saturated, ref, ours) - ref)) <= bound, pair.name


def test_output_is_at_most_a_tenth_over_the_weights_with_readable_node_names(model, weight_bytes):
    """The compact form (qonnx_ingest.compact): 3,384 nodes on 2.1 MB of weights."""
    # 1.6x with full names, 1.134x with decimal tensor names (t3507) and MatMul + bias Add;
    # base-62 tensor names (3 characters at most) and one Gemm per biased MatMul: 1.097x.
    # What remains over the weights: every tensor's value_info (qonnx's executor needs it)
    # and the node names.
    assert model.ByteSize() <= 1.1 * weight_bytes
    assert sum(n.op_type == "Gemm" for n in model.graph.node) == 768
    names = [n.name for n in model.graph.node]
    assert len(set(names)) == len(names)
    assert all(";" not in n and 0 < len(n) <= 32 for n in names)
    assert "forward_gru_1/MatMul_17/MatMul" in names  # the tail of the TFLite tensor's name
    # graph inputs and outputs keep their TFLite names and shapes
    assert [v.name for v in model.graph.input] == ["input_1", "input_2", "input_3"]
    for v in (*model.graph.input, *model.graph.output):
        assert v.type.tensor_type.HasField("shape"), v.name
