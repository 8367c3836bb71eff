"""qkeras2qonnx --verify and --format qcdq on the example jet tagger (QDense 6-bit weights,
a 6-bit unsigned quantized_relu, softmax).

QKeras quantizers round half to even with no zero point, so the QCDQ form is exact: it runs in
onnxruntime and equals qonnx's execution of the QONNX model, and QKeras's own predict within
the QKeras rule (1e-6 relative). A model with one weight's sign flipped must fail --verify.
"""

from __future__ import annotations

import copy

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from qkeras_helpers import keras  # noqa: F401  (TF_USE_LEGACY_KERAS before TensorFlow)

from qonnx_ingest.execute import execute_qonnx
from qonnx_ingest.quant_info import WEIGHT, quantized_tensors
from qonnx_ingest.verification import VerificationError
from support import EXAMPLES

MODEL = EXAMPLES / "qkeras_jet_dnn.h5"

pytestmark = pytest.mark.keras


@pytest.fixture(scope="module")
def converted():
    from qkeras2qonnx.environment.load import load_model
    from qkeras2qonnx.pipeline import convert

    return load_model(MODEL), convert(MODEL)


def with_flipped_weight(model: onnx.ModelProto) -> onnx.ModelProto:
    bad = copy.deepcopy(model)
    (weight, *_) = [q for q in quantized_tensors(bad) if q.role == WEIGHT]
    tensor = next(t for t in bad.graph.initializer if t.name == weight.tensor)
    values = numpy_helper.to_array(tensor).copy()
    index = np.unravel_index(np.argmax(np.abs(values)), values.shape)
    values[index] = -values[index]
    tensor.CopyFrom(numpy_helper.from_array(values, tensor.name))
    return bad


def run(*argv) -> int:
    from qkeras2qonnx.cli import main

    return main([str(a) for a in argv])


# ----------------------------------------------------------------------------- QCDQ


