"""Regenerate the operator lists generated from the operator records: supported operators and
the --bit-exact table in docs/tflite.md, the int16 table in docs/int16.md, the emulated
operators in ``tflite2qonnx.api.convert``'s docstring (``tflite2qonnx.ops.listing``).

Run after adding or changing an operator record; tests/test_readme.py fails when one is stale.
(The name is historical: the first list lived in the README.)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

if __name__ == "__main__":
    from tflite2qonnx.ops.listing import regenerate

    changed = regenerate()
    print("rewrote: " + (", ".join(changed) if changed else "nothing (up to date)"))
