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
3. Large models (``--no-large`` skips): whole CLI runs of ours and ``tf2onnx --tflite`` on
   ``tflm__dp_net.tflite`` (2,338 operators, 776 FULLY_CONNECTED on a few shared weights) and on
   a generated float32 model whose one 128x128 weight tensor is read by 1,000
   FULLY_CONNECTED (``Chain``: 500 cells, 2,500 operators, 4 outputs, a bias constant per
   FULLY_CONNECTED): time, peak RSS, output bytes against the TFLite file's constant bytes,
   initializers; PASS/FAIL against the issue's dp_net targets (ours at most 1/10 of tf2onnx's
   time and under 3 s, output at most 1.1x the weight bytes, peak memory under 2x tf2onnx's).
4. Options overhead (``--no-options`` skips): whole CLI runs on Coral MobileNet v2, plain and
   with ``--report``, ``--format qcdq``, ``--encodings FILE``; what each adds, against the
   conversion's own time (in process), the issue's bound.
5. Scaling: conversion time per operator of generated models of growing size (default 10, 100,
   1000, 5000 operators), which should stay flat (target: at most 1.5x from 100 to the
   largest): int8 ``Chain`` models of 8 features shaped like real graphs (every FULLY_CONNECTED on
   one shared weight tensor, a constant per FULLY_CONNECTED, 4 outputs; TensorFlow's
   TFLiteConverter with full-integer post-training quantization and a seeded representative
   set, cached in ``--cache-dir``), ours beside tf2onnx's ``from_tflite``; and chains of
   ``QDense(8, quantized_bits(4, 0, alpha=1), activation=quantized_relu(4))`` layers with 4
   outputs (shared layers are refused by design), ours beside the floor, capped at
   ``--qkeras-max-depth`` layers (2000; the chains are built without tracing each layer's call,
   ``qdense_chain``, ~10 ms per layer, but tf2onnx's own time per layer grows with depth).

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

Scaling: ``ms/op`` is conversion time / operators of the source model (TFLite operators or
Keras layers; one run when a conversion takes over 1 s, else best of ``--repeat``); the ratio
lines compare ms/op at the largest size with 100 operators (else the next size), about 1x when
flat. The QKeras rows also give what our pipeline adds to the floor per layer, which separates
our own passes from tf2onnx's (whose time per layer grows with depth by itself): the target is
on that.

Prints figures; it is not a test. On the 2-core VM, shared: the large-models, options and
TFLite scaling sections take about 5 min, the QKeras scaling chains up to 2000 layers about
15 (``--depths 10 100 1000`` about 5); the corpus tables about 5. The first run also creates
``.venv-bench`` and generates the TFLite models (about 2 min). Run: ``.venv/bin/python
scripts/bench.py [--no-peers] [--models NAME ...] [--no-corpus] [--no-large] [--no-options]
[--depths 10 100 1000 5000 | --no-scaling]``.
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
NOT_RUN = "not run (no corpus model)"
SINGLE_RUN_SECONDS = 1.0  # scaling: a conversion slower than this is timed once
FLAT_RATIO = 1.5  # scaling: ms/operator at the deepest over ms/operator at REFERENCE_DEPTH
REFERENCE_DEPTH = 100  # scaling: what the deepest is compared with (else the next depth)
DEFAULT_DEPTHS = (10, 100, 1000, 5000)
QKERAS_MAX_DEPTH = 2000  # tf2onnx's from_keras (in ours and the floor) slows per layer with depth
CHAIN_VERSION = 2  # cache key of the generated TFLite models (bump when the generator changes)
CELL_OPS = 5  # a generated cell: 2 FULLY_CONNECTED (one shared weight) + TANH + LOGISTIC + MUL
CHAIN_OUTPUTS = 4  # graph outputs of a generated model, tapped evenly along the chain
SCALING_WIDTH = 8  # the scaling chains: int8, 8 features
LARGE_WIDTH, LARGE_CELLS = 128, 500  # the large generated model: float32, 1,000 uses of 128x128
CORAL = "coral__tf2_mobilenet_v2_1.0_224_ptq.tflite"  # the options-overhead model
DP_NET = "tflm__dp_net.tflite"
# the issue's targets for dp_net
DP_NET_MAX_CLI_SECONDS = 3.0
MAX_TIME_VS_PEER = 0.1  # our whole CLI run over tf2onnx's
MAX_SIZE_VS_WEIGHTS = 1.1  # output bytes over the TFLite file's constant-tensor bytes
MAX_MEMORY_VS_PEER = 2.0  # our peak RSS over tf2onnx's
OPTIONS = (  # the options-overhead rows: (label, extra CLI arguments; {tmp} is the temp dir)
    ("--report", ["--report"]),
    ("--format qcdq", ["--format", "qcdq"]),
    ("--encodings FILE", ["--encodings", "{tmp}/encodings.json"]),
)
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
    elif not peers.enabled:
        theirs = "tflite2onnx not run (--no-peers)"
    else:
        theirs = "tflite2onnx " + (NOT_RUN if peers.tflite2onnx == NOT_RUN else "n/a")
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


def find_peers(enabled: bool, tflite2onnx: bool = True) -> Peers:
    """The peers; tflite2onnx (and its venv) only when ``tflite2onnx`` (it runs on the corpus
    alone)."""
    if not enabled:
        return Peers(False, "skipped", "skipped")
    peers = Peers()
    if importlib.util.find_spec("tf2onnx") is None:
        peers.tf2onnx = f"tf2onnx is not installed in {sys.prefix}"
    if not tflite2onnx:
        peers.tflite2onnx = NOT_RUN
        return peers
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


def qdense_chain(depth: int, traced: bool = False) -> Any:
    """The QKeras scaling chain: ``depth`` x QDense(8, quantized_bits(4, 0, alpha=1),
    activation=quantized_relu(4)), seeded, ``CHAIN_OUTPUTS`` outputs tapped along it.

    Calling a layer on a Keras tensor traces its ``call`` (autograph-converted QKeras
    quantizers, ~110 TensorFlow ops) into a scratch graph only to learn the output's shape:
    0.1 s per layer on a quiet machine, 0.6 s under load, half an hour for 2,000 layers. Unless
    ``traced``, each layer is built from its input's shape and told its output's (8 features)
    through Keras's static path for eager-only layers (``dynamic``), switched off again before
    the model is made: the same layers, names, config and weights (the seed draws them in the
    same order) without the tracing, so building is linear and ~25x faster.
    """
    import tensorflow as tf
    from qkeras import QDense, quantized_bits, quantized_relu

    k = qkeras_imports()[0]
    k.backend.clear_session()  # layer names from q_dense, as in a fresh process
    k.utils.set_random_seed(0)
    x = inputs = k.Input((8,))
    outputs, tapped, layers = [], taps(depth), []
    for index in range(depth):
        q = quantized_bits(4, 0, alpha=1)
        layer = QDense(8, kernel_quantizer=q, bias_quantizer=q, activation=quantized_relu(4))
        if not traced:
            with tf.name_scope(layer._name_scope()):  # weights named as a traced call names them
                layer._maybe_build(x)
            spec = tf.TensorSpec((*x.shape[:-1], 8), x.dtype)
            layer.compute_output_signature = lambda _, spec=spec: spec
            layer._dynamic = True
        x = layer(x)
        layers.append(layer)
        if index in tapped:
            outputs.append(x)
    for layer in layers:
        if not traced:
            layer._dynamic = False
            del layer.compute_output_signature
    return k.Model(inputs, outputs)


@dataclass(frozen=True)
class Chain:
    """A generated TFLite model shaped like real ones: ``cells`` x (h = FULLY_CONNECTED(x), all
    reading ONE weight tensor; x = tanh(h) * sigmoid(h + c_i)), with a distinct constant c_i
    per cell (TFLite folds it into a second FULLY_CONNECTED's bias: many small constants) and
    ``CHAIN_OUTPUTS`` graph outputs tapped along the chain; int8 (full-integer post-training
    quantization, seeded representative set) or float32. ``CELL_OPS`` operators per cell."""

    cells: int
    width: int
    int8: bool

    @classmethod
    def scaling(cls, ops: int) -> Chain:
        return cls(max(1, round(ops / CELL_OPS)), SCALING_WIDTH, True)

    @classmethod
    def parse(cls, text: str) -> Chain:
        cells, width, int8 = text.split(",")
        return cls(int(cells), int(width), int8 == "int8")

    def __str__(self) -> str:
        return f"{self.cells},{self.width},{'int8' if self.int8 else 'float32'}"

    def path(self, cache: Path) -> Path:
        dtype = "int8" if self.int8 else "f32"
        return cache / f"gated_shared_{dtype}_w{self.width}_x{self.cells}_v{CHAIN_VERSION}.tflite"


def worker_make_tflite(chains: list[str], cache: str) -> dict[str, Any]:
    """Generate the ``Chain`` models missing from the cache, from a tf.function (a Keras model
    this deep overflows Python's recursion limit)."""
    quiet_tensorflow()
    import numpy as np
    import tensorflow as tf

    made: dict[str, Any] = {}
    for chain in map(Chain.parse, chains):
        path = chain.path(Path(cache))
        if path.exists():
            continue
        progress(f"generating {path.name}")
        rng = np.random.default_rng(chain.cells)
        width = chain.width
        weight = rng.uniform(-1, 1, (width, width)) * (1.5 / math.sqrt(width))
        constants = [rng.uniform(-0.5, 0.5, width) for _ in range(chain.cells)]
        fn = dense_chain(
            tf,
            tf.constant(weight.astype(np.float32)),
            tf.constant(rng.uniform(-0.1, 0.1, width).astype(np.float32)),
            [tf.constant(c.astype(np.float32)) for c in constants],
        )
        converter = tf.lite.TFLiteConverter.from_concrete_functions(
            [fn.get_concrete_function()], fn
        )
        if chain.int8:
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
            samples = [rng.uniform(-1, 1, (1, width)).astype(np.float32) for _ in range(8)]
            converter.representative_dataset = lambda s=samples: ([x] for x in s)
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            converter.inference_input_type = converter.inference_output_type = tf.int8
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".part")
        tmp.write_bytes(converter.convert())
        tmp.replace(path)
        made[str(chain)] = str(path)
    return made


