"""The one benchmark: our converters against their peers, side by side, on this machine.

Everything runs in one process tree, one measurement at a time (the machine is shared):

1. TFLite corpus (../shared/corpus/tflite), one table per model, one row per tool:
   ``tflite2qonnx`` (ours), ``python -m tf2onnx.convert --tflite`` and ``tflite2onnx`` (PyPI;
   installed on first run into ``.venv-bench/`` from the exact pins in
   ``scripts/bench-peers.txt``, since it needs its own numpy/onnx/tflite; a peer that cannot be
   installed is shown as ``n/a`` with the reason).
2. QKeras corpus (``bench_qkeras.MODELS``), one table per model: ``qkeras2qonnx`` (ours) and the
   floor our pipeline adds to: tf2onnx's plain ``convert.from_keras`` on the stripped model
   (``qkeras2qonnx.strip.strip_model``: plain Keras layers plus the output markers, which plain
   tf2onnx turns into Identity), at our opset and timed the same way as our conversion.
3. Scaling: conversion time of generated models of growing depth (default 10, 100, 1000),
   per layer, which should stay flat: a chain of int8 FULLY_CONNECTED(8)+RELU layers
   (TensorFlow's TFLiteConverter, full-integer post-training quantization with a seeded
   representative set; cached in ``--cache-dir``) and a chain of
   ``QDense(8, quantized_bits(4, 0, alpha=1), activation=quantized_relu(4))`` layers.

Columns:

- status:    ok; failed (the tool gave up, its one-line reason follows); refused (ours: exit 1,
             a model we refuse by design with a one-line error); n/a (tool unavailable);
- cli s:     wall time of the whole command in a fresh process (start-up, imports, reading,
             converting, writing);
- convert s: the conversion alone, in a warm process, best of ``--repeat``: ours
             ``tflite2qonnx.convert(path)`` / ``qkeras2qonnx.convert(model)``; tf2onnx
             ``convert.from_tflite(path)`` (what its ``--tflite`` CLI runs) or
             ``convert.from_keras``; tflite2onnx ``Model(...).convert()`` (its CLI minus save);
- peak MB:   peak RSS of that CLI process (``ru_maxrss`` from ``os.wait4``). Every CLI run
             happens before this process imports anything heavy: Linux starts a child's
             ru_maxrss at the parent's RSS at fork time. The in-process parts run later, in
             child processes of their own (TensorFlow) or here (tflite2qonnx);
- nodes, Transpose: counts in the output graph;
- quant:     quantization nodes: Quant/IntQuant/BipolarQuant in ours (QONNX),
             QuantizeLinear+DequantizeLinear in the peers' (QDQ).

Scaling: ``ms/layer`` is conversion time / depth (one run when a conversion takes over 1 s,
else best of ``--repeat``); the last line compares ms/layer at the deepest and the next depth
(1000/100 by default), about 1x when flat.

The QKeras rows also give what our pipeline adds to the floor per layer, which separates
our own passes from tf2onnx's (whose time per layer grows with depth by itself).

Prints figures; it is not a test. The default run takes about 6 min on the 2-core VM (the
first run also creates ``.venv-bench`` and generates the TFLite chains); ``--depths 10 100``
takes about 3. Run: ``.venv/bin/python scripts/bench.py [--no-peers]
[--models NAME ...] [--depths 10 100 1000 | --no-scaling]``.
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import importlib.util
import json
import logging
import math
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import bench_qkeras  # sets TF_USE_LEGACY_KERAS / TF_CPP_MIN_LOG_LEVEL defaults for children
from bench_tflite import (
    CORPUS,
    ROOT,
    Row,
    fmt,
    measure_cli,
    measure_in_process,
    one_line,
    run_command,
)

TFLITE_CORPUS = CORPUS
BENCH_VENV = ROOT / ".venv-bench"
PEER_PINS = Path(__file__).resolve().parent / "bench-peers.txt"
CACHE_DIR = Path(tempfile.gettempdir()) / "qonnx-ingest-bench"
OURS_QUANT = ("Quant", "IntQuant", "BipolarQuant")
PEER_QUANT = ("QuantizeLinear", "DequantizeLinear")
UNAVAILABLE = "unavailable: "
SINGLE_RUN_SECONDS = 1.0  # scaling: a conversion slower than this is timed once
FLAT_RATIO = 1.5  # scaling: ms/layer growing more than this from one depth to the next is not flat
TFLITE_CHAIN = "fc8_relu_int8_v1"  # cache key of the generated TFLite chains (bump on change)
REASON_WIDTH = 90


@dataclass
class Peers:
    """Which peers run, and why a peer does not (its rows then say n/a with that reason)."""

    enabled: bool = True  # False under --no-peers: no peer rows at all
    tf2onnx: str | None = None  # None: available, else the reason it is not
    tflite2onnx: str | None = None
    tflite2onnx_python: Path | None = None
    versions: dict[str, str] = field(default_factory=dict)


# --- machine and environment -------------------------------------------------------------------


def machine_line() -> str:
    """CPU, cores, RAM and Python, so that pasted figures say where they come from."""
    cpu = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    ram_kb = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                ram_kb = int(line.split()[1])
    return (
        f"machine: {cpu}, {os.cpu_count()} cores, {ram_kb / 2**20:.1f} GiB RAM; "
        f"Python {platform.python_version()} ({platform.system()} {platform.release()})"
    )


def versions_line(peers: Peers) -> str:
    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "-"

    deps = ("qonnx-ingest", "onnx", "qonnx", "tensorflow", "tf2onnx", "qkeras")
    ours = ", ".join(f"{d} {version(d)}" for d in deps)
    if peers.versions:
        own = ", ".join(f"{k} {v}" for k, v in peers.versions.items() if k != "tflite2onnx")
        theirs = f"tflite2onnx {peers.versions['tflite2onnx']} (own venv: {own})"
    else:
        theirs = "tflite2onnx " + ("n/a" if peers.enabled else "not run (--no-peers)")
    return f"versions: {ours}; {theirs}"


def bench_venv() -> tuple[Path | None, str | None]:
    """The tflite2onnx venv's interpreter, created from the pins on first use (and again when
    the pins change); (None, reason) when it cannot be installed, e.g. without network."""
    python = BENCH_VENV / "bin" / "python"
    stamp = BENCH_VENV / PEER_PINS.name
    pins = PEER_PINS.read_text()
    if python.exists() and stamp.exists() and stamp.read_text() == pins:
        return python, None
    progress(f"creating {BENCH_VENV.name}/ for tflite2onnx from {PEER_PINS.name} (first run)")
    steps = (
        [sys.executable, "-m", "venv", "--clear", str(BENCH_VENV)],
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        + ["-r", str(PEER_PINS)],
    )
    for argv in steps:
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"{Path(argv[0]).name} {argv[2]}: {type(exc).__name__}: {exc}"
        if proc.returncode != 0:
            return None, f"{argv[2]} failed: {one_line(proc.stderr or proc.stdout)}"
    stamp.write_text(pins)
    return python, None


def find_peers(enabled: bool) -> Peers:
    if not enabled:
        return Peers(False, "skipped", "skipped")
    peers = Peers()
    if importlib.util.find_spec("tf2onnx") is None:
        peers.tf2onnx = f"tf2onnx is not installed in {sys.prefix}"
    python, peers.tflite2onnx = bench_venv()
    if python is not None:
        code = (
            "import importlib.metadata as m, json; "
            "print(json.dumps({d: m.version(d) for d in ('tflite2onnx', 'onnx', 'numpy', "
            "'tflite')}))"
        )
        proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
        if proc.returncode == 0:
            peers.tflite2onnx_python = python
            peers.versions = json.loads(proc.stdout)
        else:
            peers.tflite2onnx = f"{BENCH_VENV.name} is broken: {one_line(proc.stderr)}"
    return peers


def progress(message: str) -> None:
    """Progress goes to stderr, so stdout holds only the tables (to paste)."""
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# --- measuring ---------------------------------------------------------------------------------


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


def measure_peer_cli(name: str, argv: list[str], out: Path, reason: str | None) -> Row:
    """One peer CLI run, like ``measure_cli`` for ours; any failure is a result, not an error."""
    row = Row(name)
    if reason is not None:
        row.error = UNAVAILABLE + reason
        return row
    code, row.cli_seconds, row.peak_mb, err = run_command(argv)
    if code != 0 or not out.exists():
        row.error = f"exit {code}: {one_line(err)}"
    return row


def run_worker(kind: str, args: list[str], python: Path | None = None) -> tuple[dict, str | None]:
    """Run an in-process measurement in a child (its own imports, TensorFlow included) and
    return its JSON result, or ({}, the child's last stderr line)."""
    with tempfile.TemporaryDirectory(prefix="bench_worker_") as tmp:
        result, log = Path(tmp) / "result.json", Path(tmp) / "stderr.txt"
        argv = [str(python or sys.executable), __file__, "--worker", kind, str(result), *args]
        with open(log, "wb") as stderr:
            proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=stderr, cwd=ROOT)
        if proc.returncode != 0 or not result.exists():
            return {}, f"{kind} worker exit {proc.returncode}: {one_line(log.read_text())}"
        return json.loads(result.read_text()), None


