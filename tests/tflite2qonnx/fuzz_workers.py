"""The fuzzer's harness: persistent worker subprocesses (``fuzz_tflite.py --worker``) under
``RLIMIT_AS``, a timeout per case, a worker replaced when it hangs, dies or runs out of memory,
and the ``Report`` of every case's outcome."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from fuzz_case import planned_faults, run_case
from fuzz_mutations import Corpus

ROOT = Path(__file__).resolve().parents[2]
FUZZ_TFLITE = Path(__file__).resolve().with_name("fuzz_tflite.py")  # the workers run it
CORPUS = ROOT.parent / "shared" / "corpus" / "tflite"
PROBLEMS = ("crash", "hang", "blowup")
STATUSES = ("converted", "rejected", *PROBLEMS)
BOOT_SECONDS = 120.0  # worker start-up (imports) and per-case mutation (first walk of a model)


def limit_memory(mem_bytes: int, core_dumps: bool = False) -> None:
    """RLIMIT_AS for the calling process (a worker: in preexec_fn); no core files."""
    if mem_bytes > 0:
        resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
    if not core_dumps:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def worker_main(seed: int, corpus: Corpus) -> int:
    """Loop: read a case index from stdin, answer ``start`` then one JSON line on stdout."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # whatever the converter prints must not garble the answers
    import tflite2qonnx.api  # noqa: F401  (imports before "ready", so they are not timed)

    faults = planned_faults()
    out.write("ready\n")
    for line in sys.stdin:
        index = int(line)
        case = corpus.case(seed, index)
        about = {"index": index, "model": case.model, "mutation": case.description}
        out.write("start " + json.dumps(about) + "\n")
        start, said = time.perf_counter(), os.fstat(2).st_size
        result = run_case(case.data, faults.get(index))
        result["seconds"] = round(time.perf_counter() - start, 3)
        if os.fstat(2).st_size > said:  # C++ libraries write to fd 2 past Python
            result["stderr"] = _tail_of_fd2(said)
        result.update(about)
        out.write(json.dumps(result) + "\n")
        if result["status"] == "blowup":
            return 0  # the parent starts a fresh worker
    return 0


def _tail_of_fd2(since: int) -> str:
    """What the case wrote to this worker's stderr (a file the parent gave it)."""
    text = os.pread(2, os.fstat(2).st_size - since, since)
    lines = text.decode(errors="replace").strip().splitlines()
    return " | ".join(lines[-2:])[-300:]


class _Worker:
    def __init__(self, cmd: list[str], mem_bytes: int):
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115  (closed by stop())
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            cwd=ROOT,
            env=env,
            preexec_fn=lambda: limit_memory(mem_bytes),
        )
        self.fd = self.proc.stdout.fileno()
        self.buffer = b""
        self.case: int | None = None
        self.phase = "boot"  # boot -> idle -> generating -> running -> idle ...
        self.deadline = time.monotonic() + BOOT_SECONDS
        self.about: dict = {}
        self.tail = ""

    def lines(self) -> list[str] | None:
        """Complete lines now readable; None at end of file (the worker died)."""
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            return None
        self.buffer += chunk
        *complete, self.buffer = self.buffer.split(b"\n")
        return [c.decode() for c in complete]

    def send(self, index: int, timeout: float) -> bool:
        self.case, self.phase = index, "generating"
        self.deadline = time.monotonic() + BOOT_SECONDS
        try:
            self.proc.stdin.write(f"{index}\n".encode())
            self.proc.stdin.flush()
        except OSError:
            return False
        return True

    def stderr_tail(self) -> str:
        self.stderr.seek(0)
        text = self.stderr.read().decode(errors="replace").strip().splitlines()
        return " | ".join(text[-3:])[-400:]

    def stop(self, kill: bool) -> int:
        if kill and self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        code = self.proc.wait()
        self.proc.stdout.close()
        self.tail = self.stderr_tail()  # what it said before it went, for the report
        self.stderr.close()
        return code


@dataclass
class Report:
    seed: int
    cases: int
    seconds: float = 0.0
    results: list[dict] = field(default_factory=list)
    restarts: int = 0

    def counts(self) -> dict[str, int]:
        c = collections.Counter(r["status"] for r in self.results)
        return {s: c.get(s, 0) for s in STATUSES}

    def problems(self) -> list[dict]:
        return sorted(
            (r for r in self.results if r["status"] in PROBLEMS), key=lambda r: r["index"]
        )