def taps(depth: int) -> set[int]:
    """The layers (or cells) of a chain of ``depth`` whose outputs are graph outputs."""
    return {round(depth * (k + 1) / CHAIN_OUTPUTS) - 1 for k in range(CHAIN_OUTPUTS)}


def dense_chain(tf: Any, weight: Any, bias: Any, constants: list) -> Any:
    """The traced function of ``Chain``: one cell per constant, every matmul on ``weight``."""
    width = weight.shape[0]
    outputs = taps(len(constants))

    @tf.function(input_signature=[tf.TensorSpec((1, width), tf.float32)])
    def chain(x: Any) -> Any:
        tapped = []
        for k, c in enumerate(constants):
            h = tf.matmul(x, weight) + bias
            x = tf.tanh(h) * tf.sigmoid(h + c)
            if k in outputs:
                tapped.append(x)
        return tapped

    return chain


WORKERS: dict[str, Callable[[list[str], Any], dict[str, Any]]] = {
    "tf2onnx": worker_tf2onnx,
    "tf2onnx-scaling": functools.partial(worker_tf2onnx, budget=SINGLE_RUN_SECONDS),
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


def tflite_cli_runs(
    models: list[Path], peers: Peers, tmp: Path, tflite2onnx: bool = True
) -> dict[Path, list[Row]]:
    """Every TFLite CLI run (ours and the peers'), while this process is still small."""
    runs: dict[Path, list[Row]] = {}
    for model in models:
        progress(f"CLI runs: {model.name}")
        ours = measure_cli(model, tmp)
        ours.name = "tflite2qonnx"
        if not peers.enabled:
            runs[model] = [ours]
            continue
        if not tflite2onnx:
            out = tmp / f"{model.stem}.tf2onnx.onnx"
            argv = [sys.executable, "-m", "tf2onnx.convert", "--tflite", str(model)]
            argv += ["--output", str(out)]
            runs[model] = [ours, measure_peer_cli("tf2onnx --tflite", argv, out, peers.tf2onnx)]
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


def large_cli_runs(
    models: list[Path], peers: Peers, tmp: Path, corpus_runs: dict[Path, list[Row]]
) -> dict[Path, list[Row]]:
    """[ours, tf2onnx] CLI runs of the large models (those of the corpus run already reused;
    the same output files)."""
    runs = {m: corpus_runs[m][:2] for m in models if m in corpus_runs}
    missing = [m for m in models if m not in runs and m.exists()]
    runs.update(tflite_cli_runs(missing, peers, tmp, tflite2onnx=False))
    return {m: runs[m] for m in models if m in runs}


def verdict(ok: bool, target: str, figure: str) -> None:
    print(f"  {'PASS' if ok else 'FAIL'}  {target}: {figure}")


def large_section(runs: dict[Path, list[Row]], missing: list[str], tmp: Path) -> None:
    """Whole CLI runs, ours against tf2onnx, on models large in operators, with the issue's
    targets for dp_net (and the same ratios, for reference, on the generated model)."""
    import onnx

    from tflite2qonnx.reader import read_model

    print("\n== Large models: whole CLI runs, ours (tflite2qonnx) and tf2onnx --tflite")
    print(
        "   x weights: output bytes over the TFLite file's constant-tensor bytes (sum of "
        "data.nbytes);\n   targets (the issue's, for dp_net): ours <= "
        f"{MAX_TIME_VS_PEER:g}x tf2onnx's time and < {DP_NET_MAX_CLI_SECONDS:g} s, output <= "
        f"{MAX_SIZE_VS_WEIGHTS:g}x the weights, peak memory < {MAX_MEMORY_VS_PEER:g}x tf2onnx's"
    )
    for name in missing:
        print(f"\n{name}: n/a (not found or not generated)")
    header = (
        f"{'tool':{TOOL_WIDTH}} {'status':7} {'cli s':>6} {'peak MB':>7} {'out bytes':>11} "
        f"{'x weights':>9} {'nodes':>6} {'initializers':>12}"
    )
    for model, rows in runs.items():
        subgraphs = read_model(model).subgraphs
        constants = [t for g in subgraphs for t in g.tensors if t.data is not None]
        weights = sum(t.data.nbytes for t in constants)
        operators = sum(len(g.operators) for g in subgraphs)
        print(
            f"\n{model.name}: {operators:,} operators, {len(constants):,} constant tensors, "
            f"{weights:,} weight bytes, file {model.stat().st_size:,} bytes"
        )
        print(header)
        print("-" * len(header))
        sizes: list[float | None] = []
        for k, (row, suffix) in enumerate(zip(rows, (".onnx", ".tf2onnx.onnx"), strict=False)):
            cells = (
                f"{row.name:{TOOL_WIDTH}} {status(row, k == 0):7} {fmt(row.cli_seconds, '.2f', 6)}"
                f" {fmt(row.peak_mb, '.0f', 7)} "
            )
            out = tmp / f"{model.stem}{suffix}"
            if row.error or not out.exists():
                sizes.append(None)
                print(cells + shorten(row.error.removeprefix(UNAVAILABLE) if row.error else "?"))
                continue
            graph = onnx.load(str(out), load_external_data=False).graph
            size = out.stat().st_size
            sizes.append(size / weights if weights else None)
            print(
                cells + f"{size:11,d} {fmt(sizes[-1], '.2f', 9)} {len(graph.node):6d} "
                f"{len(graph.initializer):12d}"
            )
        ours, peer = rows[0], rows[1] if len(rows) > 1 else None
        if ours.error:
            continue
        compared = peer is not None and peer.error is None
        if model.name != DP_NET:  # the targets are dp_net's: figures only
            line = f"ours: output {fmt(sizes[0], '.2f', 0)}x the weight bytes"
            if compared:
                line += (
                    f" (tf2onnx {fmt(sizes[1], '.2f', 0)}x); ours / tf2onnx: time "
                    f"{ours.cli_seconds / peer.cli_seconds:.3f}x, peak memory "
                    f"{ours.peak_mb / peer.peak_mb:.2f}x"
                )
            print(line)
            continue
        if compared:
            ratio = ours.cli_seconds / peer.cli_seconds
            verdict(
                ratio <= MAX_TIME_VS_PEER,
                f"whole CLI run <= {MAX_TIME_VS_PEER:g}x tf2onnx's",
                f"{ours.cli_seconds:.2f} s vs {peer.cli_seconds:.2f} s ({ratio:.3f}x)",
            )
        verdict(
            ours.cli_seconds < DP_NET_MAX_CLI_SECONDS,
            f"whole CLI run < {DP_NET_MAX_CLI_SECONDS:g} s",
            f"{ours.cli_seconds:.2f} s",
        )
        if sizes[0] is not None:
            verdict(
                sizes[0] <= MAX_SIZE_VS_WEIGHTS,
                f"output <= {MAX_SIZE_VS_WEIGHTS:g}x the weight bytes",
                f"{sizes[0]:.3f}x",
            )
        if compared:
            ratio = ours.peak_mb / peer.peak_mb
            verdict(
                ratio < MAX_MEMORY_VS_PEER,
                f"peak memory < {MAX_MEMORY_VS_PEER:g}x tf2onnx's",
                f"{ours.peak_mb:.0f} MB vs {peer.peak_mb:.0f} MB ({ratio:.2f}x)",
            )


def best_cli(name: str, argv: list[str], repeat: int) -> Row:
    """Best wall time of ``repeat`` whole CLI runs (one more only while a run is under 5 s),
    with the peak RSS of the slowest; a failure is the row's error."""
    row = Row(name)
    for _ in range(max(1, repeat)):
        code, seconds, peak_mb, err = run_command(argv)
        if code != 0:
            row.error = f"exit {code}: {one_line(err).removeprefix('tflite2qonnx: error: ')}"
            return row
        row.cli_seconds = min(seconds, row.cli_seconds or math.inf)
        row.peak_mb = max(peak_mb, row.peak_mb or 0.0)
        if seconds > 5:
            break
    return row


def options_cli_runs(model: Path, tmp: Path, repeat: int) -> list[Row]:
    """Plain conversion, then one row per ``OPTIONS`` entry, each best of ``repeat``."""
    rows = []
    for label, extra in (("(plain)", []), *OPTIONS):
        progress(f"options: {model.name} {label}")
        argv = [sys.executable, "-m", "tflite2qonnx", str(model), "-o", str(tmp / "options.onnx")]
        rows.append(best_cli(label, argv + [a.format(tmp=tmp) for a in extra], repeat))
    return rows


def options_section(model: Path, rows: list[Row], repeat: int) -> None:
    """What each option adds to the plain CLI run, against the conversion's own time
    (in-process ``tflite2qonnx.convert``, best of ``repeat``): the target is added <= that."""
    import tflite2qonnx.api  # noqa: F401  (imports out of the in-process timing)

    conversion = Row(model.name)
    if rows[0].error is None:
        measure_in_process(conversion, model, repeat)
    plain = rows[0].cli_seconds
    own = conversion.convert_seconds
    print(f"\n== Options overhead: tflite2qonnx on {model.name}")
    print(
        f"   whole CLI runs, best of {repeat} (one run past 5 s); the conversion's own time "
        f"(in process): {fmt(own, '.3f', 0)} s;\n   target: each option adds at most the "
        "conversion's own time"
    )
    header = (
        f"{'option':18} {'status':7} {'cli s':>6} {'peak MB':>7} {'added s':>8} "
        f"{'x plain cli':>11} {'x conversion':>12}  target"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        cells = (
            f"{row.name:18} {status(row, True):7} {fmt(row.cli_seconds, '.2f', 6)} "
            f"{fmt(row.peak_mb, '.0f', 7)} "
        )
        if row.error:
            print(cells + shorten(row.error))
            continue
        if row is rows[0] or plain is None:
            print(cells + f"{'-':>8}")
            continue
        added = row.cli_seconds - plain
        if own is None:
            print(cells + f"{added:+8.2f} {added / plain:11.2f}x")
            continue
        ok = "PASS" if added <= own else "FAIL"
        print(
            cells + f"{added:+8.2f} {added / plain:10.2f}x {added / own:11.2f}x  {ok} "
            f"({added:.2f} s vs {own:.2f} s)"
        )


def ratio_line(label: str, figures: dict[int, float], target: bool) -> None:
    """ms/operator at the deepest over ms/operator at ``REFERENCE_DEPTH`` (else the next
    depth): a verdict against ``FLAT_RATIO`` when ``target``, else flat / NOT flat."""
    if len(figures) < 2:
        return
    high, high_ms = max(figures.items())
    lows = [d for d in figures if d < high]
    low = REFERENCE_DEPTH if REFERENCE_DEPTH in lows else max(lows)
    ratio = high_ms / figures[low]
    if target:
        verdict = "PASS" if ratio <= FLAT_RATIO else "FAIL"
        verdict += f" (target <= {FLAT_RATIO:g}x)"
    else:
        verdict = "flat" if ratio <= FLAT_RATIO else f"NOT flat (> {FLAT_RATIO:g}x)"
    print(f"{label} {high}/{low}: {figures[low]:.2f} -> {high_ms:.2f} ms, {ratio:.2f}x, {verdict}")


def scaling_table(
    title: str, rows: list[tuple[int, Row, Row | None]], peer: str, added_target: bool
) -> None:
    """Per size (operators of the source model): seconds, ms/operator, counts, and the peer's
    (tf2onnx); then the deepest-over-reference ms-per-operator ratios. ``added_target``: the
    target is on ours minus the peer (QKeras), else on ours."""
    has_peer = any(p is not None for _, _, p in rows)
    header = f"{'ops':>6} {'convert s':>9} {'ms/op':>7} {'nodes':>6} {'quant':>5}"
    header += f" {peer + ' s':>12} {peer + ' ms/op':>14}" if has_peer else ""
    print(f"\n{title}")
    print(header)
    print("-" * len(header))
    per_op: dict[int, float] = {}
    peer_per_op: dict[int, float] = {}
    for ops, row, peer_row in rows:
        if row.error:
            print(f"{ops:6d} {status(row, True)}: {shorten(row.error)}")
            continue
        per_op[ops] = row.convert_seconds / ops * 1000
        cells = (
            f"{ops:6d} {row.convert_seconds:9.3f} {per_op[ops]:7.2f} {row.nodes:6d} {row.quants:5d}"
        )
        if peer_row is not None and peer_row.error is None:
            peer_per_op[ops] = peer_row.convert_seconds / ops * 1000
            cells += f" {peer_row.convert_seconds:12.3f} {peer_per_op[ops]:14.2f}"
        elif peer_row is not None:
            cells += f" {peer} {status(peer_row, False)}: {shorten(peer_row.error, 60)}"
        print(cells)
    added = {d: per_op[d] - peer_per_op[d] for d in peer_per_op if d in per_op}
    ratio_line("ours, ms/op", per_op, not added_target)
    ratio_line(f"{peer}, ms/op", peer_per_op, False)
    if added_target:
        ratio_line(f"ours minus {peer}, ms/op", added, True)


def scaling_chains(depths: list[int]) -> dict[int, Chain]:
    return {depth: Chain.scaling(depth) for depth in depths}


def scaling_section(
    depths: list[int],
    qkeras_max: int,
    peers: Peers,
    repeat: int,
    cache: Path,
    tflite: bool = True,
) -> None:
    if tflite:
        tflite_scaling(depths, peers, repeat, cache)
    qkeras_scaling(depths, qkeras_max, repeat)


def tflite_scaling(depths: list[int], peers: Peers, repeat: int, cache: Path) -> None:
    import tflite2qonnx
    from tflite2qonnx.reader import read_model

    chains = scaling_chains(depths)
    smallest = chains[depths[0]].path(cache)
    if smallest.exists():
        tflite2qonnx.convert(smallest)  # lazy imports out of the timing (with --no-corpus)
    peer_times: dict[str, Any] = {}
    peer_failure = peers.tf2onnx if peers.enabled else None
    paths = [str(c.path(cache)) for c in chains.values() if c.path(cache).exists()]
    if peers.enabled and peers.tf2onnx is None and paths:
        progress(f"scaling: tf2onnx from_tflite, {len(paths)} chains")
        peer_times, peer_failure = run_worker("tf2onnx-scaling", [str(repeat), *paths])
    rows = []
    for depth, chain in chains.items():
        row, path = Row(str(depth)), chain.path(cache)
        ops = depth
        if not path.exists():
            row.error = "not generated (see the make-tflite worker's error above)"
        else:
            ops = sum(len(g.operators) for g in read_model(path).subgraphs)
            progress(f"scaling: tflite2qonnx, {ops} operators")
            try:
                row.convert_seconds, proto = best_of(
                    lambda p=path: tflite2qonnx.convert(p), repeat, SINGLE_RUN_SECONDS
                )
                count_ops(row, proto, OURS_QUANT)
            except Exception as exc:
                row.error = f"{type(exc).__name__}: {one_line(str(exc))}"
        peer_row = None
        if peers.enabled:
            peer_row = Row(str(depth))
            value = peer_times.get(path.name, peer_failure or "no result")
            if isinstance(value, float):
                peer_row.convert_seconds = value
            else:
                peer_row.error = value
        rows.append((ops, row, peer_row))
    print("\n== Scaling: conversion time per operator (should stay flat)")
    scaling_table(
        f"TFLite: int8 cells of 2 FULLY_CONNECTED({SCALING_WIDTH}) on ONE shared weight tensor "
        f"+ TANH + LOGISTIC + MUL,\na distinct bias constant per FULLY_CONNECTED, "
        f"{CHAIN_OUTPUTS} graph outputs; tflite2qonnx.convert and tf2onnx from_tflite",
        rows,
        "tf2onnx",
        added_target=False,
    )


def qkeras_scaling(depths: list[int], qkeras_max: int, repeat: int) -> None:
    qkeras_depths = sorted({min(d, qkeras_max) for d in depths})
    progress(f"scaling: qkeras2qonnx and the floor, {qkeras_depths} layers")
    results, failure = run_worker("qkeras-scaling", [str(repeat), *map(str, qkeras_depths)])
    rows = []
    builds = []
    for depth in qkeras_depths:
        if str(depth) in results:
            ours, floor, build = results[str(depth)]
            ours, floor = Row(**ours), Row(**floor)
            builds.append(f"{depth}: {build:.0f} s")
        else:
            ours, floor = Row(str(depth), error=failure), None
        rows.append((depth, ours, floor))
    scaling_table(
        "QKeras: N x QDense(8, quantized_bits(4,0,alpha=1), activation=quantized_relu(4)), each "
        f"its own weights,\n{CHAIN_OUTPUTS} graph outputs (a shared layer is refused by "
        "design); qkeras2qonnx.convert; floor: tf2onnx from_keras\non the stripped model",
        rows,
        "floor",
        added_target=True,
    )
    if builds:
        print(f"(Keras build of the chain, not timed above: {', '.join(builds)})")
    if qkeras_depths != depths:
        print(
            f"(QKeras chains are capped at {qkeras_max} layers, --qkeras-max-depth:"
            " tf2onnx's from_keras, run by ours and by the floor, takes longer per layer the deeper"
            " the chain)"
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
        "--no-large", action="store_true", help="skip the large-models section (dp_net, shared)"
    )
    parser.add_argument(
        "--no-options", action="store_true", help=f"skip the options-overhead section ({CORAL})"
    )
    parser.add_argument(
        "--depths",
        nargs="+",
        type=int,
        default=list(DEFAULT_DEPTHS),
        metavar="N",
        help="scaling sizes, in operators of the source model (TFLite operators, Keras layers; "
        f"default: {' '.join(map(str, DEFAULT_DEPTHS))})",
    )
    parser.add_argument(
        "--qkeras-max-depth",
        type=int,
        default=QKERAS_MAX_DEPTH,
        metavar="N",
        help="QKeras scaling chains stop at N layers: a deeper size is measured at N "
        f"(default: {QKERAS_MAX_DEPTH}; tf2onnx alone takes minutes on 5000 QDense layers)",
    )
    parser.add_argument("--no-scaling", action="store_true", help="skip the scaling section")
    parser.add_argument(
        "--no-tflite-scaling",
        action="store_true",
        help="scaling: the QKeras chains only (the TFLite chains and tf2onnx on them skipped)",
    )
    parser.add_argument(
        "--repeat", type=int, default=3, metavar="N", help="in-process conversions, best of N"
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=CACHE_DIR,
        metavar="DIR",
        help=f"where the generated TFLite models are kept (default: {CACHE_DIR})",
    )
    args = parser.parse_args(argv)
    if any(d < 1 for d in args.depths) or args.qkeras_max_depth < 1:
        parser.error("depths must be positive")
    start = time.perf_counter()
    depths = sorted(set(args.depths))
    tflite, qkeras = ([], []) if args.no_corpus else select_models(args.models)
    large = [] if args.no_large else [TFLITE_CORPUS / DP_NET]
    large_chain = Chain(LARGE_CELLS, LARGE_WIDTH, int8=False)
    chains = [] if args.no_large else [large_chain]
    if not (args.no_scaling or args.no_tflite_scaling):
        chains += list(scaling_chains(depths).values())
    coral = None if args.no_options else TFLITE_CORPUS / CORAL
    peers = find_peers(
        not args.no_peers and bool(tflite or large or not args.no_scaling), bool(tflite)
    )
    print(machine_line())
    print(versions_line(peers))
    if chains:
        progress(f"generating the missing TFLite models in {args.cache_dir}")
        _, failure = run_worker("make-tflite", [str(args.cache_dir), *map(str, chains)])
        if failure:
            print(f"\ngenerating the TFLite models failed: {failure}")
    if not args.no_large:
        large.append(large_chain.path(args.cache_dir))
    missing = [m.name for m in large if not m.exists()]
    with tempfile.TemporaryDirectory(prefix="bench_") as name:
        tmp = Path(name)
        # every CLI run first: a child's ru_maxrss starts at this process's RSS at fork time
        tflite_runs = tflite_cli_runs(tflite, peers, tmp)
        qkeras_runs = qkeras_cli_runs(qkeras, tmp)
        large_runs = large_cli_runs(large, peers, tmp, tflite_runs)
        option_runs = []
        if coral is not None and coral.exists():
            option_runs = options_cli_runs(coral, tmp, args.repeat)
        if tflite_runs:
            tflite_section(tflite_runs, peers, args.repeat, tmp)
        if qkeras_runs:
            qkeras_section(qkeras, qkeras_runs, args.repeat)
        if large:
            large_section(large_runs, missing, tmp)
        if option_runs:
            options_section(coral, option_runs, args.repeat)
        elif coral is not None:
            print(f"\n== Options overhead: n/a ({coral} not found)")
    if not args.no_scaling:
        scaling_section(
            depths,
            args.qkeras_max_depth,
            peers,
            args.repeat,
            args.cache_dir,
            tflite=not args.no_tflite_scaling,
        )
    print(f"\ntotal bench time {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
