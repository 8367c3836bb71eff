"""The README's quick start, run from the README's own text: its commands convert the bundled
examples, and its Python snippet runs the files they wrote and prints what the source
frameworks (the TFLite interpreter, QKeras predict) compute."""

import ast
import os
import re
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pytest

import qkeras2qonnx  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from support import EXAMPLES, ROOT

pytestmark = pytest.mark.keras  # the quick start converts a QKeras model too
TOOLS = {"tflite2qonnx", "qkeras2qonnx"}
# Setup lines a fresh machine needs and this test does not run: it runs in the venv the suite
# runs in, where the project and its pinned dependencies are installed already.
SETUP = {"python3.11", "pip", ".", "source"}
# The snippet's input, as the test rebuilds it for the source frameworks.
INPUT = "np.random.default_rng(0).uniform(-1, 1, model.get_tensor_shape(name))"
LINE = re.compile(r"^(\S+) (\S+) (\(.*?\)) (\[.*\])$")


def quick_start() -> tuple[list[str], str]:
    """The shell lines and the Python snippet of the README's "Quick start" section."""
    text = (ROOT / "README.md").read_text()
    section = re.search(r"^## Quick start\n(.*?)^## ", text, re.S | re.M)
    assert section, "README.md has no '## Quick start' section"
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", section.group(1), re.S | re.M)
    shell = [line for lang, body in blocks if lang == "sh" for line in body.splitlines()]
    python = [body for lang, body in blocks if lang == "python"]
    assert shell and len(python) == 1, "the quick start has one sh block or more and one python"
    return [line for line in shell if line.strip() and not line.lstrip().startswith("#")], python[0]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Every quick-start command and the snippet, in a fresh directory holding the examples."""
    lines, snippet = quick_start()
    work = tmp_path_factory.mktemp("quickstart")
    shutil.copytree(EXAMPLES, work / "examples")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    conversions = []
    for line in lines:
        argv = shlex.split(line, comments=True)
        if argv[0] in SETUP:
            continue
        assert argv[0] in TOOLS, f"the quick start runs {argv[0]!r}, which this test cannot run"
        done = subprocess.run(
            [sys.executable, "-m", argv[0], *argv[1:]],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        conversions.append((argv, done))
    (work / "run.py").write_text(snippet)
    printed = subprocess.run(
        [sys.executable, "run.py"], cwd=work, capture_output=True, text=True, timeout=300, env=env
    )
    return work, snippet, conversions, printed


def outputs(printed) -> dict[str, tuple[tuple, np.ndarray]]:
    assert printed.returncode == 0, printed.stderr
    found = {}
    for line in printed.stdout.splitlines():
        match = LINE.match(line)
        assert match, f"unexpected line from the snippet: {line!r}"
        path, _, shape, values = match.groups()
        found[path] = (ast.literal_eval(shape), np.array(ast.literal_eval(values), np.float32))
    return found


def snippet_input(shape) -> np.ndarray:
    return np.random.default_rng(0).uniform(-1, 1, shape).astype("float32")


def test_quick_start_converts_one_tflite_and_one_qkeras_model_into_different_files(run):
    work, _, conversions, _ = run
    assert {argv[0] for argv, _ in conversions} == TOOLS
    written = []
    for argv, done in conversions:
        assert done.returncode == 0, f"{shlex.join(argv)}: {done.stderr}"
        written.append(argv[argv.index("-o") + 1])
        assert (work / written[-1]).is_file(), written[-1]
        if "--verify" in argv:
            assert "verify: ok, " in done.stdout, done.stdout + done.stderr
    assert len(set(written)) == len(written) == 2, written


def test_quick_start_installs_the_pinned_stack_into_a_fresh_venv():
    """The setup lines this test skips: a venv first, then every pip line pinned by the
    project's constraints.txt to extras the project declares (was: no venv, no pins, and an
    unpublished package name)."""
    import configparser

    lines, _ = quick_start()
    setup = [shlex.split(line, comments=True) for line in lines]
    setup = [argv for argv in setup if argv[0] not in TOOLS]
    assert setup[0][:3] == ["python3.11", "-m", "venv"], setup[0]
    pips = [argv for argv in setup if "pip" in argv]
    assert pips and all(argv[argv.index("-c") + 1] == "constraints.txt" for argv in pips), pips
    assert (ROOT / "constraints.txt").is_file()
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    declared = set(config["options.extras_require"])
    for argv in pips:
        (target,) = [a for a in argv if a.startswith(".")]  # the clone itself, not an index
        extras = re.fullmatch(r"\.(?:\[(.*)\])?", target)[1] or ""
        assert set(filter(None, extras.split(","))) <= declared, target


def test_quick_start_snippet_runs_the_written_files_with_the_input_the_test_rebuilds(run):
    work, snippet, conversions, printed = run
    assert INPUT in snippet, "the snippet's input changed: update INPUT and snippet_input"
    assert "execute_onnx" in snippet
    written = {argv[argv.index("-o") + 1] for argv, _ in conversions}
    assert set(outputs(printed)) == written


def test_quick_start_tflite_output_is_what_the_tflite_interpreter_computes(run):
    from ai_edge_litert.interpreter import Interpreter

    _, _, conversions, printed = run
    argv = next(a for a, _ in conversions if a[0] == "tflite2qonnx")
    shape, values = outputs(printed)[argv[argv.index("-o") + 1]]
    interpreter = Interpreter(str(ROOT / argv[1]))
    interpreter.allocate_tensors()
    (given,), (out,) = interpreter.get_input_details(), interpreter.get_output_details()
    interpreter.set_tensor(given["index"], snippet_input(tuple(given["shape"])))
    interpreter.invoke()
    expected = interpreter.get_tensor(out["index"])
    assert shape == expected.shape == (1, 4)
    np.testing.assert_allclose(values, expected, atol=5.1e-5, rtol=0)


def test_quick_start_qkeras_output_is_what_qkeras_predict_computes(run):
    from qkeras.utils import load_qmodel

    _, _, conversions, printed = run
    argv = next(a for a, _ in conversions if a[0] == "qkeras2qonnx")
    shape, values = outputs(printed)[argv[argv.index("-o") + 1]]
    model = load_qmodel(str(ROOT / argv[1]), compile=False)
    expected = model.predict(snippet_input((1, *model.input_shape[1:])), verbose=0)
    assert shape == expected.shape == (1, 5)
    np.testing.assert_allclose(values, expected, atol=5.1e-5, rtol=0)
