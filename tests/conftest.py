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

# Approximate seconds per file (setup included) on a quiet 2-core machine, the files over
# ~30 s: the full run of 7 Dec 23:10 (--durations=0 in junit XML, under load, scaled by its
# wall time to the quiet 23:53), with this round's speedups (recurrent, corpus) applied; the
# fuzzer counts double (two more processes). Only the order matters; refresh it from a full
# run when a file gets much slower or faster. Other files follow, most tests first.
SLOW_FILES: dict[str, float] = {
    "qkeras2qonnx/test_hls4ml_acceptance.py": 317,
    "tflite2qonnx/test_fuzz_tflite.py": 224,
    # builds hgq2_models (test_hgq2_sums reads it)
    "qkeras2qonnx/hgq2_layers/test_hgq2_convert.py": 170,
    "qkeras2qonnx/qkeras_recurrent/test_qkeras_recurrent.py": 160,
    "tflite2qonnx/test_bit_exact.py": 122,
    "qkeras2qonnx/test_qkeras3_convert.py": 106,  # builds qkeras3_models unless shared
    "tflite2qonnx/test_integer_shape_arithmetic.py": 100,
    "qkeras2qonnx/test_qkeras_corpus.py": 100,
    "qkeras2qonnx/hgq2_layers/test_hgq2_hls4ml.py": 89,
    "tflite2qonnx/test_tflite_consumers.py": 84,
    "tflite2qonnx/test_lstm_hybrid.py": 79,
    "qkeras2qonnx/qkeras_layers/test_qkeras_quantizers.py": 59,
    "qkeras2qonnx/test_qkeras_cli_workers.py": 57,
    "qkeras2qonnx/qkeras_layers/test_qkeras_layers.py": 54,
    # five QKeras and four TFLite models through FINN's steps (MobileNet v1: 21-74 s)
    "qonnx_ingest/test_targets_finn.py": 70,
    "tflite2qonnx/test_tflite_ops.py": 47,
    "layout/test_layout_corpus.py": 42,
    # two hls4ml compiles and three corpus refusals (8 Dec, alone: 45 s quiet, 86 s busy)
    "tflite2qonnx/test_tflite_hls4ml.py": 45,
    # two hls4ml compiles (18-32 s) and two MobileNets in qonnx (25 s busy)
    "tflite2qonnx/test_tflite_hls4ml_exact.py": 45,
    "tflite2qonnx/test_tflite_convert.py": 37,
    "tflite2qonnx/test_tflite_sweep_regressions.py": 36,
    "tflite2qonnx/test_lstm.py": 31,
    "qkeras2qonnx/qkeras_layers/test_qkeras_activations.py": 30,
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
