"""--version names our version and the libraries a conversion uses, read from package metadata
(never by importing TensorFlow); each package exports __version__ and the public exceptions."""

from __future__ import annotations

import importlib
import subprocess
import sys
from importlib import metadata

import pytest

from support import ROOT

CHECK = """
import sys
from {tool}.cli import main
try:
    main(["--version"])
except SystemExit as e:
    assert e.code == 0
heavy = [m for m in ("tensorflow", "tf_keras", "keras", "tf2onnx", "qkeras") if m in sys.modules]
print("HEAVY", heavy)
"""


def version_screen(tool: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", CHECK.format(tool=tool)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def installed(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


@pytest.mark.parametrize(
    "tool, libraries",
    [
        # onnxruntime and the interpreter: what --verify runs
        ("tflite2qonnx", ["onnx", "qonnx", "numpy", "onnxruntime", "ai-edge-litert"]),
        (
            "qkeras2qonnx",
            ["onnx", "qonnx", "numpy", "onnxruntime"]
            + ["tensorflow", "tf_keras", "qkeras", "tf2onnx"],
        ),
    ],
)
def test_version_lists_the_libraries_without_importing_tensorflow(tool, libraries):
    from qonnx_ingest import __version__

    out = version_screen(tool)
    lines = out.splitlines()
    assert lines[0] == f"{tool} {__version__}"
    assert lines[1 : 1 + len(libraries)] == [f"  {n} {installed(n)}" for n in libraries]
    assert "HEAVY []" in out


def test_qkeras2qonnx_version_reads_qkeras_v3_and_hgq2_from_their_own_directories():
    """Both install a top-level ``qkeras``, so they live outside site-packages (setup.sh):
    their versions come from the dist-info there, pinned in constraints.txt."""
    pins = dict(
        line.strip().split("==")
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line.startswith(("qkeras-v3==", "hgq2=="))
    )
    assert sorted(pins) == ["hgq2", "qkeras-v3"]
    lines = version_screen("qkeras2qonnx").splitlines()
    for name, version in pins.items():
        directory = ROOT / ".venv" / name
        want = f"  {name} {version} (in {directory})" if directory.is_dir() else f"  {name} "
        assert any(line.startswith(want) for line in lines), (want, lines)


@pytest.mark.parametrize("package", ["qonnx_ingest", "tflite2qonnx", "qkeras2qonnx"])
def test_each_package_exports_its_version_and_the_public_exceptions(package):
    from qonnx_ingest import errors

    module = importlib.import_module(package)
    assert module.__version__ == importlib.import_module("qonnx_ingest").__version__ != ""
    public = ("ConversionError", "InputError", "VerificationError", "ConversionWarning")
    for name in (*public, "ReferenceUnavailable"):
        assert getattr(module, name) is getattr(errors, name), name
        assert name in module.__all__
    assert issubclass(module.VerificationError, module.ConversionError)
    assert module.VerificationError.exit_code == 3


def test_verification_error_is_the_one_convert_raises():
    from qonnx_ingest.verification import Verification, VerificationError
    from tflite2qonnx import VerificationError as exported

    assert VerificationError is exported
    with pytest.raises(exported, match="verification failed on output y"):
        Verification([_failed("y")], 1, "test").require_pass()


def _failed(name):
    from qonnx_ingest.verification import Agreement

    return Agreement(name, 1.0, passed=False)
