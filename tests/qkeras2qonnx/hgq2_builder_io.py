"""What every HGQ2 builder script (run in a Keras 3 subprocess) writes per model: HGQ2's
predictions and inputs (``NAME.npz``), and the conversion (``ONNX``) or its refusal
(``NAME.error.txt``) for the tests to read; and a file converted again after other models
(``NAME.again.onnx``), for the tests to compare bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import qkeras2qonnx
from qonnx_ingest.errors import ConversionError


def save_and_convert(out: Path, name: str, source: Any, record: dict, onnx_name: str) -> None:
    np.savez(out / f"{name}.npz", **record)
    try:
        qkeras2qonnx.convert(source, out / onnx_name)
    except ConversionError as exc:
        (out / f"{name}.error.txt").write_text(str(exc))


def convert_again(out: Path, name: str, path: Path) -> None:
    """``path`` converted once more, into ``NAME.again.onnx``, when the process has loaded and
    converted other models: Keras's name counters and tf2onnx's state have moved on since."""
    qkeras2qonnx.convert(path, out / f"{name}.again.onnx")