def quiet_tensorflow() -> None:
    warnings.simplefilter("ignore")
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    logging.getLogger("tf2onnx").setLevel(logging.ERROR)


def worker_tf2onnx(paths: list[str], repeat: int) -> dict[str, Any]:
    """tf2onnx's conversion time: ``from_tflite``, which its ``--tflite`` CLI runs."""
    quiet_tensorflow()
    from tf2onnx import convert

    times: dict[str, Any] = {}
    for path in paths:
        try:
            times[Path(path).name], _ = best_of(lambda p=path: convert.from_tflite(p), repeat)
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


@functools.cache
def qkeras_imports() -> tuple[Any, ...]:
    """Import and warm up TensorFlow, QKeras and tf2onnx (a tiny model through both paths) so
    that no timing includes them."""
    quiet_tensorflow()
    from tf2onnx import convert as tf2onnx_convert

    import qkeras2qonnx
    from qkeras2qonnx.backend import keras
    from qkeras2qonnx.strip import strip_model
    from qonnx_ingest.finish import DEFAULT_OPSET

    k = keras()
    warm = k.Sequential([k.Input((2,)), k.layers.Dense(1)])
    qkeras2qonnx.convert(warm)
    tf2onnx_convert.from_keras(strip_model(warm)[0], opset=DEFAULT_OPSET)
    return k, qkeras2qonnx.convert, strip_model, tf2onnx_convert.from_keras, DEFAULT_OPSET


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
    from qkeras2qonnx.load import load_model

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
    """Ours and the floor on seeded chains of QDense(8) layers of each depth."""
    k = qkeras_imports()[0]
    from qkeras import QDense, quantized_bits, quantized_relu

    # Keras builds, clones and traces functional models recursively, a few frames per layer
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20 * max(map(int, depths)) + 1000))
    rows: dict[str, Any] = {}
    for depth in map(int, depths):
        k.utils.set_random_seed(0)
        x = inputs = k.Input((8,))
        for _ in range(depth):
            q = quantized_bits(4, 0, alpha=1)
            x = QDense(8, kernel_quantizer=q, bias_quantizer=q, activation=quantized_relu(4))(x)
        model = k.Model(inputs, x)
        rows[str(depth)] = [
            asdict(row) for row in measure_qkeras(model, str(depth), repeat, SINGLE_RUN_SECONDS)
        ]
    return rows


