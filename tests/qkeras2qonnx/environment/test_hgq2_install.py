"""hgq2 lives in a directory of its own (its wheel also ships a ``qkeras``): the pin, where
``flavour`` finds it, which subprocess environments carry it, and the refusal without it.
No TensorFlow is imported here."""

import configparser
import os
import re
import sys
from pathlib import Path

import pytest

from qkeras2qonnx import apart
from qkeras2qonnx.environment import flavour, load
from qonnx_ingest.errors import InputError

ROOT = Path(__file__).resolve().parents[3]


def test_setup_installs_the_hgq2_extra_and_the_pinned_hgq2_apart():
    setup = (ROOT / "scripts/setup.sh").read_text()
    pins = re.findall(r"^hgq2==\S+$", (ROOT / "constraints.txt").read_text(), re.M)
    assert pins == [flavour.HGQ2_PIN] == [apart.LIBRARIES["hgq2"][0]]
    assert re.search(r'-e "\.\[[a-z0-9,]*\bhgq2\b', setup)
    assert ".venv/bin/python -m qkeras2qonnx.apart qkeras-v3 hgq2" in setup


def test_the_hgq2_extra_brings_hgq2s_dependencies_and_what_conversion_needs():
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    extras = {k: set(v.split()) for k, v in setup["options.extras_require"].items()}
    assert extras["keras"] <= extras["hgq2"]
    assert {"keras", "quantizers", "tqdm"} <= extras["hgq2"]  # hgq2 0.2.0's Requires-Dist
    assert not any(name.startswith("hgq2") for name in extras["hgq2"])  # it ships a `qkeras`


def test_apart_installs_the_pin_without_deps_and_keeps_only_hgq(tmp_path, monkeypatch):
    """pip is faked (no network): it lays out what the hgq2 wheel installs."""
    calls = []

    def fake_pip(argv, check):
        calls.append(argv)
        target = Path(argv[argv.index("--target") + 1])
        for name in ("hgq", "qkeras", "hgq2-0.2.0.dist-info", "bin"):
            (target / name).mkdir(parents=True)
        (target / "stray.py").write_text("")

    monkeypatch.setattr(apart.subprocess, "run", fake_pip)
    (tmp_path / "hgq2" / "old").mkdir(parents=True)  # a previous install is replaced
    target = apart.install("hgq2", tmp_path)
    assert target == tmp_path / "hgq2"
    assert calls == [[sys.executable, "-m", "pip", "install", "--quiet",
                      "--disable-pip-version-check", "--no-deps", "--target", str(target),
                      flavour.HGQ2_PIN]]  # fmt: skip
    assert sorted(p.name for p in target.iterdir()) == ["hgq", "hgq2-0.2.0.dist-info"]


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
    assert f"installs {flavour.HGQ2_PIN} into {target}" in str(info.value)
    # its dependencies, pinned, then hgq2 apart (apart's pip command: the test above)
    assert f'pip install -c constraints.txt ".[hgq2]" (run in {ROOT})' in str(info.value)
    assert f"{sys.executable} -m qkeras2qonnx.apart hgq2" in str(info.value)
