"""The benchmark suite's entry point: ``.venv/bin/python scripts/bench/run.py NAME [ARGS ...]``.

``run.py list`` names the benchmarks; ARGS go to the one named (``run.py NAME --help``). They
print figures and assert nothing; docs/benchmarks.md holds the figures and how they were taken.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from entry import dispatch  # noqa: E402

BENCHMARKS = {
    "all": ("compare", "ours vs tf2onnx and tflite2onnx side by side: corpus, large models, "
            "options, scaling (about 5 min; --no-peers, --no-corpus, --no-scaling, ...)"),
    "tflite": ("bench_tflite", "tflite2qonnx alone on .tflite models: time, memory, size"),
    "qkeras": ("bench_qkeras", "qkeras2qonnx alone on the QKeras corpus: time, memory, "
               "Quant nodes"),
    "qkeras-depth": ("bench_qkeras_depth", "what our pipeline adds per layer on deep QKeras "
                     "chains (DEPTH ...)"),
    "qkeras-folder": ("bench_qkeras_folder", "the QKeras corpus as one folder run, --jobs N"),
    "bit-exact": ("bench_bit_exact", "--bit-exact on the quantized corpus: agreement with the "
                  "builtin kernels, node growth, cost"),
    "layout": ("bench_layout", "layout.to_channels_first on synthetic 1k, 10k, 100k-op graphs"),
}  # fmt: skip

if __name__ == "__main__":
    sys.exit(dispatch(HERE, BENCHMARKS, sys.argv[1:], __doc__.splitlines()[0]))