def worker_make_tflite(depths: list[str], cache: str) -> dict[str, Any]:
    """Generate the TFLite chains missing from the cache: N x (int8 FULLY_CONNECTED(8) + RELU),
    built from a tf.function (a Keras model this deep overflows Python's recursion limit)."""
    quiet_tensorflow()
    import numpy as np
    import tensorflow as tf

    made: dict[str, Any] = {}
    for depth in map(int, depths):
        path = tflite_chain_path(Path(cache), depth)
        if path.exists():
            continue
        rng = np.random.default_rng(depth)
        layers = [
            (
                tf.constant(rng.uniform(-0.5, 0.5, (8, 8)).astype(np.float32)),
                tf.constant(rng.uniform(-0.1, 0.1, 8).astype(np.float32)),
            )
            for _ in range(depth)
        ]

        chain = dense_chain(tf, layers)
        converter = tf.lite.TFLiteConverter.from_concrete_functions(
            [chain.get_concrete_function()], chain
        )
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        samples = [rng.uniform(-1, 1, (1, 8)).astype(np.float32) for _ in range(8)]
        converter.representative_dataset = lambda s=samples: ([x] for x in s)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = converter.inference_output_type = tf.int8
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".part")
        tmp.write_bytes(converter.convert())
        tmp.replace(path)
        made[str(depth)] = str(path)
    return made


