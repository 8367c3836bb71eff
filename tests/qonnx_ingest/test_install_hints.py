"""Install hints name a command that works where the code runs, with the verified pins: in a
clone, or installed from one with a plain ``pip install .``, the clone itself with
constraints.txt; from an index, the distribution plus the pins of the extra's packages. A
missing module is named as the package a user knows (TensorFlow, not h5py)."""

from __future__ import annotations

import configparser
import json
import re
from importlib import metadata

import pytest

from qonnx_ingest import install_hints
from support import ROOT

PINNED = f'pip install -c constraints.txt ".[{{}}]" (run in {ROOT})'


def _extras() -> configparser.SectionProxy:
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    return setup["options.extras_require"]


@pytest.mark.parametrize("extra", ["keras", "hgq2", "verify", "hls4ml"])
def test_in_a_clone_the_hint_installs_the_clone_with_its_pins(extra):
    assert install_hints.extra_hint(extra) == PINNED.format(extra)
    assert (ROOT / "constraints.txt").is_file()
    assert extra in _extras()  # an extra the project declares


class _Installed:
    """What importlib.metadata gives for a distribution pip installed from a directory."""

    def __init__(self, url):
        self.url = url

    def read_text(self, name):
        return json.dumps({"url": self.url, "dir_info": {}}) if name == "direct_url.json" else None


def test_installed_with_pip_install_dot_the_hint_still_names_the_clone_and_its_pins(
    tmp_path, monkeypatch
):
    """A non-editable ``pip install .`` copies the packages into site-packages (no
    constraints.txt beside them); pip's direct_url.json says which clone they came from."""
    monkeypatch.setattr(install_hints, "PROJECT_ROOT", tmp_path)  # site-packages
    monkeypatch.setattr(metadata, "distribution", lambda name: _Installed(ROOT.as_uri()))
    assert install_hints.extra_hint("keras") == PINNED.format("keras")
    # a clone since moved or deleted: the index form, still pinned
    moved = _Installed((tmp_path / "x").as_uri())
    monkeypatch.setattr(metadata, "distribution", lambda name: moved)
    assert install_hints.extra_hint("keras").startswith('pip install "qonnx-ingest[keras]" ')


def test_installed_from_an_index_the_hint_pins_the_extras_packages(tmp_path, monkeypatch):
    monkeypatch.setattr(install_hints, "PROJECT_ROOT", tmp_path)  # site-packages: no pyproject
    monkeypatch.setattr(install_hints, "_installed_from", lambda: None)
    hint = install_hints.extra_hint("keras")
    # without the pins pip picks the newest TensorFlow (2.21 at the time), never tested
    assert hint == (
        'pip install "qonnx-ingest[keras]" tensorflow==2.19.1 tf_keras==2.19.0 QKeras==0.9.0 '
        "tf2onnx==1.17.0"
    )
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    assert setup["metadata"]["name"] == install_hints.DISTRIBUTION


def test_the_hints_pins_are_constraints_txts():
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if re.match(r"^[A-Za-z0-9_.-]+==", line):
            name, version = line.split("==")
            pins[name.lower().replace("_", "-")] = version
    for extra, listed in install_hints.EXTRA_PINS.items():
        assert extra in _extras()
        for pin in listed:
            name, version = pin.split("==")
            assert pins[name.lower().replace("_", "-")] == version, (extra, pin)


@pytest.mark.parametrize(
    "module, named, extra",
    [
        ("tensorflow", "TensorFlow", "keras"),
        ("tensorflow.python.ops", "TensorFlow", "keras"),
        ("quantizers", "quantizers", "hgq2"),
        ("ai_edge_litert.interpreter", "ai-edge-litert", "verify"),
    ],
)
def test_a_missing_module_names_its_package_and_the_extra_that_brings_it(module, named, extra):
    message = install_hints.missing_module_message(module)
    assert message.startswith(named) or f"({named})" in message, message
    assert message.endswith(PINNED.format(extra))


def test_a_module_no_extra_brings_is_not_an_install_problem():
    assert install_hints.missing_module_message("no_such_module_of_ours") is None
    assert install_hints.missing_module_message(None) is None
