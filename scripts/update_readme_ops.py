"""Regenerate the README's list of supported TFLite operators from the converter table.

Run after adding an operator; tests/test_readme.py fails when the README is stale.
"""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
BEGIN, END = "<!-- tflite-ops:begin -->", "<!-- tflite-ops:end -->"


def ops_markdown() -> str:
    from tflite2qonnx.ops import CONVERTERS

    names = sorted(CONVERTERS)
    return f"{len(names)} operators: " + ", ".join(f"`{n}`" for n in names)


def render(text: str) -> str:
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    return pattern.sub(f"{BEGIN}\n{ops_markdown()}\n{END}", text)


if __name__ == "__main__":
    README.write_text(render(README.read_text()))
    print(ops_markdown())