def fuzz(
    cases: int = 10000,
    seed: int = 0,
    jobs: int = 2,
    timeout: float = 10.0,
    mem_gb: float = 2.0,
    corpus_paths: Iterable[Path] | None = None,
    start: int = 0,
    progress: Callable[[Report], None] | None = None,
) -> Report:
    """Run cases ``start .. start + cases - 1`` of ``seed`` on ``jobs`` worker processes."""
    paths = sorted(corpus_paths) if corpus_paths is not None else sorted(CORPUS.glob("*.tflite"))
    Corpus(paths)  # fail early on an empty corpus
    cmd = [sys.executable, str(FUZZ_TFLITE), "--worker", "--seed", str(seed)]
    cmd += ["--corpus", *map(str, paths)]
    mem_bytes = int(mem_gb * (1 << 30))
    report = Report(seed=seed, cases=cases)
    todo = collections.deque(range(start, start + cases))
    t0 = time.perf_counter()
    workers = [_Worker(cmd, mem_bytes) for _ in range(max(1, min(jobs, cases)))]

    def finish(w: _Worker, result: dict) -> None:
        report.results.append(result)
        w.case, w.phase = None, "idle"
        if progress is not None:
            progress(report)

    def replace(w: _Worker, kill: bool) -> _Worker:
        w.stop(kill)
        report.restarts += 1
        return _Worker(cmd, mem_bytes)

    def died(w: _Worker, code: int) -> dict:
        tail = w.tail
        memory = code == -9 or re.search(r"MemoryError|bad_alloc|out of memory", tail)
        return {
            "status": "blowup" if memory else "crash",
            "error": f"worker died ({_exit_name(code)})",
            "message": tail,
        }

    try:
        while todo or any(w.case is not None for w in workers):
            for k, w in enumerate(workers):
                if w.phase == "idle" and todo and not w.send(todo.popleft(), timeout):
                    todo.appendleft(w.case)
                    workers[k] = replace(w, kill=True)
            busy = {w.fd: w for w in workers if w.phase != "idle"}
            if not busy:
                break
            wait = max(0.0, min(w.deadline for w in busy.values()) - time.monotonic())
            ready, _, _ = select.select(list(busy), [], [], wait)
            now = time.monotonic()
            for k, w in enumerate(workers):
                if w.fd in ready:
                    lines = w.lines()
                    if lines is None:  # the worker died
                        index, phase = w.case, w.phase
                        code = w.stop(kill=True)
                        if index is not None and phase == "running":
                            result = {**w.about, **died(w, code)}
                            report.results.append(result)
                            if progress is not None:
                                progress(report)
                        elif index is not None:  # died before the case began: retry it
                            raise RuntimeError(
                                f"fuzz worker died ({_exit_name(code)}) while {phase} case "
                                f"{index}: {w.tail}"
                            )
                        report.restarts += 1
                        workers[k] = _Worker(cmd, mem_bytes)
                        continue
                    for line in lines:
                        if line == "ready":
                            w.phase = "idle"
                        elif line.startswith("start "):
                            w.phase, w.about = "running", json.loads(line[6:])
                            w.deadline = time.monotonic() + timeout
                        else:
                            result = json.loads(line)
                            finish(w, result)
                            if result["status"] == "blowup":
                                workers[k] = replace(w, kill=True)
                                break
                elif w.phase != "idle" and now >= w.deadline:
                    if w.phase != "running":
                        raise RuntimeError(f"fuzz worker stuck while {w.phase} (case {w.case})")
                    result = {
                        **w.about,
                        "status": "hang",
                        "error": "timeout",
                        "message": f"no answer after {timeout:g} s",
                    }
                    workers[k] = replace(w, kill=True)
                    report.results.append(result)
                    if progress is not None:
                        progress(report)
    finally:
        for w in workers:
            w.stop(kill=True)
    report.seconds = time.perf_counter() - t0
    report.results.sort(key=lambda r: r["index"])
    return report


def _exit_name(code: int) -> str:
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit {code}"
