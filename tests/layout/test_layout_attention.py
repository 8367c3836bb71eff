"""Attention blocks between convolutions stay in one layout: Transpose counts derived by hand
from each model's structure, and agreement with the TFLite interpreter.

How the counts are derived (S = the TRANSPOSE ops TFLite's converter wrote, checked first):
every Transpose of the source stays unless it meets a layout Transpose that undoes it; the
layout pass adds one where a channels-first tensor enters the token world (its elements
really move) and one where tokens come back to a Conv, a chain of Reshapes and
Transposes whose composite moves no element is a Reshape, and the TRANSPOSE TFLite writes
after q·kᵀ goes (kᵀ·qᵀ is computed instead, from the same two Transposes with other perms).

tf2onnx 1.17 (``python -m tf2onnx.convert --tflite``, opset 13) leaves 11 Transposes on vit,
mobilevit and speech and 15 on spatial (float and int8 alike), measured when these tests were
written.
"""

from __future__ import annotations

import numpy as np
import pytest

import tflite2qonnx
from tflite2qonnx.reader import read_model

pytestmark = pytest.mark.keras

# name: (TRANSPOSE ops in the source, Transposes after conversion)
EXPECTED = {
    # S = 7: q, k, scores, v, heads back (attention); open, close (LayerNorm). Scores: -1.
    # +1 Conv output -> tokens [16, 8]. The LayerNorm's closing TRANSPOSE, the Reshape to
    # [1, 4, 4, 8] and the Transpose to NCHW for the last Conv compose to a Reshape: -1.
    # 7 - 1 + 1 - 1 = 6.
    "vit": (7, 6),
    # S = 7: unfold, fold, 5 in attention (scores: -1). The NCHW -> NHWC Transpose in front
    # of the unfold composes with the unfold's into one; the fold's composes with the one to
    # NCHW: 7 - 1 = 6.
    "mobilevit": (7, 6),
    # S = 7 as vit (scores: -1). +1 input [12, 5] -> NCHW [5, 1, 12] for the Conv1D, +1 Conv
    # output -> tokens; LayerNorm close + Reshape + to NCHW compose to a Reshape (-1); +1
    # second Conv output -> the [1, 12, 8] Reshape in front of the average.
    # 7 - 1 + 1 + 1 - 1 + 1 = 8.
    "speech": (7, 8),
    # S = 9: 5 in attention (over two axes, the scores pass through a 6-D Reshape: they
    # stay), open + close of 2 LayerNorms. The residual stream is NCHW: each LayerNorm's
    # opening Transpose composes with the one back to NHWC (-2); the attention output and
    # the MLP output (MatMul results) go to NCHW for the residual Adds (+2): 9.
    "spatial": (9, 9),
}
# int8 once (vit): the count is the same as float's, and each TensorFlow build costs ~10 s
PARAMS = [pytest.param(n, False, id=f"{n}-float") for n in EXPECTED]
PARAMS.append(pytest.param("vit", True, id="vit-int8"))

_BUILT: dict[tuple[str, bool], bytes] = {}


def built(name: str, quantized: bool) -> bytes:
    if (name, quantized) not in _BUILT:
        from attention_models import build

        _BUILT[(name, quantized)] = build(name, quantized)
    return _BUILT[(name, quantized)]


def count(model, op_type: str) -> int:
    return sum(n.op_type == op_type for n in model.graph.node)


@pytest.mark.parametrize("name, quantized", PARAMS)
def test_attention_block_leaves_the_hand_counted_transposes(name, quantized):
    data = built(name, quantized)
    source, expected = EXPECTED[name]
    ops = [op.name for op in read_model(data).subgraphs[0].operators]
    assert "BATCH_MATMUL" in ops
    assert ops.count("TRANSPOSE") == source  # the structure the count was derived from
    assert count(tflite2qonnx.convert(data), "Transpose") == expected


def invoke(it, x: np.ndarray) -> np.ndarray:
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


@pytest.mark.parametrize("name, quantized", PARAMS)
def test_attention_block_agrees_with_the_interpreter(name, quantized):
    """Float: within 1e-4 of the reference kernels. int8: no more steps from the reference
    kernels than TFLite's own XNNPACK path is (the issue's end-to-end bound)."""
    pytest.importorskip("ai_edge_litert", reason="the TFLite interpreter (verify extra)")
    from litert_compare import reference_interpreter, run_ours

    data = built(name, quantized)
    model = tflite2qonnx.convert(data)
    ref, xnn = reference_interpreter(data), reference_interpreter(data, xnnpack=True)
    detail_in = ref.get_input_details()[0]
    out_name = ref.get_output_details()[0]["name"]
    rng = np.random.default_rng(5)
    for _ in range(3):
        real = rng.uniform(-1, 1, detail_in["shape"]).astype(np.float32)
        if not quantized:
            want = invoke(ref, real)
            got = run_ours(model, {detail_in["name"]: real})[out_name]
            assert np.max(np.abs(got - want)) <= 1e-4 * max(1.0, float(np.max(np.abs(want))))
            continue
        s_in, z_in = detail_in["quantization"]
        q = np.clip(np.round(real / s_in) + z_in, -128, 127).astype(np.int8)
        want, other = invoke(ref, q).astype(np.int64), invoke(xnn, q).astype(np.int64)
        s_out, z_out = ref.get_output_details()[0]["quantization"]
        real_q = (s_in * (q.astype(np.float64) - z_in)).astype(np.float32)
        got = run_ours(model, {detail_in["name"]: real_q})[out_name]
        steps = np.abs(np.round(got.astype(np.float64) / s_out) + z_out - want)
        assert steps.max() <= max(1, np.abs(other - want).max())
