"""Time and size ``tflite2qonnx`` on .tflite models (default: every model of the corpus).

Per model:

- cli s:     wall time of the whole command, ``python -m tflite2qonnx MODEL -o tmp.onnx``, in a
             subprocess (interpreter start-up, imports, reading, converting, writing);
- convert s: in-process ``tflite2qonnx.convert(MODEL)``, best of 3 (imports already done);
- peak MB:   peak resident set size of that CLI subprocess (``ru_maxrss`` of its own rusage,
             collected with ``os.wait4``, i.e. RUSAGE_CHILDREN for that one child). All CLI
             runs happen before this script imports the converter: Linux starts a child's
             ru_maxrss at the parent's RSS at fork time;
- nodes, Transpose, Quant: counts in the converted graph.

A model that does not convert shows the CLI's one-line error instead of figures. Target: the
whole CLI run under 1 s per model. Prints figures; it is not a test. --bit-exact has its own
bench, ``scripts/bench/run.py bit-exact`` (agreement, node growth, onnxruntime cost).
Run: ``.venv/bin/python scripts/bench/run.py tflite [MODEL.tflite ...]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CORPUS = ROOT.parent / "shared" / "corpus" / "tflite"
TARGET_CLI_SECONDS = 1.0
QUANT_TYPES = ("Quant", "IntQuant")


@dataclass
class Row:
    name: str
    cli_seconds: float | None = None
    peak_mb: float | None = None
    convert_seconds: float | None = None
    nodes: int | None = None
    transposes: int | None = None
    quants: int | None = None
    error: str | None = None


def run_cli(model: Path, out: Path) -> tuple[int, float, float, str]:
    """(exit code, wall seconds, peak RSS MB, stderr) of one CLI run in a fresh process."""
    return run_command([sys.executable, "-m", "tflite2qonnx", str(model), "-o", str(out)])


def run_command(argv: list[str]) -> tuple[int, float, float, str]:
    """(exit code, wall seconds, peak RSS MB, stderr) of any command in a fresh process, run
    from the project root (scripts/bench/run.py all measures the peers with it too)."""
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        start = time.perf_counter()
        proc = subprocess.Popen(
            argv,
            stdout=stdout,
            stderr=stderr,
            cwd=ROOT,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        stderr.seek(0)
        err = stderr.read().decode(errors="replace")
    peak_mb = usage.ru_maxrss / 1024  # kilobytes on Linux
    return proc.returncode, seconds, peak_mb, err


def one_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no message)"


def measure_cli(model: Path, workdir: Path) -> Row:
    row = Row(model.name)
    code, row.cli_seconds, row.peak_mb, err = run_cli(model, workdir / (model.stem + ".onnx"))
    if code != 0:
        row.error = f"exit {code}: {one_line(err).removeprefix('tflite2qonnx: error: ')}"
    return row


def measure_in_process(row: Row, model: Path, repeat: int) -> None:
    import tflite2qonnx

    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            converted = tflite2qonnx.convert(model)
        except Exception as exc:  # the CLI converted it; report rather than crash
            row.error = f"in-process: {type(exc).__name__}: {one_line(str(exc))}"
            return
        best = min(best, time.perf_counter() - start)
    row.convert_seconds = best
    ops = [n.op_type for n in converted.graph.node]
    row.nodes, row.transposes = len(ops), ops.count("Transpose")
    row.quants = sum(ops.count(t) for t in QUANT_TYPES)


def fmt(value, spec: str, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:{width}{spec}}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", type=Path, help=f"default: {CORPUS}/*.tflite")
    parser.add_argument("--repeat", type=int, default=3, help="in-process conversions (best of)")
    args = parser.parse_args()
    models = args.models or sorted(CORPUS.glob("*.tflite"))
    if not models:
        parser.error(f"no models given and none found in {CORPUS}")

    with tempfile.TemporaryDirectory(prefix="bench_tflite_") as tmp:
        # every CLI run first: a child's ru_maxrss starts from this process's RSS at fork time
        # (Linux keeps the pre-exec high-water mark), so this process must still be small
        rows = [measure_cli(model, Path(tmp)) for model in models]
    import tflite2qonnx.api  # noqa: F401  (imports out of the in-process timing)

    for row, model in zip(rows, models, strict=True):
        if row.error is None:
            measure_in_process(row, model, args.repeat)

    width = max(len(m.name) for m in models)
    header = (
        f"{'model':{width}} {'cli s':>6} {'peak MB':>7} {'convert s':>9} "
        f"{'nodes':>6} {'Transpose':>9} {'Quant':>5}  target"
    )
    print(f"target: whole CLI run < {TARGET_CLI_SECONDS:g} s per model")
    print("peak MB: max RSS of the per-model CLI subprocess (os.wait4 rusage ru_maxrss)")
    print(header)
    print("-" * len(header))
    slow = failed = 0
    for row in rows:
        cells = f"{row.name:{width}} {fmt(row.cli_seconds, '.2f', 6)} {fmt(row.peak_mb, '.0f', 7)} "
        if row.error:
            failed += 1
            print(cells + f"FAILED {row.error}")
            continue
        ok = row.cli_seconds < TARGET_CLI_SECONDS
        slow += not ok
        print(
            cells + f"{fmt(row.convert_seconds, '.3f', 9)} {row.nodes:6d} "
            f"{row.transposes:9d} {row.quants:5d}  {'ok' if ok else 'SLOW'}"
        )
    converted = len(models) - failed
    print(
        f"{converted}/{len(models)} converted; {converted - slow}/{converted} within "
        f"{TARGET_CLI_SECONDS:g} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
