"""--batch-size / --input-shape: a dynamic TFLite batch made static, as FINN, hls4ml and qonnx's
inference cost need, computing what the TFLite interpreter computes at that batch."""

from __future__ import annotations

import subprocess

import numpy as np
import onnx
import pytest

from qonnx_ingest.errors import InputError
from support import CORPUS, requires_corpus, run_module
from tflite2qonnx import convert

HELLO = CORPUS / "tflite" / "tflm__hello_world_int8.tflite"  # input [batch, 1]: dynamic batch
PERSON = CORPUS / "tflite" / "tflm__person_detect.tflite"  # input [1, 96, 96, 1]: static
INPUT = "serving_default_dense_input:0"
# hello_world is FULLY_CONNECTED 1 -> 16 -> 16 -> 1: 16 + 256 + 16 multiply-accumulates a sample
MACS_PER_SAMPLE = 16 + 16 * 16 + 16

pytestmark = [requires_corpus, pytest.mark.filterwarnings("ignore::UserWarning")]


def dims(vi: onnx.ValueInfoProto) -> list:
    return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]


def total_macs(model: onnx.ModelProto, tmp_path) -> float:
    from qonnx.util.inference_cost import inference_cost

    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    cost = inference_cost(str(path), output_json=None, output_onnx=None, discount_sparsity=False)
    return cost["total_cost"]["total_macs"]


def test_dynamic_batch_counts_no_macs_and_a_static_one_counts_them_all(tmp_path):
    assert dims(convert(HELLO).graph.input[0]) == ["batch", 1]
    assert total_macs(convert(HELLO), tmp_path) == 0  # why the option exists
    model = convert(HELLO, batch_size=4)
    assert dims(model.graph.input[0]) == [4, 1] and dims(model.graph.output[0]) == [4, 1]
    inner = [d for v in model.graph.value_info for d in v.type.tensor_type.shape.dim]
    assert inner and all(d.dim_value > 0 for d in inner)
    assert total_macs(model, tmp_path) == 4 * MACS_PER_SAMPLE


def test_execute_onnx_returns_the_batch_and_the_interpreters_numbers():
    interpreter = pytest.importorskip(
        "ai_edge_litert.interpreter",
        reason="the TFLite interpreter is the reference: pip install '.[verify]'",
    )
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx

    model = convert(HELLO, batch_size=5)
    x = np.linspace(0.0, 6.0, 5, dtype=np.float32).reshape(5, 1)
    ours = execute_onnx(ModelWrapper(model), {INPUT: x})[model.graph.output[0].name]
    assert ours.shape == (5, 1)

    it = interpreter.Interpreter(model_path=str(HELLO))
    (d_in,), (d_out,) = it.get_input_details(), it.get_output_details()
    it.resize_tensor_input(d_in["index"], [5, 1])
    it.allocate_tensors()
    s_in, z_in = d_in["quantization"]
    s_out, z_out = d_out["quantization"]
    it.set_tensor(d_in["index"], np.clip(np.round(x / s_in) + z_in, -128, 127).astype(np.int8))
    it.invoke()
    reference = s_out * (it.get_tensor(d_out["index"]).astype(np.float64) - z_out)
    # one rounding per op, as XNNPACK: at most one output step from the builtin kernels
    assert np.max(np.abs(ours - reference)) <= s_out * 1.01
    assert np.mean(np.isclose(ours, reference, atol=s_out * 0.01)) >= 0.8


def test_input_shape_names_an_input_and_fixes_only_its_dynamic_dimensions():
    model = convert(HELLO, input_shapes={INPUT: (3, 1)})
    assert dims(model.graph.input[0]) == [3, 1]
    with pytest.raises(InputError, match=r"dimension 1 is fixed at 1 by the model"):
        convert(HELLO, input_shapes={INPUT: (3, 2)})
    with pytest.raises(InputError, match=r"gives 3 dimensions .* which has 2"):
        convert(HELLO, input_shapes={INPUT: (3, 1, 1)})
    listed = rf"'nope', which is not a model input; the inputs are: '{INPUT}' \[\?,1\]"
    with pytest.raises(InputError, match=listed):
        convert(HELLO, input_shapes={"nope": (1, 1)})


def test_a_static_batch_is_the_models_own():
    assert dims(convert(PERSON, batch_size=1).graph.input[0]) == [1, 1, 96, 96]
    # the name quoted: "the batch of input input is fixed" read as a typo
    with pytest.raises(InputError, match="the batch of input 'input' is fixed at 1 by the model"):
        convert(PERSON, batch_size=2)


def run_cli(*args, cwd) -> subprocess.CompletedProcess:
    return run_module("tflite2qonnx", *args, cwd=cwd)


def test_cli_batch_size_verifies_against_the_interpreter_at_that_batch(tmp_path):
    pytest.importorskip(
        "ai_edge_litert", reason="--verify needs the TFLite interpreter: pip install '.[verify]'"
    )
    result = run_cli(HELLO, "-o", "m.onnx", "--batch-size", "3", "--verify", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "verify: ok, " in result.stdout and "  on 16 inputs; " in result.stdout
    assert dims(onnx.load(tmp_path / "m.onnx").graph.input[0]) == [3, 1]


def test_cli_input_shape_and_its_errors(tmp_path):
    result = run_cli(HELLO, "-o", "m.onnx", "--input-shape", f"{INPUT}=2,1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert dims(onnx.load(tmp_path / "m.onnx").graph.input[0]) == [2, 1]
    bad = run_cli(HELLO, "-o", "n.onnx", "--input-shape", f"{INPUT}=2,x", cwd=tmp_path)
    assert bad.returncode == 2 and "positive sizes like 1,3,224,224" in bad.stderr
    assert not (tmp_path / "n.onnx").exists()
