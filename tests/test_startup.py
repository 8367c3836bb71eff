"""Start-up: the TFLite path and both --help screens never import TensorFlow."""

import subprocess
import sys

from support import EXAMPLES

CHECK = """
import sys
{body}
heavy = [m for m in ("tensorflow", "tf_keras", "keras", "tf2onnx", "qkeras") if m in sys.modules]
print("HEAVY", heavy)
"""


def run_python(body):
    proc = subprocess.run(
        [sys.executable, "-c", CHECK.format(body=body)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_tflite_conversion_does_not_import_tensorflow(tmp_path):
    source, target = str(EXAMPLES / "int8_dense.tflite"), str(tmp_path / "m.onnx")
    out = run_python(f"import tflite2qonnx\ntflite2qonnx.convert({source!r}, {target!r})")
    assert "HEAVY []" in out
    assert (tmp_path / "m.onnx").exists()


def test_tflite_cli_does_not_import_tensorflow(tmp_path):
    out = run_python(
        "from tflite2qonnx.cli import main\n"
        f"main([{str(EXAMPLES / 'int8_dense.tflite')!r}, '-o', {str(tmp_path / 'm.onnx')!r}])"
    )
    assert "HEAVY []" in out


def test_help_of_both_tools_imports_no_tensorflow():
    for tool in ("tflite2qonnx", "qkeras2qonnx"):
        out = run_python(
            f"from {tool}.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
        )
        assert "usage:" in out and "HEAVY []" in out, tool
