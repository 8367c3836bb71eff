"""Measure TFLite's int16 sigmoid table from the interpreter and write the converter's copy.

How each of the 256 entries is read from the int16 LOGISTIC and TANH reference kernels, and
how the reading is checked, is in tests/tflite2qonnx/int16_sigmoid_probe.py (the measurement;
test_int16_sigmoid.py runs it too). This script writes its result as
``tflite2qonnx/ops/exact/int16_sigmoid_table.py``.

Usage: ``python scripts/probe_int16_sigmoid_table.py`` (writes the module) or ``--check``
(exit 1 if the written module differs from what the interpreter does now).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODULE = ROOT / "tflite2qonnx/ops/exact/int16_sigmoid_table.py"
sys.path.insert(0, str(ROOT / "tests" / "tflite2qonnx"))
from int16_sigmoid_probe import measure  # noqa: E402


def render(table: np.ndarray) -> str:
    from importlib.metadata import version

    rows = [
        "    " + ", ".join(str(int(x)) for x in table[i : i + 12]) + "," for i in range(0, 256, 12)
    ]
    return "\n".join(
        [
            '"""TFLite\'s int16 sigmoid table (sigmoid(i / 24) in 0.16), read by its int16',
            "LOGISTIC and TANH reference kernels.",
            "",
            f"GENERATED, do not edit: measured from ai-edge-litert {version('ai-edge-litert')}'s"
            " builtin reference",
            "kernels by scripts/probe_int16_sigmoid_table.py (its docstring says how each entry is",
            'read). No formula reproduces these entries."""',
            "",
            "# fmt: off",
            "SIGMOID_TABLE_UINT16 = (",
            *rows,
            ")",
            "# fmt: on",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    table, summary = measure()
    text = render(table)
    print(f"256 entries; LOGISTIC alone determines {summary['determined_by_logistic']}")
    if args.check:
        same = MODULE.exists() and MODULE.read_text() == text
        print("up to date" if same else f"{MODULE} differs from the interpreter's table")
        return 0 if same else 1
    MODULE.write_text(text)
    print(f"wrote {MODULE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
