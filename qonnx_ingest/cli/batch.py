"""Many models per run: expand the inputs (directories, --recursive), plan one output per
model, run the same command on each model in a process of its own (--jobs at a time), print
a one-line result per model and a summary table (or --json), and exit with the worst code.

A process per model means a crash, a hang in a native library or leaked global state in one
model can never stop or corrupt the others; each child writes its own output atomically. A
tool whose imports are heavy (qkeras2qonnx: TensorFlow) names a worker module instead
(``ModelScan.workers``): ``batch_workers`` runs the same command in reused processes, each
replaced when its model crashes or times out.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from qonnx_ingest import __version__
from qonnx_ingest.cli.batch_pool import Children, run_all
from qonnx_ingest.cli.batch_result import (  # noqa: F401  (STATUS: what each exit code reads as)
    KILL_GRACE_SECONDS,
    STATUS,
    Job,
    Result,
    outcome,
    timed_out,
)
from qonnx_ingest.cli.batch_workers import Workers, convert_in_worker
from qonnx_ingest.cli.options import (
    EXIT_INTERRUPTED,
    EXIT_UNVERIFIED,
    Member,
    default_output,
    fail,
    output_path,
)
from qonnx_ingest.errors import InputError

if TYPE_CHECKING:
    from qonnx_ingest.cli.options import ModelScan

# options that name one file or print one model's text: meaningless for many models
SINGLE_ONLY = {
    "report": "--report",
    "report_json": "--report-json",
    "encodings": "--encodings",
    "verify_inputs": "--verify-inputs",
    "weights": "--weights",
    "member": "--member",
}
# options the batch itself consumes; everything else is passed to each model's run
NOT_FORWARDED = {
    *("inputs", "output", "recursive", "jobs", "json", "quiet", "help", "version", "result_file")
}
WRITTEN = ("converted", "failed verification")  # the model is on disk (the latter to inspect)
ORDER = ("converted", "refused", "failed verification", "timed out", "crashed", "interrupted")
ORDER += ("not run",)


def run_batch(parser: argparse.ArgumentParser, args: argparse.Namespace, scan: ModelScan) -> int:
    prog = parser.prog
    start = time.perf_counter()
    created: list[Path] = []
    try:
        # one model file (--json): -o names its file and --report-json and the like work, as
        # without --json
        single = len(args.inputs) == 1 and not scan.expands(args.inputs[0], args)
        _refuse_single_only(args, single)
        models = expand(args.inputs, scan, args.recursive, not scan.member_given(args))
        plan = plan_outputs(models, args.output, created, single)
    except InputError as exc:
        return fail(prog, str(exc), exc.exit_code, False)
    options = forwarded_options(parser, args)
    err = sys.stderr
    lines = err if args.json else sys.stdout
    running = Children()
    workers = Workers(scan.workers, args.jobs) if scan.workers else None

    def one(item: tuple[str, str | None, Result | None]) -> Result | None:
        model, output, refused = item
        if running.stopped:
            return None  # started as Ctrl-C came: not run
        if refused is None:
            argv = [*options, *scan.companion_args(model)]
            kind = scan.route(model) if workers is not None else None
            job = Job(prog, model, output, argv, args.timeout)
            if kind is None:
                result = _convert_one(job, running)
            else:
                result = convert_in_worker(job, running, workers, kind)
        outcome = refused or result
        # a model that was not converted is an error line: stderr, as for one model
        stream = lines if outcome.status == "converted" else err
        print(_line(prog, outcome), file=stream, flush=True)
        return outcome

    try:
        done, interrupted = run_all(plan, one, args.jobs, running)
    finally:
        if workers is not None:
            workers.close()
        for folder in reversed(created):  # directories made for outputs that never came
            with contextlib.suppress(OSError):
                folder.rmdir()
    results = [
        r or Result(plan[i][0], None, "not run", EXIT_INTERRUPTED, message="interrupted")
        for i, r in enumerate(done)
    ]
    wall = time.perf_counter() - start
    worst = EXIT_INTERRUPTED if interrupted else worst_code(r.exit_code for r in results)
    if args.json:
        print(json.dumps(summary_document(prog, results, wall, args.jobs, worst), indent=2))
    else:
        print(table(results, wall, args.jobs), file=lines)
    if interrupted:
        left = sum(r.status in ("not run", "interrupted") for r in results)
        print(f"{prog}: interrupted: {left} of {len(results)} models not converted", file=err)
    return worst


def worst_code(codes: Iterable[int]) -> int:
    """The batch's exit code: the highest failure's; 5 (written, verification skipped) only
    when every other model converted."""
    codes = set(codes)
    failed = max((c for c in codes if c != EXIT_UNVERIFIED), default=0)
    return failed or (EXIT_UNVERIFIED if EXIT_UNVERIFIED in codes else 0)


def _refuse_single_only(args: argparse.Namespace, single: bool = False) -> None:
    """Options for one model; with one model (--json), those that print on stdout, which
    holds the JSON document alone."""
    for dest, option in SINGLE_ONLY.items():
        value = getattr(args, dest, None)
        if value and not single:
            raise InputError(f"{option} works on one model at a time: give a single MODEL")
        if value is True or value == "-":
            raise InputError(f"--json keeps stdout for its JSON document: {option} cannot print")
    if args.output == "-" and single:
        raise InputError("--json keeps stdout for its JSON document: -o - cannot write there")
    if args.output == "-":
        raise InputError("-o - writes one model to stdout: give a single MODEL")


def expand(
    inputs: Sequence[str], scan: ModelScan, recursive: bool, bundles: bool = True
) -> list[tuple[str, str]]:
    """(model path, path relative to the directory it was found in, or its name); a bundle
    file's models (``bundles``) each as a ``Member``, relative to the bundle's directory."""
    models: list[tuple[str, str]] = []
    for given in inputs:
        path = Path(given)
        if not path.exists():
            models.append((given, path.name))  # its own run reports "no such file"
            continue
        if not scan.is_folder(path):
            models.extend(_members(given, path.name, scan, bundles))
            continue
        found = _scan(path, scan, recursive)
        if not found and scan.foreign_kind(path):
            raise InputError(scan.foreign_kind(path), given)
        if not found:
            where = "in it or below it" if recursive else "in it (--recursive looks below it)"
            wanted = " or ".join(scan.suffixes) or "model"
            # a directory may have been meant as a model itself (a SavedModel): say it is not
            savedmodel = f"not a Keras SavedModel (no {scan.marker}) and " if scan.marker else ""
            raise InputError(f"is {savedmodel}a directory with no {wanted} file {where}", given)
        for p in found:
            models.extend(_members(str(p), str(p.relative_to(path)), scan, bundles))
    return models


def _members(model: str, relative: str, scan: ModelScan, bundles: bool) -> list[tuple[str, str]]:
    """A bundle's models, each under a directory named after the bundle; any other file (a
    bundle that cannot be read too: its own run says why) is itself."""
    found = scan.bundle_members(model) if bundles else []
    if not found:
        return [(model, relative)]
    stem = Path(relative).with_suffix("")
    return [(m, str(stem / scan.member_output(m.name))) for m in found]


def _scan(folder: Path, scan: ModelScan, recursive: bool) -> list[Path]:
    found = []
    entries = sorted(folder.iterdir())
    # X.json + X_weights.h5 is one model (the .json, run with the weights); a lone .json is not
    paired = {scan.companion(e) for e in entries if e.suffix.lower() in scan.pairs} - {None}
    for entry in entries:
        if entry.is_dir() and scan.is_model_dir(entry):
            found.append(entry)
        elif entry.is_dir():
            if recursive:
                found.extend(_scan(entry, scan, recursive))
        elif entry in paired:
            continue
        elif entry.suffix.lower() in scan.suffixes or scan.companion(entry) is not None:
            found.append(entry)
    return found


def plan_outputs(
    models: list[tuple[str, str]], output: str | None, created: list[Path], single: bool = False
) -> list[tuple[str, str | None, Result | None]]:
    """(model, its output, or a refusal when another model already writes there); ``single``:
    one model, whose -o is a file or a directory as ``output_path`` reads it."""
    if single:
        ((model, _),) = models
        out, make_dir = output_path(output, model)
        if make_dir is not None:
            _mkdir(make_dir, created)
        return [(model, str(out), None)]
    folder = None
    if output:
        folder = Path(output)
        if not folder.is_dir():
            if not output.endswith(("/", os.sep)):
                raise InputError("with several models, -o names a directory (add a /)", output)
            if not folder.parent.is_dir():
                raise InputError("output directory does not exist", str(folder.parent))
            folder.mkdir()
            created.append(folder)
    plan, taken = [], {}
    for model, relative in models:
        member = isinstance(model, Member)
        out = default_output(model.beside if member else model)
        out = out if folder is None else folder / default_output(relative)
        key = os.path.normcase(os.path.abspath(out))
        if key in taken:
            message = f"{model}: same output {out} as {taken[key]}: convert it separately"
            plan.append((model, str(out), Result(model, None, "refused", 2, 0.0, message)))
            continue
        taken[key] = model
        # a bundle's members go into a directory named after it (beside it without -o)
        base = folder if folder is not None else Path(model.bundle).parent if member else None
        if base is not None and not out.parent.is_dir():
            for parent in reversed(out.parent.relative_to(base).parents[:-1]):
                _mkdir(base / parent, created)
            _mkdir(out.parent, created)
        plan.append((model, str(out), None))
    return plan


def _mkdir(path: Path, created: list[Path]) -> None:
    if not path.is_dir():
        path.mkdir()
        created.append(path)


def forwarded_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The command line options given, rebuilt from the parsed values for each model's run."""
    argv: list[str] = []
    for action in parser._actions:
        if action.dest in NOT_FORWARDED or not action.option_strings:
            continue
        value = getattr(args, action.dest, action.default)
        if value == action.default or value is None:
            continue
        option = action.option_strings[-1]
        if isinstance(action, argparse._StoreTrueAction):
            argv.append(option)
        elif isinstance(action, argparse._AppendAction):
            for item in value:
                argv.extend((option, str(item)))
        else:
            argv.extend((option, str(value)))
    return argv


