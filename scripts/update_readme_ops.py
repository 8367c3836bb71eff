"""Regenerate the list of supported TFLite operators in docs/tflite.md from the converter table.

Run after adding an operator; tests/test_readme.py fails when the list is stale. (The name is
historical: the list lived in the README before the reference moved to docs/.) What the list
says is tests/tflite_ops_list.py's, which the test reads too.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from tflite_ops_list import TARGET, ops_markdown, render  # noqa: E402

if __name__ == "__main__":
    TARGET.write_text(render(TARGET.read_text()))
    print(ops_markdown())
