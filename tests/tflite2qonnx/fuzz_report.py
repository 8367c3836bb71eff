"""The fuzzer's printed report: counts per outcome, the problem cases, and the most frequent
rejection messages with their numbers and quoted names blanked."""

from __future__ import annotations

import collections
import re
import sys

from fuzz_workers import STATUSES, Report


def _pattern(message: str) -> str:
    """A rejection message with the numbers and names taken out, to group similar ones."""
    text = re.sub(r"'[^']*'", "'…'", message)
    text = re.sub(r"-?\d+(\.\d+)?", "N", text)
    return text.split(": ", 1)[-1] if text.startswith("<bytes>") else text


def print_report(report: Report, top: int = 15, out=sys.stdout) -> None:
    counts = report.counts()
    n = len(report.results)
    print(
        f"fuzz_tflite: seed {report.seed}, {n} cases in {report.seconds:.1f} s "
        f"({n / max(report.seconds, 1e-9):.1f} cases/s, {report.restarts} worker restarts)",
        file=out,
    )
    print("  " + ", ".join(f"{s} {counts[s]}" for s in STATUSES), file=out)
    by_model: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in report.results:
        by_model[r["model"]][r["status"]] += 1
    print("  per model:", file=out)
    for model in sorted(by_model):
        c = by_model[model]
        print(f"    {model:50s} " + " ".join(f"{s}={c[s]}" for s in STATUSES if c[s]), file=out)
    rejections = collections.Counter(
        _pattern(r["message"]) for r in report.results if r["status"] == "rejected"
    )
    if rejections and top:
        print(f"  most frequent rejections (of {len(rejections)} kinds):", file=out)
        for text, k in rejections.most_common(top):
            print(f"    {k:6d}  {text[:150]}", file=out)
    noisy = [r for r in report.results if r.get("stderr")]
    if noisy:  # C++ logging (onnxruntime): the CLIs silence it, API callers see it
        print(f"  {len(noisy)} cases wrote to stderr past Python (not a problem), e.g.:", file=out)
        for r in noisy[:5]:
            print(f"    case {r['index']} ({r['status']}): {r['stderr'][:150]}", file=out)
    slow = sorted(report.results, key=lambda r: -r.get("seconds", 0))[:3]
    if slow and "seconds" in slow[0]:
        print(
            "  slowest: "
            + ", ".join(f"case {r['index']} {r.get('seconds', 0):.2f} s" for r in slow),
            file=out,
        )
    problems = report.problems()
    if problems:
        print(f"  {len(problems)} problems:", file=out)
    for r in problems:
        print(
            f"  {r['status'].upper()} case {r['index']} [{r['model']}: {r['mutation']}]: "
            f"{r['error']}: {r['message']}",
            file=out,
        )
        if r.get("where"):
            print(f"      at {' <- '.join(reversed(r['where']))}", file=out)
        print(
            f"      rerun: .venv/bin/python scripts/fuzz.py --seed {report.seed} "
            f"--case {r['index']}",
            file=out,
        )
