"""``--version``: our version and the libraries a conversion depends on, from package metadata.

importlib.metadata reads installed distributions' records without importing them, so the
version screen stays instant and never loads TensorFlow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path

from qonnx_ingest import __version__

# what every conversion uses (onnxruntime runs the converted model under --verify); the
# QKeras path adds its TensorFlow stack, the TFLite path the interpreter --verify runs
BASE = ("onnx", "qonnx", "numpy", "onnxruntime")
KERAS = ("tensorflow", "tf_keras", "qkeras", "tf2onnx")
TFLITE = ("ai-edge-litert",)


def version_text(
    prog: str,
    libraries: Sequence[str] = BASE,
    isolated: Mapping[str, Path | None] | None = None,
) -> str:
    """``prog 0.1.0`` and one ``  name version`` line per library ("not installed" if absent);
    ``isolated``: libraries installed in a directory of their own (qkeras-v3, hgq2), read there.
    """
    lines = [f"{prog} {__version__}"]
    for name in libraries:
        try:
            found = metadata.version(name)
        except metadata.PackageNotFoundError:
            found = "not installed"
        lines.append(f"  {name} {found}")
    for name, directory in (isolated or {}).items():
        found = "not installed"
        if directory is not None:
            dists = metadata.distributions(name=name, path=[str(directory)])
            found = next((f"{d.version} (in {directory})" for d in dists), found)
        lines.append(f"  {name} {found}")
    return "\n".join(lines)
