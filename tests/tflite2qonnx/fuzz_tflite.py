"""Fuzz ``tflite2qonnx.convert`` with mutated copies of the corpus TFLite models.

Each case is one corpus model with one to four seeded mutations:

- byte level: bit flips, byte runs overwritten with random bytes / 0xFF / 0x00, truncation,
  inserted or deleted byte ranges, aligned int32 words set to boundary values;
- structure aware: the fields the reader actually dereferences (root and table uoffsets, table
  soffsets, vtable entries, vector and string lengths, scalar fields such as buffer / opcode
  indices, elements of shape and index vectors, small constant buffers) set to boundary values,
  and operator swaps (an OperatorCode turned into another convertible operator, so converters
  meet operands and options made for a different one). The fields are found by reading the
  unmutated model once with ``flatbuffers.table.Table`` instrumented, so no schema is restated
  here.

Every case runs in a persistent worker subprocess (``--jobs`` of them) with ``RLIMIT_AS``
(``--mem-gb``) set in the child; the parent gives each case ``--timeout`` seconds and replaces
a worker that hangs, dies or runs out of memory. Outcomes:

- converted: a QONNX model came out (and serializes);
- rejected:  ConversionError / InputError (what the CLI reports in one line, exit 1 or 2);
- crash:     any other exception (the CLI's "internal error"), or the worker died;
- hang:      no answer within the timeout;
- blowup:    MemoryError, or the worker was killed for memory.

A case is identified by ``--seed`` and its index; ``--case I`` reruns one in-process with its
traceback (``--dump FILE`` writes its bytes). The corpus files are only read. Exit status 1 if
any case crashed, hung or blew up.

Run: ``.venv/bin/python scripts/fuzz.py [--cases 10000] [--seed 0] [--jobs 2]``.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT, Path(__file__).resolve().parent):  # the package; the other fuzz_* modules
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

# what the tests use (fuzz, Corpus, print_report, PROBLEMS, FAULT_ENV) is re-exported here
from fuzz_case import FAULT_ENV  # noqa: E402
from fuzz_mutations import Corpus  # noqa: E402
from fuzz_report import print_report  # noqa: E402
from fuzz_workers import CORPUS, PROBLEMS, STATUSES, Report, fuzz, limit_memory, worker_main  # noqa: E402

__all__ = ["FAULT_ENV", "PROBLEMS", "Corpus", "fuzz", "main", "print_report"]


def _time_out(signum, frame):
    raise TimeoutError("the case ran past --timeout (the traceback shows where)")


def rerun(
    corpus: Corpus, seed: int, index: int, dump: Path | None, mem_gb: float, timeout: float
) -> int:
    """One case in this process, with the full traceback of anything but a clean rejection
    (a hang becomes a TimeoutError raised where the conversion was)."""
    limit_memory(int(mem_gb * (1 << 30)), core_dumps=True)
    case = corpus.case(seed, index)
    print(f"case {index} (seed {seed}): {case.model}: {case.description}")
    if dump is not None:
        dump.write_bytes(case.data)
        print(f"wrote {len(case.data)} bytes to {dump}")
    from qonnx_ingest.errors import ConversionError
    from tflite2qonnx import convert

    start = time.perf_counter()
    previous = signal.signal(signal.SIGALRM, _time_out)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        convert(case.data).SerializeToString()
    except ConversionError as exc:
        print(f"rejected ({type(exc).__name__}, exit code {exc.exit_code}): {exc}")
        return 0
    except Exception:
        traceback.print_exc()
        return 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        print(f"{time.perf_counter() - start:.2f} s")
    print("converted")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10000, help="number of cases (10000)")
    parser.add_argument("--start", type=int, default=0, help="first case index (0)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the mutations (0)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (2)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per case (10)")
    parser.add_argument("--mem-gb", type=float, default=2.0, help="RLIMIT_AS per worker (2)")
    parser.add_argument("--case", type=int, help="rerun this case in-process, with traceback")
    parser.add_argument("--dump", type=Path, help="with --case: write the mutated bytes here")
    parser.add_argument("--top", type=int, default=15, help="rejection kinds to list (15)")
    parser.add_argument(
        "--corpus", nargs="+", type=Path, help=f"models to mutate (default: {CORPUS}/*.tflite)"
    )
    parser.add_argument("--json", type=Path, help="also write every case's result here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    paths = args.corpus or sorted(CORPUS.glob("*.tflite"))
    if args.worker:
        return worker_main(args.seed, Corpus(paths))
    if args.case is not None:
        return rerun(Corpus(paths), args.seed, args.case, args.dump, args.mem_gb, args.timeout)

    last = [0.0]

    def progress(report: Report) -> None:
        now = time.perf_counter()
        if now - last[0] > 30:
            last[0] = now
            c = report.counts()
            done = ", ".join(f"{s} {c[s]}" for s in STATUSES)
            print(f"  ... {len(report.results)}/{report.cases}: {done}", file=sys.stderr)

    report = fuzz(
        cases=args.cases,
        seed=args.seed,
        jobs=args.jobs,
        timeout=args.timeout,
        mem_gb=args.mem_gb,
        corpus_paths=paths,
        start=args.start,
        progress=progress,
    )
    print_report(report, top=args.top)
    if args.json is not None:
        args.json.write_text(json.dumps(report.results, indent=0) + "\n")
    return 1 if report.problems() else 0


if __name__ == "__main__":
    sys.exit(main())
