"""qkeras2qonnx modes that keep the user's work: a model without a single quantizer warns
(``--strict`` refuses it), a Keras model that cannot run under --verify is still written
(exit 5), a missing qkeras-v3 is exit 2 with a hint for this environment, and the Python API's
format="qcdq" and convert_and_verify."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from qkeras_helpers import keras, set_seeded_weights

from support import assert_cli_fails, run_module, snapshot

NO_QUANTIZER = "no quantizer: the ONNX model is float"
CANNOT_RUN = "the Keras model cannot run on the verification inputs (InvalidArgumentError: "


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """plain.h5: a float Keras Dense model; jet.h5: a QKeras one (quantized weights and
    activation); raises.h5: jet with a Lambda after it that fails when run eagerly."""
    from qkeras import QActivation, QDense, quantized_bits

    k = keras()
    root = tmp_path_factory.mktemp("modes")
    inp = k.Input((6,), name="x")
    plain = k.Model(inp, k.layers.Dense(3, activation="relu", name="fc")(inp))
    set_seeded_weights(plain, 5)
    plain.save(root / "plain.h5")
    h = QDense(4, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="qfc")(inp)
    quantized = k.Model(inp, QActivation("quantized_relu(4,1)", name="act")(h))
    set_seeded_weights(quantized, 7)
    quantized.save(root / "jet.h5")
    # raises when Keras runs it eagerly (--verify's reference), not when traced to ONNX
    tf = "tensorflow"
    eager_only = k.layers.Lambda(
        lambda t: (
            t
            if not __import__(tf).executing_eagerly()
            else __import__(tf).debugging.check_numerics(t / 0.0, "checked")
        ),
        name="eager_only",
    )
    raises = eager_only(quantized.output)
    k.Model(inp, raises).save(root / "raises.h5")
    return root, quantized


def run(argv):
    from qkeras2qonnx.cli import main

    return main([str(a) for a in argv])


@pytest.mark.keras
def test_a_model_without_a_quantizer_warns_and_strict_refuses_it(models, tmp_path, capsys):
    root, _ = models
    out = tmp_path / "plain.onnx"
    assert run([root / "plain.h5", "-o", out, "-q"]) == 0
    captured = capsys.readouterr()
    assert "0 quantizers" in captured.out
    (warning,) = [ln for ln in captured.err.splitlines() if NO_QUANTIZER in ln]
    assert warning.startswith("qkeras2qonnx: warning: ")
    assert out.is_file()
    out.unlink()
    before = snapshot(tmp_path)
    argv = [root / "plain.h5", "-o", out, "-q", "--strict"]
    assert_cli_fails(capsys, run, "qkeras2qonnx", argv, 1, NO_QUANTIZER, "--strict refuses it")
    assert snapshot(tmp_path) == before


@pytest.mark.keras
def test_a_quantized_model_has_no_such_warning(models, tmp_path, capsys):
    root, _ = models
    assert run([root / "jet.h5", "-o", tmp_path / "jet.onnx", "-q", "--strict"]) == 0
    assert NO_QUANTIZER not in capsys.readouterr().err


@pytest.mark.keras
def test_verify_whose_keras_model_cannot_run_writes_the_model_and_exits_5(models, tmp_path, capsys):
    """Was: "internal error: InvalidArgumentError ...", exit 1, nothing written."""
    root, quantized = models
    out = tmp_path / "raises.onnx"
    assert run([root / "raises.h5", "-o", out, "--allow-lambda", "--verify", "-q"]) == 5
    captured = capsys.readouterr()
    assert f"wrote {out}" in captured.out and "verify:" not in captured.out
    (last,) = captured.err.splitlines()[-1:]
    assert last.startswith(f"qkeras2qonnx: verification skipped: {CANNOT_RUN}"), captured.err
    assert "Tensor had" in last and "error:" not in captured.err
    # the conversion stands: what the traced layer computes (the identity) after jet
    model = onnx.load(out)
    x = np.random.default_rng(1).uniform(-2, 2, (4, 6)).astype(np.float32)
    from qonnx_ingest.verification import run_converted

    (got,), _ = run_converted(model, [{model.graph.input[0].name: x}])
    expected = np.asarray(quantized(x, training=False))
    np.testing.assert_allclose(got[model.graph.output[0].name], expected, rtol=1e-6, atol=1e-6)


@pytest.mark.keras
def test_given_inputs_the_keras_model_cannot_run_on_are_an_input_error(models, tmp_path, capsys):
    """The user's own samples failing are theirs to fix (exit 2, nothing written), as in
    tflite2qonnx; and the Python API raises ReferenceUnavailable for seeded ones."""
    import qkeras2qonnx
    from qonnx_ingest.errors import ReferenceUnavailable

    root, _ = models
    npz = tmp_path / "x.npz"
    np.savez(npz, x=np.zeros((2, 6), np.float32))
    out = tmp_path / "raises.onnx"
    before = snapshot(tmp_path)
    argv = [root / "raises.h5", "-o", out, "--allow-lambda", "--verify-inputs", npz, "-q"]
    assert_cli_fails(capsys, run, "qkeras2qonnx", argv, 2, CANNOT_RUN)
    assert snapshot(tmp_path) == before
    with pytest.raises(ReferenceUnavailable, match="cannot run on the verification inputs"):
        qkeras2qonnx.convert_and_verify(root / "raises.h5", out, inputs=2, allow_lambda=True)
    assert not out.exists()


@pytest.mark.keras
def test_convert_format_qcdq_computes_what_qkeras_computes(models):
    import qkeras2qonnx
    from qonnx_ingest.verification import run_converted

    root, quantized = models
    model = qkeras2qonnx.convert(root / "jet.h5", format="qcdq")
    kinds = {n.op_type for n in model.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= kinds and "Quant" not in kinds
    x = np.random.default_rng(0).uniform(-2, 2, (8, 6)).astype(np.float32)
    (got,), _ = run_converted(model, [{model.graph.input[0].name: x}])
    expected = np.asarray(quantized(x, training=False))
    np.testing.assert_allclose(got[model.graph.output[0].name], expected, rtol=1e-6, atol=1e-6)


@pytest.mark.keras
def test_convert_and_verify_returns_the_figures_it_checked(models, tmp_path):
    import qkeras2qonnx
    from qonnx_ingest.verification import Verification

    root, _ = models
    out = tmp_path / "jet.onnx"
    model, figures = qkeras2qonnx.convert_and_verify(root / "jet.h5", out, inputs=5, seed=3)
    assert isinstance(model, onnx.ModelProto) and isinstance(figures, Verification)
    assert figures.passed and figures.inputs == 5
    (agreement,) = figures.outputs
    assert agreement.name == model.graph.output[0].name and agreement.max_abs_error < 1e-6
    assert figures.as_text().startswith("verify: ok, max abs error ")
    assert figures.as_text().endswith(
        "\n  on 5 inputs; converted model run by onnxruntime "
        "after QCDQ lowering; source: QKeras predict"
    )
    assert json.loads(json.dumps(figures.as_dict()))["passed"] is True
    assert onnx.load(out).graph == model.graph


def test_a_missing_qkeras3_is_exit_2_naming_where_this_environment_looks(tmp_path, monkeypatch):
    """Exit 2 like a missing TensorFlow (was 1, "cannot be converted exactly"); the hint's
    directory is the running environment's, wherever its venv lives. Asked for only by a
    model naming QKeras layers (an HGQ2 model needs no qkeras-v3)."""
    source = tmp_path / "model.keras"
    layer = {"module": "qkeras.qlayers", "class_name": "QDense", "registered_name": "qkeras>QDense"}
    with zipfile.ZipFile(source, "w") as archive:  # what qkeras-v3 / Keras 3 writes
        archive.writestr("metadata.json", '{"keras_version": "3.5.0"}')
        archive.writestr("config.json", json.dumps({"config": {"layers": [layer]}}))
    empty = tmp_path / "no-qkeras-v3"
    empty.mkdir()
    monkeypatch.setenv("QKERAS2QONNX_QKERAS3_DIR", str(empty))
    result = run_module("qkeras2qonnx", source, "-q", cwd=tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "this model needs qkeras-v3 on Keras 3, which is not installed" in result.stderr
    target = Path(sys.prefix) / "qkeras-v3"
    assert f"pip install --no-deps --target {target} qkeras-v3==1.2.1" in result.stderr
    assert not (tmp_path / "model.onnx").exists()


@pytest.mark.keras
def test_convert_and_verify_brings_the_figures_back_from_the_other_qkeras_generation():
    """A Keras 3 model in this QKeras 0.9 process is converted and verified in a subprocess
    (``isolated``); its figures come back with the model, measured against Keras 3's own
    predict."""
    import keras as keras3

    import qkeras2qonnx
    from qkeras2qonnx.environment import flavour
    from qonnx_ingest.verification import run_converted

    assert flavour.process_flavour() == flavour.KERAS2
    inp = keras3.Input((5,), name="x")
    model = keras3.Model(inp, keras3.layers.Dense(3, activation="relu", name="fc")(inp))
    rng = np.random.default_rng(8)
    model.set_weights([rng.normal(0, 0.5, w.shape) for w in model.get_weights()])
    with pytest.warns(UserWarning, match=NO_QUANTIZER):  # relayed from the subprocess
        converted, figures = qkeras2qonnx.convert_and_verify(model, inputs=3)
    assert figures.passed and figures.inputs == 3 and len(figures.outputs) == 1
    x = rng.uniform(-1, 1, (4, 5)).astype(np.float32)
    (got,), _ = run_converted(converted, [{converted.graph.input[0].name: x}])
    expected = np.asarray(model(x))
    np.testing.assert_allclose(got[converted.graph.output[0].name], expected, rtol=1e-6, atol=1e-6)