def dense_chain(tf: Any, layers: list) -> Any:
    """The traced function relu(x @ w + b) over ``layers``, which TFLite fuses per layer."""

    @tf.function(input_signature=[tf.TensorSpec((1, 8), tf.float32)])
    def chain(x: Any) -> Any:
        for w, b in layers:
            x = tf.nn.relu(tf.matmul(x, w) + b)
        return x

    return chain


def tflite_chain_path(cache: Path, depth: int) -> Path:
    return cache / f"{TFLITE_CHAIN}_{depth}.tflite"


WORKERS: dict[str, Callable[[list[str], Any], dict[str, Any]]] = {
    "tf2onnx": worker_tf2onnx,
    "tflite2onnx": worker_tflite2onnx,
    "qkeras": worker_qkeras,
    "qkeras-scaling": worker_qkeras_scaling,
    "make-tflite": worker_make_tflite,
}


def worker_main(argv: list[str]) -> int:
    """``bench.py --worker KIND RESULT.json LAST_ARG ITEMS...`` (internal): LAST_ARG is the
    repeat count, or the cache directory for make-tflite."""
    kind, result, last, *items = argv
    if kind != "make-tflite":
        last = int(last)
    Path(result).write_text(json.dumps(WORKERS[kind](items, last)))
    return 0


# --- the sections ------------------------------------------------------------------------------


def shorten(reason: str, width: int = REASON_WIDTH) -> str:
    return textwrap.shorten(reason, width, placeholder="...")


def status(row: Row, ours: bool) -> str:
    if row.error is None:
        return "ok"
    if row.error.startswith(UNAVAILABLE):
        return "n/a"
    return "refused" if ours and row.error.startswith("exit 1:") else "failed"


TOOL_WIDTH = 26


def print_table(title: str, rows: list[Row]) -> None:
    """One model: a row per tool (``Row.name`` holds the tool), ours first."""
    header = (
        f"{'tool':{TOOL_WIDTH}} {'status':7} {'cli s':>6} {'convert s':>9} {'peak MB':>7} "
        f"{'nodes':>6} {'Transpose':>9} {'quant':>5}"
    )
    print(f"\n{title}")
    print(header)
    print("-" * len(header))
    for k, row in enumerate(rows):
        cells = (
            f"{row.name:{TOOL_WIDTH}} {status(row, k == 0):7} {fmt(row.cli_seconds, '.2f', 6)} "
            f"{fmt(row.convert_seconds, '.3f', 9)} {fmt(row.peak_mb, '.0f', 7)} "
        )
        if row.error:
            print(cells + shorten(row.error.removeprefix(UNAVAILABLE)))
        else:
            print(cells + f"{row.nodes:6d} {row.transposes:9d} {row.quants:5d}")


def tflite_cli_runs(models: list[Path], peers: Peers, tmp: Path) -> dict[Path, list[Row]]:
    """Every TFLite CLI run (ours and the peers'), while this process is still small."""
    runs: dict[Path, list[Row]] = {}
    for model in models:
        progress(f"CLI runs: {model.name}")
        ours = measure_cli(model, tmp)
        ours.name = "tflite2qonnx"
        if not peers.enabled:
            runs[model] = [ours]
            continue
        out = tmp / f"{model.stem}.tf2onnx.onnx"
        tf2onnx = measure_peer_cli(
            "tf2onnx --tflite",
            [sys.executable, "-m", "tf2onnx.convert", "--tflite", str(model), "--output", str(out)],
            out,
            peers.tf2onnx,
        )
        out = tmp / f"{model.stem}.tflite2onnx.onnx"
        python = peers.tflite2onnx_python
        tool = str(python.parent / "tflite2onnx") if python else ""
        tflite2onnx = measure_peer_cli(
            "tflite2onnx", [tool, str(model), str(out)], out, peers.tflite2onnx
        )
        runs[model] = [ours, tf2onnx, tflite2onnx]
    return runs


