"""The generalisation sweeps' entry point: ``.venv/bin/python scripts/sweep/run.py NAME [ARGS]``.

``run.py list`` names the sweeps; ARGS go to the one named (``run.py NAME --help``). A sweep
builds many seeded models and converts each in several ways; what it finds is pinned by the
regression tests (tests/*/test_*_sweep_regressions.py), not by the sweep itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from entry import dispatch  # noqa: E402

SWEEPS = {
    "keras-tflite": ("sweep_keras_tflite", "seeded Keras models x TFLiteConverter modes through "
                     "tflite2qonnx, against the interpreter (about an hour)"),
    "qkeras": ("sweep_qkeras", "seeded QKeras models, both generations, in memory / files / CLI, "
               "against QKeras predict"),
}  # fmt: skip

if __name__ == "__main__":
    sys.exit(dispatch(HERE, SWEEPS, sys.argv[1:], __doc__.splitlines()[0]))
