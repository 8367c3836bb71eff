"""Install hints name a command that works where the code runs: in a clone, the clone itself
with the verified pins and an extra it declares; from an installed wheel, the distribution."""

from __future__ import annotations

import configparser

import pytest

from qonnx_ingest import install_hints
from support import ROOT


@pytest.mark.parametrize("extra", ["keras", "verify"])
def test_in_a_clone_the_hint_installs_the_clone_with_its_pins(extra):
    hint = install_hints.extra_hint(extra)
    assert hint == f'pip install -c constraints.txt ".[{extra}]" (run in {ROOT})'
    assert (ROOT / "constraints.txt").is_file()
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    assert extra in setup["options.extras_require"]  # an extra the project declares


def test_installed_from_an_index_the_hint_names_the_distribution(tmp_path, monkeypatch):
    monkeypatch.setattr(install_hints, "PROJECT_ROOT", tmp_path)  # site-packages: no pyproject
    assert install_hints.extra_hint("keras") == 'pip install "qonnx-ingest[keras]"'
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    assert setup["metadata"]["name"] == install_hints.DISTRIBUTION
