"""The TFLite fuzzer's entry point: ``.venv/bin/python scripts/fuzz.py [--cases 10000] ...``.

The fuzzer itself lives in the tests tree (tests/tflite2qonnx/fuzz_*.py), because
tests/tflite2qonnx/test_fuzz_tflite.py runs its first 3,000 cases; ``--help`` lists the options.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "tflite2qonnx"))
from fuzz_tflite import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
