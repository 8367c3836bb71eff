"""qkeras2qonnx messages that say what to do next: a TFLite file names tflite2qonnx, a base
install without TensorFlow names the extra to install (exit 2), and several models convert in a
batch. None of these need TensorFlow in this process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile

import pytest

from qkeras2qonnx.cli import main
from support import EXAMPLES, ROOT, assert_cli_fails, run_module, snapshot

TFLITE = EXAMPLES / "int8_dense.tflite"
H5 = EXAMPLES / "qkeras_jet_dnn.h5"

FLOAT_MODEL = (
    "import sys, tf_keras as k; "
    "k.Sequential([k.Input((3,)), k.layers.Dense(2, name='fc')], name='floaty').save(sys.argv[1])"
)
BLOCKER = """
import importlib.abc
import sys

BLOCKED = {blocked!r}


class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, Blocker())
"""


def test_a_tflite_model_is_sent_to_tflite2qonnx(tmp_path, capsys):
    source = tmp_path / "model.h5"  # the suffix does not matter: the bytes say TFLite
    shutil.copy(TFLITE, source)
    before = snapshot(tmp_path)
    assert_cli_fails(
        capsys,
        main,
        "qkeras2qonnx",
        [source, "-q"],
        2,
        "model.h5",
        "this is a TFLite model: use tflite2qonnx",
    )
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("suffix", [".h5", ".json"])
def test_an_hgq_v1_model_is_refused_in_one_line_saying_what_to_do(suffix, tmp_path, capsys):
    """HGQ v1 (keras<3) registers its layers as ``HGQ>...``: named as HGQ v1 and sent to HGQ2,
    not Keras's "Unknown layer: 'HGQ>HQuantize'". HGQ v1 itself is not needed to build one."""
    import h5py

    layers = [
        {"class_name": "InputLayer", "config": {"name": "x", "batch_input_shape": [None, 4]}},
        {"class_name": "HGQ>HQuantize", "config": {"name": "q", "beta": 3e-6}},
        {"class_name": "HGQ>HDense", "config": {"name": "fc", "units": 2}},
    ]
    config = json.dumps({"class_name": "Sequential", "config": {"name": "m", "layers": layers}})
    source = tmp_path / f"hgq1{suffix}"
    if suffix == ".h5":
        with h5py.File(source, "w") as f:  # what tf_keras 2.x writes for a full model
            f.attrs["keras_version"] = "2.15.0"
            f.attrs["model_config"] = config
    else:
        source.write_text(config)
    before = snapshot(tmp_path)
    assert_cli_fails(
        capsys,
        main,
        "qkeras2qonnx",
        [source, "-q"],
        2,
        f"hgq1{suffix}",
        "this is an HGQ v1 model ('HGQ>HDense')",
        "HGQ v1 requires keras<3 and is not supported",
        "port the model to HGQ2",
    )
    assert snapshot(tmp_path) == before


def run_blocked(blocked, *args, cwd) -> subprocess.CompletedProcess:
    site = cwd / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(textwrap.dedent(BLOCKER.format(blocked=blocked)))
    return run_module("qkeras2qonnx", *args, cwd=cwd, timeout=120, path_first=[site])


