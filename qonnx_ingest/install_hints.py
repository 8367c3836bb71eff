"""The pip command that installs an extra, as it works where this code runs, with the pins.

From a clone (pyproject.toml and constraints.txt beside the packages), or installed from one
with a plain ``pip install .`` (pip records the clone in the distribution's direct_url.json),
the command installs the clone with its verified pins (``-c constraints.txt``, run in the
clone's root). From a wheel of a package index it names the distribution and the pins of the
extra's main packages, so pip does not pick a newer TensorFlow the tests never ran.
Standard library only: the hints are printed on a base install.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from urllib.parse import unquote, urlparse

DISTRIBUTION = "qonnx-ingest"
PROJECT_ROOT = Path(__file__).resolve().parents[1]
# The pins of each extra's main packages, for an install without constraints.txt (the same as
# constraints.txt's: tests/qonnx_ingest/test_install_hints.py checks).
EXTRA_PINS = {
    "keras": ("tensorflow==2.19.1", "tf_keras==2.19.0", "QKeras==0.9.0", "tf2onnx==1.17.0"),
    "hgq2": (
        "tensorflow==2.19.1",
        "tf_keras==2.19.0",
        "QKeras==0.9.0",
        "tf2onnx==1.17.0",
        "keras==3.15.1",
        "quantizers==1.2.2",
    ),  # fmt: skip
    "verify": ("ai-edge-litert==2.3.0",),
    "hls4ml": ("hls4ml==1.3.0",),
}
# Top-level modules a conversion imports -> (what to call it, the extra that brings it).
MODULES = {
    "tensorflow": ("TensorFlow", "keras"),
    "tf_keras": ("tf_keras", "keras"),
    "qkeras": ("QKeras", "keras"),
    "tf2onnx": ("tf2onnx", "keras"),
    "onnxscript": ("onnxscript", "keras"),
    "h5py": ("h5py", "keras"),
    "keras": ("Keras 3", "hgq2"),
    "quantizers": ("quantizers (HGQ2's dependency)", "hgq2"),
    "tqdm": ("tqdm (HGQ2's dependency)", "hgq2"),
    "ai_edge_litert": ("the TFLite interpreter (ai-edge-litert)", "verify"),
    "hls4ml": ("hls4ml", "hls4ml"),
}


def extra_hint(extra: str) -> str:
    """``pip install ...`` for the optional dependencies ``extra`` (keras, hgq2, verify,
    hls4ml), pinned."""
    clone = project_clone()
    if clone is not None:
        return f"""pip install -c constraints.txt ".[{extra}]" (run in {shlex.quote(str(clone))})"""
    pins = " ".join(EXTRA_PINS.get(extra, ()))
    return f"""pip install "{DISTRIBUTION}[{extra}]" {pins}""".rstrip()


def missing_module_message(name: str | None) -> str | None:
    """One line for ``ModuleNotFoundError(name=...)``: what is missing and the install command;
    None for a module no extra brings (then it is a bug, not an install problem)."""
    root = (name or "").split(".")[0]
    if root not in MODULES:
        return None
    what, extra = MODULES[root]
    return f"{what} is not installed: {extra_hint(extra)}"


def project_clone() -> Path | None:
    """The clone this code runs from or was installed from (``pip install .``), if it still
    holds pyproject.toml and constraints.txt."""
    for candidate in (PROJECT_ROOT, _installed_from()):
        if candidate is not None and _is_clone(candidate):
            return candidate
    return None


def _is_clone(path: Path) -> bool:
    return (path / "pyproject.toml").is_file() and (path / "constraints.txt").is_file()


def _installed_from() -> Path | None:
    """The local directory pip installed this distribution from (PEP 610 direct_url.json)."""
    from importlib import metadata

    try:
        text = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
        url = json.loads(text or "{}").get("url", "")
    except (metadata.PackageNotFoundError, ValueError, AttributeError):
        return None
    parsed = urlparse(url)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None
