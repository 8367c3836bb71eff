"""``import qkeras2qonnx`` and ``qkeras2qonnx --help`` must stay light: no TensorFlow."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.keras

ROOT = Path(__file__).resolve().parents[2]


def python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_import_does_not_load_tensorflow():
    result = python(
        "import os, sys, qkeras2qonnx, qkeras2qonnx.cli, qkeras2qonnx.pipeline\n"
        "assert os.environ['TF_USE_LEGACY_KERAS'] == '1'\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('tensorflow', 'tf_keras', 'qkeras', 'tf2onnx')))\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_help_does_not_load_tensorflow():
    result = python(
        "import sys, runpy\n"
        "sys.argv = ['qkeras2qonnx', '--help']\n"
        "try:\n"
        "    runpy.run_module('qkeras2qonnx', run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "print('tensorflow' in sys.modules)\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("False")
    for option in ("--weights", "--batch-size", "--allow-lambda", "--opset", "--int-quant"):
        assert option in result.stdout


def test_python_dash_m_help():
    result = subprocess.run(
        [sys.executable, "-m", "qkeras2qonnx", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: qkeras2qonnx")
