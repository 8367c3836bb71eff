"""``--version``: our version and the libraries a conversion depends on, from package metadata.

importlib.metadata reads installed distributions' records without importing them, so the
version screen stays instant and never loads TensorFlow.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import metadata

from qonnx_ingest import __version__

# what every conversion uses (onnxruntime runs the converted model under --verify); the
# QKeras path adds its TensorFlow stack, the TFLite path the interpreter --verify runs
BASE = ("onnx", "qonnx", "numpy", "onnxruntime")
KERAS = ("tensorflow", "tf_keras", "qkeras", "tf2onnx")
TFLITE = ("ai-edge-litert",)


def version_text(prog: str, libraries: Sequence[str] = BASE) -> str:
    """``prog 0.1.0`` and one ``  name version`` line per library ("not installed" if absent)."""
    lines = [f"{prog} {__version__}"]
    for name in libraries:
        try:
            found = metadata.version(name)
        except metadata.PackageNotFoundError:
            found = "not installed"
        lines.append(f"  {name} {found}")
    return "\n".join(lines)
