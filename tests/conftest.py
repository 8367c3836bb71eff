"""The order test files run in: the slowest first.

``scripts/test.sh`` runs pytest-xdist with ``--dist loadfile --no-loadscope-reorder``: a whole
file goes to one worker, in collection order. xdist's own order (most tests first) left files
of a few slow tests (the fuzzer, the Keras 3 model builds) for the end, where one worker ran
them alone while the other idled. Longest first keeps the two workers busy to the end.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent

# Approximate seconds per file (setup included) on the 2-core machine, the files that take
# over ~30 s: the 7 Dec figures of docs/development.md and runs of single files under load
# scaled to a quiet machine. Only the order matters; refresh it from a full run's
# --durations=0 when a file gets much slower or faster. Other files follow, most tests first.
SLOW_FILES: dict[str, float] = {
    "qkeras2qonnx/test_hls4ml_acceptance.py": 400,  # ~30 hls4ml g++ builds
    "tflite2qonnx/test_fuzz_tflite.py": 170,  # 3,000 cases on two more processes
    "qkeras2qonnx/test_hgq2_convert.py": 140,  # builds hgq2_models (test_hgq2_sums reads it)
    "qkeras2qonnx/test_qkeras_corpus.py": 120,
    "qkeras2qonnx/test_qkeras_recurrent.py": 115,
    "tflite2qonnx/test_lstm_hybrid.py": 100,
    "tflite2qonnx/test_bit_exact.py": 90,
    "qkeras2qonnx/test_qkeras_subclassed.py": 90,
    "qkeras2qonnx/test_qkeras_bidirectional.py": 80,
    "qkeras2qonnx/test_hgq2_hls4ml.py": 70,
    "qkeras2qonnx/test_qkeras_layers.py": 50,
    "qkeras2qonnx/test_qkeras_cli_workers.py": 50,
    "qkeras2qonnx/test_qkeras_bad_input.py": 45,
}


@pytest.hookimpl(trylast=True)  # after pytest's own reordering (by fixture parameters)
def pytest_collection_modifyitems(session, config, items) -> None:
    """Files in SLOW_FILES first, slowest first; the rest by number of tests, most first.

    The sort is stable, so the tests of a file keep their order."""
    files = [_relative(item) for item in items]
    counts = Counter(files)
    order = sorted(
        range(len(items)),
        key=lambda i: (-SLOW_FILES.get(files[i], 0.0), -counts[files[i]], files[i]),
    )
    items[:] = [items[i] for i in order]


def _relative(item) -> str:
    path = Path(str(item.path))
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return path.as_posix()