def _convert_one(job: Job, running: Children) -> Result:
    prog, model, output, options, timeout = job
    with tempfile.TemporaryDirectory(prefix="qonnx-ingest-") as scratch:
        result_file = Path(scratch) / "result.json"
        source = model.bundle if isinstance(model, Member) else model  # --member in options
        command = [sys.executable, "-m", prog, source, *options, "--quiet"]
        command += ["--result-file", str(result_file)]
        if output is not None:
            command[4:4] = ["-o", output]
        start = time.perf_counter()
        with subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # a Ctrl-C reaches the batch, which passes it on (batch_pool)
        ) as child:
            running.add(child)
            try:
                stdout, stderr = child.communicate(
                    timeout=timeout + KILL_GRACE_SECONDS if timeout else None
                )
            except subprocess.TimeoutExpired:
                child.kill()
                child.communicate()
                return timed_out(model, output, timeout, time.perf_counter() - start, child.pid)
            finally:
                running.discard(child)
        written = json.loads(result_file.read_text()) if result_file.is_file() else {}
    seconds = time.perf_counter() - start
    return outcome(prog, model, output, child.returncode, stderr, written, seconds, child.pid)


def _line(prog: str, r: Result) -> str:
    if r.status == "converted":
        line = f"{prog}: converted {r.input} -> {r.output} ({r.message}) in {r.seconds:.2f} s"
        if r.verification_skipped:
            line += f"; verification skipped: {r.verification_skipped}"
        elif r.verification:
            line += "; verify: ok"
        return line
    if r.status == "interrupted":
        return f"{prog}: interrupted {r.input}"
    message = r.message.removeprefix(f"{r.input}: ")  # the line names the model already
    return f"{prog}: {r.status} {r.input}: {message}"


