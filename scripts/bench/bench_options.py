"""compare.py's options-overhead section: what ``--report``, ``--format qcdq`` and ``--encodings``
add to a whole CLI run on Coral MobileNet v2, against the conversion's own time."""

from __future__ import annotations

import math
import sys
from pathlib import Path

from bench_common import progress
from bench_tables import shorten, status
from bench_tflite import Row, fmt, measure_in_process, one_line, run_command

CORAL = "coral__tf2_mobilenet_v2_1.0_224_ptq.tflite"  # the options-overhead model


OPTIONS = (  # the options-overhead rows: (label, extra CLI arguments; {tmp} is the temp dir)
    ("--report", ["--report"]),
    ("--format qcdq", ["--format", "qcdq"]),
    ("--encodings FILE", ["--encodings", "{tmp}/encodings.json"]),
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
