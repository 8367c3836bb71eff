"""The list of supported TFLite operators in docs/tflite.md, generated from the converter table:
scripts/update_readme_ops.py writes it, tests/test_readme.py fails when it is stale."""

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
