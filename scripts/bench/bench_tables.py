"""compare.py's table pieces: the status column, shortened reasons, one table per model, and the
PASS/FAIL lines."""

from __future__ import annotations

import textwrap

from bench_common import UNAVAILABLE
from bench_tflite import Row, fmt

REASON_WIDTH = 90


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


def verdict(ok: bool, target: str, figure: str) -> None:
    print(f"  {'PASS' if ok else 'FAIL'}  {target}: {figure}")
