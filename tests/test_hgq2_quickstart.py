"""docs/keras.md's HGQ2 quick start, run from the page's own text: its training command trains
and saves an HGQ2 model with the page's train.py, and its conversion command converts it with
``--verify`` (HGQ2's predict against the converted model) without qkeras-v3. The install line
is not run (it would reinstall the shared venv); it is checked to name the project's hgq2
extra and ``qkeras2qonnx.apart``, whose pip command
tests/qkeras2qonnx/environment/test_hgq2_install.py pins."""

from __future__ import annotations

import configparser
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from qkeras2qonnx import apart
from qkeras2qonnx.environment import flavour
from support import ROOT

pytestmark = pytest.mark.keras
INSTALL = 'pip install -c constraints.txt ".[hgq2]" && python -m qkeras2qonnx.apart hgq2'


def quick_start() -> tuple[list[str], str]:
    """The shell lines and the train.py of docs/keras.md's "HGQ2 quick start" section."""
    text = (ROOT / "docs/keras.md").read_text()
    section = re.search(r"^## HGQ2 quick start\n(.*?)^## ", text, re.S | re.M)
    assert section, "docs/keras.md has no '## HGQ2 quick start' section"
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", section.group(1), re.S | re.M)
    shell = [line for lang, body in blocks if lang == "sh" for line in body.splitlines()]
    python = [body for lang, body in blocks if lang == "python"]
    assert len(python) == 1, "the quick start has one python block (train.py)"
    return [line for line in shell if line.strip()], python[0]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The quick start's commands after the install line, in a fresh directory whose ``.venv``
    is this test's venv (hgq2 in ``.venv/hgq2``, as the install line puts it)."""
    if flavour.hgq2_dir() is None:
        pytest.fail("hgq2 is not installed in .venv/hgq2: run scripts/setup.sh")
    lines, train = quick_start()
    work = tmp_path_factory.mktemp("hgq2_quickstart")
    (work / ".venv").symlink_to(Path(sys.prefix))
    (work / "train.py").write_text(train)
    # the docs' point: no qkeras-v3 needed (none where this variable points)
    base = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", flavour.DIR_VARIABLE: str(work / "none")}
    base.pop("PYTHONPATH", None)
    done = []
    for line in lines[1:]:
        words = shlex.split(line)
        env = dict(base)
        while "=" in words[0]:
            name, value = words.pop(0).split("=", 1)
            env[name] = value
        if words[0] == "qkeras2qonnx":  # this checkout's code, as the installed command
            words = [sys.executable, "-m", "qkeras2qonnx", *words[1:]]
            env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
        result = subprocess.run(
            words, cwd=work, env=env, capture_output=True, text=True, timeout=600
        )
        done.append((line, result))
    return lines, work, done


def test_the_install_line_names_the_hgq2_extra_and_apart():
    lines, _ = quick_start()
    assert lines[0] == INSTALL
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    assert "hgq2" in setup["options.extras_require"]
    assert "hgq2" in apart.LIBRARIES


def test_the_training_command_trains_and_saves_the_model(run):
    lines, work, done = run
    line, result = done[0]
    assert line.startswith("PYTHONPATH=.venv/hgq2 TF_USE_LEGACY_KERAS=0 .venv/bin/python train.py")
    assert result.returncode == 0, result.stderr[-2000:]
    assert (work / "hgq2_mlp.keras").is_file()


def test_the_conversion_agrees_with_hgq2_predict_without_qkeras3(run):
    lines, work, done = run
    line, result = done[1]
    assert line.startswith("qkeras2qonnx hgq2_mlp.keras -o hgq2_mlp.onnx")
    assert result.returncode == 0, result.stderr[-2000:]
    # --verify ran HGQ2's predict and the converted model on the same inputs
    assert "verify: ok, max abs error 0 " in result.stdout, result.stdout
    assert "source: HGQ2 predict" in result.stdout
    model = onnx.load(str(work / "hgq2_mlp.onnx"))
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim] == [1, 8]
    assert sum(node.op_type == "Quant" for node in model.graph.node) >= 2