def qkeras_cli_runs(names: list[str], tmp: Path) -> dict[str, Row]:
    runs: dict[str, Row] = {}
    for name in names:
        progress(f"CLI run: {name}")
        source, weights = bench_qkeras.MODELS[name]
        argv = [sys.executable, "-m", "qkeras2qonnx", str(bench_qkeras.CORPUS / source)]
        argv += ["-o", str(tmp / f"{name}.onnx")]
        if weights:
            argv += ["--weights", str(bench_qkeras.CORPUS / weights)]
        row = Row("qkeras2qonnx")
        code, row.cli_seconds, row.peak_mb, err = run_command(argv)
        if code != 0:
            row.error = f"exit {code}: {one_line(err).removeprefix('qkeras2qonnx: error: ')}"
        runs[name] = row
    return runs


def tflite_section(runs: dict[Path, list[Row]], peers: Peers, repeat: int, tmp: Path) -> None:
    """Conversion times (ours here, the peers in children) and graph counts; then the tables."""
    import onnx

    models = list(runs)
    workers = [
        ("tf2onnx", 1, peers.tf2onnx, None),
        ("tflite2onnx", 2, peers.tflite2onnx, peers.tflite2onnx_python),
    ]
    for kind, column, reason, python in workers:
        if reason is not None or not peers.enabled:
            continue
        paths = [str(m) for m in models if runs[m][column].error is None]
        progress(f"{kind}: conversion times in process ({len(paths)} models)")
        times, failure = run_worker(kind, [str(repeat), *paths], python) if paths else ({}, None)
        for model in models:
            row = runs[model][column]
            if row.error is not None:
                continue
            value = times.get(model.name, failure)
            if isinstance(value, float):
                row.convert_seconds = value
            elif value:
                row.error = f"in-process: {value}"
            out = tmp / f"{model.stem}.{kind}.onnx"
            count_ops(row, onnx.load(str(out), load_external_data=False), PEER_QUANT)
    progress("tflite2qonnx: conversion times in process")
    import tflite2qonnx.api  # noqa: F401  (imports out of the in-process timing, as bench_tflite)

    for model in models:
        ours = runs[model][0]
        if ours.error is None:
            measure_in_process(ours, model, repeat)
    print("\n== TFLite corpus: ours (tflite2qonnx) and the peers on the same files")
    for model in models:
        print_table(model.name, runs[model])
    print()
    for k, rows in enumerate(zip(*runs.values(), strict=True)):
        done = [r for r in rows if r.error is None]
        cli = sorted(r.cli_seconds for r in done)
        median = f"median cli {cli[len(cli) // 2]:.2f} s" if cli else "no figures"
        note = (
            f" ({rows[0].error.removeprefix(UNAVAILABLE)})"
            if status(rows[0], k == 0) == "n/a"
            else ""
        )
        print(f"{rows[0].name}: {len(done)}/{len(rows)} converted, {median}{note}")


