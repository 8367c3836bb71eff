"""hgq2 lives in a directory of its own (its wheel also ships a ``qkeras``): the pin, where
``flavour`` finds it, which subprocess environments carry it, and the refusal without it.
No TensorFlow is imported here."""

import os
import re
import sys
from pathlib import Path

import pytest

from qkeras2qonnx import flavour, load
from qonnx_ingest.errors import InputError

ROOT = Path(__file__).resolve().parents[2]


def test_setup_installs_the_pinned_hgq2_apart_keeping_only_hgq():
    setup = (ROOT / "scripts/setup.sh").read_text()
    pins = re.findall(r"^hgq2==\S+$", (ROOT / "constraints.txt").read_text(), re.M)
    assert pins == [flavour.HGQ2_PIN]
    assert "--target .venv/hgq2 \"$(grep '^hgq2==' constraints.txt)\"" in setup
    assert "! -name 'hgq' ! -name 'hgq2-*'" in setup  # its `qkeras` package is removed


def test_hgq2_is_on_the_keras3_path_only(tmp_path, monkeypatch):
    (tmp_path / "hgq").mkdir()
    (tmp_path / "hgq" / "__init__.py").write_text("")
    monkeypatch.setenv(flavour.HGQ2_DIR_VARIABLE, str(tmp_path))
    assert flavour.hgq2_dir() == tmp_path
    assert flavour.qkeras3_dir() is not None, "qkeras-v3 is missing: run scripts/setup.sh"
    keras3 = flavour.qkeras3_environment({"PYTHONPATH": ""})["PYTHONPATH"].split(os.pathsep)
    assert str(tmp_path) in keras3
    keras2 = flavour.keras2_environment({"PYTHONPATH": str(tmp_path)})["PYTHONPATH"]
    assert str(tmp_path) not in keras2.split(os.pathsep)


def test_a_file_naming_hgq_classes_without_hgq2_is_refused_with_the_install_command(
    tmp_path, monkeypatch
):
    monkeypatch.setenv(flavour.HGQ2_DIR_VARIABLE, str(tmp_path / "absent"))
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    layer = {"module": "hgq.layers.core.dense", "class_name": "QDense", "config": {}}
    path = tmp_path / "m.keras"
    with pytest.raises(InputError, match="hgq2 is not installed") as info:
        load._refuse_lambda({"config": {"layers": [layer]}}, False, path)
    # where hgq2_dir looks without the variable: beside this environment, wherever its venv is
    target = Path(sys.prefix) / "hgq2"
    assert f"pip install --no-deps --target {target} {flavour.HGQ2_PIN}" in str(info.value)