def test_qcdq_in_onnxruntime_equals_qonnx_and_qkeras(converted):
    import onnxruntime as ort

    from qonnx_ingest.qcdq import to_qcdq

    keras_model, model = converted
    qcdq = to_qcdq(model, strict=True)  # nothing to refuse: ROUND, zero point 0
    assert "Quant" not in {n.op_type for n in qcdq.graph.node}
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # no fusion
    session = ort.InferenceSession(
        qcdq.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    # jet features, batch 64; wide enough that the 6-bit relu clips
    x = np.random.default_rng(11).normal(0, 2, (64, 16)).astype(np.float32)
    (ours,) = session.run(None, {"jets": x})
    theirs = execute_qonnx(model, {"jets": x})["softmax"]
    np.testing.assert_array_equal(ours, theirs)
    qkeras = np.asarray(keras_model(x, training=False))
    np.testing.assert_allclose(ours, qkeras, rtol=0, atol=1e-6)


def test_verify_agrees_with_qkeras(converted):
    from qkeras2qonnx.reference import verify

    keras_model, model = converted
    checked = verify(keras_model, model)
    assert checked.passed and checked.inputs == 16
    (a,) = checked.outputs
    assert a.name == "softmax" and a.argmax_agreement == 1.0
    assert a.max_abs_error <= 1e-6
    # ROUND and no zero point anywhere: the exact QCDQ lowering lets onnxruntime run it
    assert checked.runner == "onnxruntime after QCDQ lowering; source: QKeras predict"


def test_a_corrupted_model_fails_verify(converted):
    from qkeras2qonnx.reference import verify

    keras_model, model = converted
    checked = verify(keras_model, with_flipped_weight(model), inputs=4)
    assert not checked.passed and checked.outputs[0].max_abs_error > 1e-3


def test_fixed_batch_is_fed_whole_batches(converted, tmp_path):
    from qkeras2qonnx.pipeline import convert
    from qkeras2qonnx.reference import verify

    keras_model, _ = converted
    model = convert(MODEL, batch_size=4)
    checked = verify(keras_model, model, inputs=6)  # two batches of 4, the last one cycled
    assert checked.passed and checked.inputs == 6


def test_convert_verify_true(monkeypatch, tmp_path):
    import qkeras2qonnx.pipeline as pipeline

    out = tmp_path / "jet.onnx"
    pipeline.convert(MODEL, out, verify=True)
    assert out.exists()

    original = pipeline.convert_keras
    monkeypatch.setattr(
        pipeline, "convert_keras", lambda *a, **k: with_flipped_weight(original(*a, **k))
    )
    bad_out = tmp_path / "bad.onnx"
    with pytest.raises(VerificationError, match="verification failed on output softmax"):
        pipeline.convert(MODEL, bad_out, verify=True)
    assert not bad_out.exists()


# ----------------------------------------------------------------------------- the command


def test_cli_verify_prints_the_figures(tmp_path, capsys):
    assert run(MODEL, "-o", tmp_path / "jet.onnx", "--verify") == 0
    out = capsys.readouterr().out
    verdict, context = out.splitlines()[1:3]  # after the "wrote" line: the verdict first
    assert verdict.startswith("verify: ok, max abs error ") and " from the Keras model, " in verdict
    assert verdict.endswith("argmax agrees on 100.0%")
    assert context == (
        "  on 16 inputs; converted model run by onnxruntime after QCDQ lowering; "
        "source: QKeras predict"
    )


def test_cli_disagreement_exits_3_and_writes_the_model(monkeypatch, tmp_path, capsys, converted):
    import qkeras2qonnx.pipeline as pipeline

    bad = with_flipped_weight(converted[1])
    monkeypatch.setattr(pipeline, "convert", lambda *a, **k: bad)
    out = tmp_path / "bad.onnx"
    assert run(MODEL, "-o", out, "--verify", "--verify-count", "4") == 3
    captured = capsys.readouterr()
    assert captured.err.endswith(
        "qkeras2qonnx: error: --verify: verification failed on output softmax\n"
    )
    assert "verify: FAILED, max abs error " in captured.out
    assert "(needs: max abs error <= 1e-06 * max(1, |QKeras|))" in captured.out
    assert onnx.load(out).SerializeToString() == bad.SerializeToString()


def test_cli_fixed_batch_and_qcdq(tmp_path, capsys):
    out = tmp_path / "jet_qcdq.onnx"
    assert run(MODEL, "-o", out, "--batch-size", "4", "--format", "qcdq", "--verify") == 0
    stdout = capsys.readouterr().out
    assert "converted model run by onnxruntime; source: QKeras predict" in stdout
    written = onnx.load(out)
    assert written.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 4
    assert "Quant" not in {n.op_type for n in written.graph.node}


@pytest.mark.parametrize("form", ["named", "positional"])
def test_cli_verify_inputs(tmp_path, capsys, form):
    samples = np.random.default_rng(4).normal(0, 1.5, (5, 16)).astype(np.float32)
    path = tmp_path / "jets.npz"
    np.savez(path, jets=samples) if form == "named" else np.savez(path, samples)
    assert run(MODEL, "-o", tmp_path / "jet.onnx", "--verify", "--verify-inputs", path) == 0
    assert "  on 5 inputs; " in capsys.readouterr().out


@pytest.mark.parametrize("sample", [(12,), (4, 4)], ids=["fewer_values", "as_many_values"])
def test_cli_verify_inputs_of_the_wrong_shape(sample, tmp_path, capsys):
    """An array with as many values per sample in another shape is refused, not reshaped."""
    path = tmp_path / "jets.npz"
    np.savez(path, jets=np.zeros((5, *sample), np.float32))
    out = tmp_path / "jet.onnx"
    assert run(MODEL, "-o", out, "--verify", "--verify-inputs", path) == 2
    err = capsys.readouterr().err
    assert f"{path}: jets has samples of shape {sample}, the Keras model takes (16,)" in err
    assert not out.exists()