def qkeras_section(names: list[str], cli_runs: dict[str, Row], repeat: int) -> None:
    progress(f"QKeras: ours and the floor in process ({len(names)} models)")
    results, failure = run_worker("qkeras", [str(repeat), *names])
    print("\n== QKeras corpus: ours (qkeras2qonnx) against the floor, tf2onnx from_keras on the")
    print("   stripped model (what our pipeline converts; the rest is what it adds)")
    ratios = []
    for name in names:
        ours = cli_runs[name]
        floor = Row("floor: tf2onnx from_keras")
        if name not in results:
            floor.error = failure
            if ours.error is None:
                ours.error = failure
        else:
            measured, floor_measured = (Row(**r) for r in results[name])
            if ours.error is None and measured.error is None:
                ours.convert_seconds = measured.convert_seconds
                ours.nodes, ours.transposes = measured.nodes, measured.transposes
                ours.quants = measured.quants
            elif ours.error is None:
                ours.error = f"in-process: {measured.error}"
            floor_measured.name, floor = floor.name, floor_measured
        source, weights = bench_qkeras.MODELS[name]
        print_table(f"{name} ({source}{' + ' + weights if weights else ''})", [ours, floor])
        if ours.convert_seconds and floor.convert_seconds:
            extra = ours.convert_seconds - floor.convert_seconds
            ratios.append(ours.convert_seconds / floor.convert_seconds)
            print(f"ours = floor {extra:+.3f} s ({ratios[-1]:.2f}x the floor)")
    refused = sum(status(cli_runs[n], True) == "refused" for n in names)
    done = sum(cli_runs[n].error is None for n in names)
    median = f"; median {sorted(ratios)[len(ratios) // 2]:.2f}x the floor" if ratios else ""
    print(f"\nqkeras2qonnx: {done}/{len(names)} converted, {refused} refused{median}")


def scaling_table(title: str, rows: list[tuple[int, Row, Row | None]]) -> None:
    """Per depth: seconds, ms/layer, counts; then the deepest/next ms-per-layer ratio."""
    floor = any(f is not None for _, _, f in rows)
    header = f"{'depth':>6} {'convert s':>9} {'ms/layer':>8} {'nodes':>6} {'quant':>5}"
    header += f" {'floor s':>8} {'floor ms/layer':>14}" if floor else ""
    print(f"\n{title}")
    print(header)
    print("-" * len(header))
    per_layer: dict[int, float] = {}
    floor_per_layer: dict[int, float] = {}
    for depth, row, floor_row in rows:
        if row.error:
            print(f"{depth:6d} {status(row, True)}: {shorten(row.error)}")
            continue
        per_layer[depth] = row.convert_seconds / depth * 1000
        cells = (
            f"{depth:6d} {row.convert_seconds:9.3f} {per_layer[depth]:8.2f} {row.nodes:6d} "
            f"{row.quants:5d}"
        )
        if floor_row is not None and floor_row.error is None:
            floor_per_layer[depth] = floor_row.convert_seconds / depth * 1000
            cells += f" {floor_row.convert_seconds:8.3f} {floor_per_layer[depth]:14.2f}"
        elif floor_row is not None:
            cells += f" floor failed: {shorten(floor_row.error, 60)}"
        print(cells)
    added = {d: per_layer[d] - floor_per_layer[d] for d in floor_per_layer if d in per_layer}
    for label, figures in (
        ("ms/layer", per_layer),
        ("floor ms/layer", floor_per_layer),
        ("ours minus floor, ms/layer", added),
    ):
        if len(figures) >= 2:
            (low, low_ms), (high, high_ms) = sorted(figures.items())[-2:]
            ratio = high_ms / low_ms
            verdict = "flat" if ratio <= FLAT_RATIO else f"NOT flat (> {FLAT_RATIO:g}x)"
            print(f"{label} {high}/{low}: {ratio:.2f}x, {verdict}")


