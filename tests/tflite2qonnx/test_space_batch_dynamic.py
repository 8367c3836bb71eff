"""SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND whose paddings and crops are computed at run time
from a dynamic height and width (TF's dilated convolution; tflite-support's
dilated_conv.tflite was refused with "needs static non-batch dims"): converted with the
shapes read at run time, and equal to the interpreter on inputs of several sizes."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from ai_edge_litert.interpreter import Interpreter, OpResolverType
from control_flow_models import in_fresh_process
from space_batch_models import CHANNELS, MODES

import tflite2qonnx.api
from qonnx_ingest.quant_lowering import lower_quants

# (batch, height, width): each padded dim holds the 3x3 kernel after the split (H >= 4, W >= 7);
# padding to a multiple of the block of none, one and two rows, and batches of 1 to 3
SIZES = [(1, 6, 7), (1, 7, 11), (3, 5, 9), (2, 13, 8)]


@pytest.fixture(scope="module")
def models() -> dict[str, bytes]:
    specs = {mode: ("build", {"mode": mode}) for mode in MODES}
    return in_fresh_process(specs, module="space_batch_models")


def _interpreter_run(data: bytes, x: np.ndarray) -> tuple[np.ndarray, dict]:
    it = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    (inp,) = it.get_input_details()
    it.resize_tensor_input(inp["index"], x.shape)
    it.allocate_tensors()
    it.set_tensor(inp["index"], x)
    it.invoke()
    (out,) = it.get_output_details()
    return it.get_tensor(out["index"]), out


@pytest.mark.parametrize("mode", MODES)
def test_run_time_paddings_and_crops_match_the_interpreter_at_every_size(models, mode):
    data = models[mode]
    # int8: --bit-exact, so the data movement is checked value for value, not within a step
    model = tflite2qonnx.api.convert(data, bit_exact=mode == "int8")
    ops = {n.op_type for n in model.graph.node}
    assert "Shape" in ops  # the paddings really are computed at run time
    # Quant written out as the standard ops qonnx evaluates it with, as --verify runs it
    session = ort.InferenceSession(lower_quants(model).SerializeToString())
    (inp,) = session.get_inputs()
    assert inp.shape[-1] == CHANNELS  # dynamic spatial dims keep TFLite's NHWC layout
    rng = np.random.default_rng(11)
    for size in SIZES:
        if mode == "float":
            x = rng.uniform(-1, 1, (*size, CHANNELS)).astype(np.float32)
            ref, _ = _interpreter_run(data, x)
            (ours,) = session.run(None, {inp.name: x})
            assert ours.shape == ref.shape, size
            np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5, err_msg=str(size))
            continue
        q = rng.integers(-128, 128, (*size, CHANNELS)).astype(np.int8)
        ref, out = _interpreter_run(data, q)
        it_in = Interpreter(model_content=data).get_input_details()[0]["quantization"]
        x = (it_in[0] * (q.astype(np.float32) - it_in[1])).astype(np.float32)
        (ours,) = session.run(None, {inp.name: x})
        scale, zero_point = out["quantization"]
        ours_q = np.round(ours.astype(np.float64) / scale) + zero_point
        assert ours_q.shape == ref.shape, size
        np.testing.assert_array_equal(ours_q, ref, err_msg=str(size))
