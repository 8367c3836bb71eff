"""What compare.py's sections and workers share: progress lines, best-of timing, op counts, the
worker subprocess (``compare.py --worker``), and TensorFlow/QKeras/tf2onnx imported and warmed up.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bench_qkeras  # noqa: F401 - sets TF_USE_LEGACY_KERAS / TF_CPP_MIN_LOG_LEVEL defaults for children
from bench_tflite import CORPUS, ROOT, Row, one_line

TFLITE_CORPUS = CORPUS
BENCH = Path(__file__).resolve().with_name("compare.py")  # runs the workers: compare.py --worker


OURS_QUANT = ("Quant", "IntQuant", "BipolarQuant")
PEER_QUANT = ("QuantizeLinear", "DequantizeLinear")
UNAVAILABLE = "unavailable: "
NOT_RUN = "not run (no corpus model)"
SINGLE_RUN_SECONDS = 1.0  # scaling: a conversion slower than this is timed once


def progress(message: str) -> None:
    """Progress goes to stderr, so stdout holds only the tables (to paste)."""
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def best_of(fn: Callable[[], Any], repeat: int, budget: float = math.inf) -> tuple[float, Any]:
    """Best wall time of ``repeat`` calls and the last result; stops after a call slower than
    ``budget`` (the deep scaling models cost minutes each, and their noise is small)."""
    best, result = math.inf, None
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        result = fn()
        seconds = time.perf_counter() - start
        best = min(best, seconds)
        if seconds > budget:
            break
    return best, result


def count_ops(row: Row, model: Any, quant_types: tuple[str, ...]) -> None:
    ops = [node.op_type for node in model.graph.node]
    row.nodes, row.transposes = len(ops), ops.count("Transpose")
    row.quants = sum(ops.count(t) for t in quant_types)


def run_worker(kind: str, args: list[str], python: Path | None = None) -> tuple[dict, str | None]:
    """Run an in-process measurement in a child (its own imports, TensorFlow included) and
    return its JSON result, or ({}, the child's last stderr line)."""
    with tempfile.TemporaryDirectory(prefix="bench_worker_") as tmp:
        result, log = Path(tmp) / "result.json", Path(tmp) / "stderr.txt"
        argv = [str(python or sys.executable), str(BENCH), "--worker", kind, str(result), *args]
        with open(log, "wb") as stderr:
            proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=stderr, cwd=ROOT)
        if proc.returncode != 0 or not result.exists():
            return {}, f"{kind} worker exit {proc.returncode}: {one_line(log.read_text())}"
        return json.loads(result.read_text()), None


def quiet_tensorflow() -> None:
    warnings.simplefilter("ignore")
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    logging.getLogger("tf2onnx").setLevel(logging.ERROR)


@functools.cache
def qkeras_imports() -> tuple[Any, ...]:
    """Import and warm up TensorFlow, QKeras and tf2onnx (a tiny model through both paths) so
    that no timing includes them."""
    quiet_tensorflow()
    from tf2onnx import convert as tf2onnx_convert

    import qkeras2qonnx
    from qkeras2qonnx.environment.backend import keras
    from qkeras2qonnx.strip import strip_model
    from qonnx_ingest.finish import DEFAULT_OPSET

    k = keras()
    warm = k.Sequential([k.Input((2,)), k.layers.Dense(1)])
    qkeras2qonnx.convert(warm)
    tf2onnx_convert.from_keras(strip_model(warm)[0], opset=DEFAULT_OPSET)
    return k, qkeras2qonnx.convert, strip_model, tf2onnx_convert.from_keras, DEFAULT_OPSET
