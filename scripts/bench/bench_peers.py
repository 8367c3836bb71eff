"""compare.py's peers and machine: which peers run (tflite2onnx in its own venv, from the pins in
bench-peers.txt), the machine and versions lines, and one peer CLI run."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import platform
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bench_common import NOT_RUN, UNAVAILABLE, progress
from bench_tflite import ROOT, Row, one_line, run_command

BENCH_VENV = ROOT / ".venv-bench"
PEER_PINS = Path(__file__).resolve().parent / "bench-peers.txt"


@dataclass
class Peers:
    """Which peers run, and why a peer does not (its rows then say n/a with that reason)."""

    enabled: bool = True  # False under --no-peers: no peer rows at all
    tf2onnx: str | None = None  # None: available, else the reason it is not
    tflite2onnx: str | None = None
    tflite2onnx_python: Path | None = None
    versions: dict[str, str] = field(default_factory=dict)


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
