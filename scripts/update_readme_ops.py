"""Regenerate the list of supported TFLite operators in docs/tflite.md from the converter table.

Run after adding an operator; tests/test_readme.py fails when the list is stale. (The name is
historical: the list lived in the README before the reference moved to docs/.)
"""

from __future__ import annotations

import re
from pathlib import Path

TARGET = Path(__file__).resolve().parents[1] / "docs" / "tflite.md"
BEGIN, END = "<!-- tflite-ops:begin -->", "<!-- tflite-ops:end -->"


def ops_markdown() -> str:
    from tflite2qonnx.ops import CONVERTERS

    names = sorted(CONVERTERS)
    return f"{len(names)} operators: " + ", ".join(f"`{n}`" for n in names)


def render(text: str) -> str:
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    return pattern.sub(f"{BEGIN}\n{ops_markdown()}\n{END}", text)


if __name__ == "__main__":
    TARGET.write_text(render(TARGET.read_text()))
    print(ops_markdown())