def scaling_section(depths: list[int], repeat: int, cache: Path) -> None:
    import tflite2qonnx

    progress(f"scaling: generating missing TFLite chains in {cache}")
    _, failure = run_worker("make-tflite", [str(cache), *map(str, depths)])
    smallest = tflite_chain_path(cache, depths[0])
    if smallest.exists():
        tflite2qonnx.convert(smallest)  # lazy imports out of the timing (with --no-corpus)
    rows = []
    for depth in depths:
        row, path = Row(str(depth)), tflite_chain_path(cache, depth)
        if not path.exists():
            row.error = failure or "not generated"
        else:
            progress(f"scaling: tflite2qonnx, depth {depth}")
            try:
                row.convert_seconds, proto = best_of(
                    lambda p=path: tflite2qonnx.convert(p), repeat, SINGLE_RUN_SECONDS
                )
                count_ops(row, proto, OURS_QUANT)
            except Exception as exc:
                row.error = f"{type(exc).__name__}: {one_line(str(exc))}"
        rows.append((depth, row, None))
    print("\n== Scaling: conversion time per layer (should stay flat)")
    scaling_table("TFLite: N x int8 FULLY_CONNECTED(8)+RELU, tflite2qonnx.convert", rows)

    progress(f"scaling: qkeras2qonnx and the floor, depths {depths}")
    results, failure = run_worker("qkeras-scaling", [str(repeat), *map(str, depths)])
    rows = []
    for depth in depths:
        if str(depth) in results:
            ours, floor = (Row(**r) for r in results[str(depth)])
        else:
            ours, floor = Row(str(depth), error=failure), None
        rows.append((depth, ours, floor))
    scaling_table(
        "QKeras: N x QDense(8, quantized_bits(4,0,alpha=1), activation=quantized_relu(4)),\n"
        "qkeras2qonnx.convert; floor: tf2onnx from_keras on the stripped model",
        rows,
    )


# --- main --------------------------------------------------------------------------------------


def select_models(names: list[str] | None) -> tuple[list[Path], list[str]]:
    """TFLite files and QKeras corpus names: all by default, else by path or name substring."""
    tflite = sorted(TFLITE_CORPUS.glob("*.tflite"))
    qkeras = [n for n in bench_qkeras.MODELS if bench_qkeras.CORPUS.is_dir()]
    if names is None:
        return tflite, qkeras
    chosen_tflite: list[Path] = []
    chosen_qkeras: list[str] = []
    for name in names:
        path = Path(name)
        found = [path] if path.suffix == ".tflite" and path.is_file() else []
        found += [m for m in tflite if name in m.name and m not in found]
        chosen_tflite += [m for m in found if m not in chosen_tflite]
        matched = [n for n in qkeras if name in n]
        chosen_qkeras += [n for n in matched if n not in chosen_qkeras]
        if not found and not matched:
            raise SystemExit(f"bench: no corpus model matches {name!r}")
    return chosen_tflite, chosen_qkeras


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return worker_main(argv[1:])
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Tables go to stdout, progress to stderr.",
    )
    parser.add_argument(
        "--models",
        nargs="+",
        metavar="NAME",
        help="corpus models to run: .tflite paths or substrings of TFLite file names / QKeras "
        f"names ({', '.join(bench_qkeras.MODELS)}); default: the whole corpus",
    )
    parser.add_argument("--no-peers", action="store_true", help="run ours only")
    parser.add_argument("--no-corpus", action="store_true", help="skip the per-model tables")
    parser.add_argument(
        "--depths",
        nargs="+",
        type=int,
        default=[10, 100, 1000],
        metavar="N",
        help="scaling depths (default: 10 100 1000)",
    )
    parser.add_argument("--no-scaling", action="store_true", help="skip the scaling section")
    parser.add_argument(
        "--repeat", type=int, default=3, metavar="N", help="in-process conversions, best of N"
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=CACHE_DIR,
        metavar="DIR",
        help=f"where the generated TFLite chains are kept (default: {CACHE_DIR})",
    )
    args = parser.parse_args(argv)
    if any(d < 1 for d in args.depths):
        parser.error("depths must be positive")
    start = time.perf_counter()
    tflite, qkeras = ([], []) if args.no_corpus else select_models(args.models)
    peers = find_peers(not args.no_peers and bool(tflite))
    print(machine_line())
    print(versions_line(peers))
    with tempfile.TemporaryDirectory(prefix="bench_") as name:
        tmp = Path(name)
        # every CLI run first: a child's ru_maxrss starts at this process's RSS at fork time
        tflite_runs = tflite_cli_runs(tflite, peers, tmp)
        qkeras_runs = qkeras_cli_runs(qkeras, tmp)
        if tflite_runs:
            tflite_section(tflite_runs, peers, args.repeat, tmp)
        if qkeras_runs:
            qkeras_section(qkeras, qkeras_runs, args.repeat)
    if not args.no_scaling:
        scaling_section(sorted(set(args.depths)), args.repeat, args.cache_dir)
    print(f"\ntotal bench time {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
