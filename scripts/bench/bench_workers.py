"""compare.py's in-process measurements, each run in a child (``compare.py --worker KIND ...``) with
its own imports: tf2onnx and tflite2onnx conversion times, ours against the floor on QKeras
models, and generating the TFLite chains."""

from __future__ import annotations

import functools
import json
import logging
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import bench_qkeras
from bench_chains import qdense_chain, worker_make_tflite
from bench_common import (
    OURS_QUANT,
    PEER_QUANT,
    SINGLE_RUN_SECONDS,
    best_of,
    count_ops,
    progress,
    qkeras_imports,
    quiet_tensorflow,
)
from bench_tflite import Row, one_line


def worker_tf2onnx(paths: list[str], repeat: int, budget: float = math.inf) -> dict[str, Any]:
    """tf2onnx's conversion time: ``from_tflite``, which its ``--tflite`` CLI runs."""
    quiet_tensorflow()
    from tf2onnx import convert

    times: dict[str, Any] = {}
    for path in paths:
        try:
            times[Path(path).name], _ = best_of(
                lambda p=path: convert.from_tflite(p), repeat, budget
            )
        except Exception as exc:  # a peer failing is a result
            times[Path(path).name] = f"{type(exc).__name__}: {one_line(str(exc))}"
    return times


def worker_tflite2onnx(paths: list[str], repeat: int) -> dict[str, Any]:
    """tflite2onnx's conversion time: its ``convert()`` minus writing the file (in its venv)."""
    logging.disable(logging.WARNING)
    import tflite
    from tflite2onnx.model import Model

    def convert(path: str) -> None:
        Model(tflite.Model.GetRootAsModel(Path(path).read_bytes(), 0)).convert({})

    times: dict[str, Any] = {}
    for path in paths:
        try:
            times[Path(path).name], _ = best_of(lambda p=path: convert(p), repeat)
        except Exception as exc:
            times[Path(path).name] = f"{type(exc).__name__}: {one_line(str(exc))}"
    return times


def measure_qkeras(model: Any, name: str, repeat: int, budget: float = math.inf) -> list[Row]:
    """[ours, floor] for one Keras model: ``qkeras2qonnx.convert`` against tf2onnx's
    ``from_keras`` on the stripped model."""
    from qonnx_ingest.errors import ConversionError

    _, convert, strip_model, from_keras, opset = qkeras_imports()
    ours, floor = Row(name), Row(name)
    try:
        ours.convert_seconds, proto = best_of(lambda: convert(model), repeat, budget)
        count_ops(ours, proto, OURS_QUANT)
    except ConversionError as exc:  # refused by design, as the CLI's exit 1
        ours.error = f"exit 1: {one_line(str(exc))}"
    except Exception as exc:  # a bug of ours: a result too, the other models still run
        ours.error = f"{type(exc).__name__}: {one_line(str(exc))}"
    try:
        plain, _ = strip_model(model)
    except Exception as exc:
        floor.error = f"nothing to convert: strip failed ({one_line(str(exc))})"
        return [ours, floor]
    try:
        floor.convert_seconds, (proto, _) = best_of(
            lambda: from_keras(plain, opset=opset), repeat, budget
        )
        count_ops(floor, proto, PEER_QUANT)
    except Exception as exc:
        floor.error = f"{type(exc).__name__}: {one_line(str(exc))}"
    return [ours, floor]


def worker_qkeras(names: list[str], repeat: int) -> dict[str, Any]:
    """Ours and the floor on the QKeras corpus models, loaded as bench_qkeras loads them."""
    qkeras_imports()
    from qkeras2qonnx.environment.load import load_model

    rows: dict[str, Any] = {}
    for name in names:
        source, weights = bench_qkeras.MODELS[name]
        corpus = bench_qkeras.CORPUS
        try:
            model = load_model(corpus / source, weights=corpus / weights if weights else None)
        except Exception as exc:
            error = f"load: {type(exc).__name__}: {one_line(str(exc))}"
            rows[name] = [asdict(Row(name, error=error)), asdict(Row(name, error=error))]
            continue
        rows[name] = [asdict(row) for row in measure_qkeras(model, name, repeat)]
    return rows


def worker_qkeras_scaling(depths: list[str], repeat: int) -> dict[str, Any]:
    """Ours and the floor on seeded chains of ``depth`` QDense(8) layers, each with its own
    weights and quantizers, and ``CHAIN_OUTPUTS`` graph outputs tapped along the chain (no
    shared weights: a layer called more than once is refused by design)."""
    qkeras_imports()
    # Keras builds, clones and traces functional models recursively, a few frames per layer
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20 * max(map(int, depths)) + 1000))
    rows: dict[str, Any] = {}
    for depth in map(int, depths):
        progress(f"scaling: building the {depth}-layer QKeras chain")
        start = time.perf_counter()
        model = qdense_chain(depth)
        build = time.perf_counter() - start
        progress(f"scaling: built in {build:.0f} s; qkeras2qonnx and the floor")
        rows[str(depth)] = [
            asdict(row) for row in measure_qkeras(model, str(depth), repeat, SINGLE_RUN_SECONDS)
        ] + [build]
    return rows


WORKERS: dict[str, Callable[[list[str], Any], dict[str, Any]]] = {
    "tf2onnx": worker_tf2onnx,
    "tf2onnx-scaling": functools.partial(worker_tf2onnx, budget=SINGLE_RUN_SECONDS),
    "tflite2onnx": worker_tflite2onnx,
    "qkeras": worker_qkeras,
    "qkeras-scaling": worker_qkeras_scaling,
    "make-tflite": worker_make_tflite,
}


def worker_main(argv: list[str]) -> int:
    """``compare.py --worker KIND RESULT.json LAST_ARG ITEMS...`` (internal): LAST_ARG is the
    repeat count, or the cache directory for make-tflite."""
    kind, result, last, *items = argv
    if kind != "make-tflite":
        last = int(last)
    Path(result).write_text(json.dumps(WORKERS[kind](items, last)))
    return 0