@pytest.mark.parametrize(
    "blocked, named",
    # TensorFlow is named when it is missing, not h5py (which comes with it)
    [
        (("tensorflow", "h5py"), "TensorFlow"),
        (("tensorflow",), "TensorFlow"),
        (("qkeras",), "QKeras"),
    ],
)
def test_without_the_keras_extra_says_what_to_install_and_exits_2(blocked, named, tmp_path):
    shutil.copy(H5, tmp_path / "jet.h5")
    result = run_blocked(blocked, "jet.h5", "-q", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    # a command that works from this clone (the package is not on an index yet)
    assert f'pip install -c constraints.txt ".[keras]" (run in {ROOT})' in result.stderr
    assert f"and {named} is not installed" in result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jet.h5", "site"]


def hgq2_archive(path):
    """A .keras archive as Keras 3 writes it, naming an HGQ2 layer (no HGQ2 needed)."""
    layer = {"module": "hgq.layers.core.dense", "class_name": "QDense", "config": {}}
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("metadata.json", '{"keras_version": "3.15.1"}')
        archive.writestr("config.json", json.dumps({"config": {"layers": [layer]}}))
    return path


def test_an_hgq2_model_on_a_base_install_hears_the_hgq2_commands(tmp_path, monkeypatch):
    """Not the keras extra's command, which would leave HGQ2's dependencies and hgq2 out."""
    hgq2_archive(tmp_path / "hgq2.keras")
    monkeypatch.setenv("QKERAS2QONNX_HGQ2_DIR", str(tmp_path / "no-hgq2"))
    result = run_blocked(("tensorflow",), "hgq2.keras", "-q", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "and TensorFlow is not installed: " in result.stderr
    hint = f'pip install -c constraints.txt ".[hgq2]" (run in {ROOT}), then '
    assert f"{hint}{sys.executable} -m qkeras2qonnx.apart hgq2" in result.stderr


def test_without_hgq2s_dependencies_an_hgq2_model_says_what_to_install_and_exits_2(
    tmp_path, monkeypatch
):
    """quantizers comes with the hgq2 extra: its absence is exit 2 with that install command
    (was exit 1, "internal error: ModuleNotFoundError"); no qkeras-v3 is asked for."""
    source = hgq2_archive(tmp_path / "hgq2.keras")
    monkeypatch.setenv("QKERAS2QONNX_QKERAS3_DIR", str(tmp_path / "no-qkeras-v3"))
    result = run_blocked(("quantizers",), source.name, "-q", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "quantizers (HGQ2's dependency) is not installed" in result.stderr
    assert f'pip install -c constraints.txt ".[hgq2]" (run in {ROOT})' in result.stderr
    assert "qkeras-v3" not in result.stderr and "internal error" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hgq2.keras", "site"]


def test_the_blocker_really_blocks(tmp_path):
    """The test above would pass vacuously if the blocker never ran."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER.format(blocked=("h5py",)))
    probe = subprocess.run(
        [sys.executable, "-c", "import h5py"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(site)},
    )
    assert probe.returncode == 1 and "No module named 'h5py'" in probe.stderr, probe.stderr


@pytest.mark.keras
def test_a_directory_of_keras_models_converts_each(tmp_path):
    """The batch machinery with the QKeras suffixes: .h5 files are models, notes are not; a
    model's warning line names the file it belongs to (the Keras model's own name does not
    say which file)."""
    (tmp_path / "models").mkdir()
    shutil.copy(H5, tmp_path / "models" / "a.h5")
    made = subprocess.run(  # a float Keras model: converted with a NoQuantizer warning
        [sys.executable, "-c", FLOAT_MODEL, str(tmp_path / "models" / "c.h5")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert made.returncode == 0, made.stderr[-2000:]
    shutil.copy(TFLITE, tmp_path / "models" / "b.h5")  # a TFLite file behind a Keras suffix
    (tmp_path / "models" / "notes.txt").write_text("not a model")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "qkeras2qonnx", "models", "-o", "out/", "--json", "-j", "2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert result.returncode == 2, result.stderr
    document = json.loads(result.stdout)
    status = {m["input"]: (m["status"], m["message"]) for m in document["models"]}
    assert status["models/a.h5"][0] == "converted"
    assert status["models/b.h5"] == (
        "refused",
        "models/b.h5: this is a TFLite model: use tflite2qonnx",
    )
    assert status["models/c.h5"][0] == "converted"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.onnx", "c.onnx"]
    warned = [ln for ln in result.stderr.splitlines() if ln.startswith("qkeras2qonnx: warning:")]
    assert len(warned) == 1, result.stderr
    assert warned[0].startswith("qkeras2qonnx: warning: models/c.h5: floaty: no quantizer")