def table(results: Sequence[Result], wall: float, jobs: int) -> str:
    """Models and seconds per outcome; seconds are each model's own process time, summed."""
    rows = [("result", "models", "seconds")]
    for status in ORDER:
        chosen = [r for r in results if r.status == status]
        if chosen or status in ORDER[:3]:  # rare outcomes only when seen
            rows.append((status, str(len(chosen)), f"{sum(r.seconds for r in chosen):.2f}"))
    rows.append(("total", str(len(results)), f"{sum(r.seconds for r in results):.2f}"))
    width = max(len(r[0]) for r in rows)
    lines = [f"{a:<{width}}  {b:>6}  {c:>8}" for a, b, c in rows]
    lines.append(f"wall time {wall:.2f} s with --jobs {jobs}")
    return "\n".join(lines)


def summary_document(
    prog: str, results: Sequence[Result], wall: float, jobs: int, worst: int
) -> dict:
    counts = {status: sum(r.status == status for r in results) for status in ORDER}
    return {
        "tool": prog,
        "version": __version__,
        "models": [asdict(r) | {"seconds": round(r.seconds, 3)} for r in results],
        "summary": counts | {"total": len(results)},
        "wall_seconds": round(wall, 3),
        "jobs": jobs,
        "exit_code": worst,
    }
