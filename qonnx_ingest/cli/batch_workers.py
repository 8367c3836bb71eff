"""Reused worker processes for a batch (``--jobs`` of them at most), each converting many
models so TensorFlow is imported once per worker, not once per model.

A worker is of one kind (``ModelScan.route``: the QKeras flavour a process commits to) and
takes only models of that kind. Isolation stays per model where it matters: a worker that
crashes, passes its model's --timeout (it is killed), or timed out or was interrupted inside
(its state is no longer trusted) takes no other model; the next one gets a new worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from qonnx_ingest.cli.batch_result import KILL_GRACE_SECONDS, Job, Result, outcome, timed_out
from qonnx_ingest.cli.options import EXIT_INTERRUPTED

if TYPE_CHECKING:
    from qonnx_ingest.cli.batch_pool import Children

WORKER_MODULE = "qonnx_ingest.cli.batch_worker"
STARTUP_SECONDS = 600.0  # a worker's imports; past this it counts as its model's timeout


class Worker:
    """One worker process and its job pipe."""

    def __init__(self, cli_module: str, kind: str):
        self.kind = kind
        self.process = subprocess.Popen(
            [sys.executable, "-m", WORKER_MODULE, cli_module, kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # each job's stderr goes to a file of its own
            start_new_session=True,  # a Ctrl-C reaches the batch, which passes it on
        )
        self.pid = self.process.pid
        self._pending = b""
        self._ready = False

    def start(self) -> bool:
        """Wait until the worker has made its imports; False if it died meanwhile."""
        if not self._ready:
            self._ready = self._reply(STARTUP_SECONDS) is not None
        return self._ready

    def run(self, job: dict, timeout: float | None) -> int | None:
        """The job's exit code, or None if the worker died; ``subprocess.TimeoutExpired`` if
        no answer came within ``timeout`` seconds."""
        try:
            self.process.stdin.write((json.dumps(job) + "\n").encode())
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        reply = self._reply(timeout)
        return None if reply is None else int(reply["code"])

    def _reply(self, timeout: float | None) -> dict | None:
        end = None if timeout is None else time.monotonic() + timeout
        fd = self.process.stdout.fileno()
        while b"\n" not in self._pending:
            left = None if end is None else max(0.0, end - time.monotonic())
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise subprocess.TimeoutExpired(self.process.args, timeout)
            chunk = os.read(fd, 4096)
            if not chunk:
                return None
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return json.loads(line)

    def exit_code(self) -> int:
        """The exit code of a worker that died (negative: the signal that killed it)."""
        return self.process.wait()

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.process.kill()
        self.process.wait()
        self._close_pipes()

    def _close_pipes(self) -> None:
        for pipe in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                pipe.close()


class Workers:
    """At most ``size`` live workers; ``acquire`` gives an idle one of the kind asked for, or
    starts one (ending an idle worker of another kind when ``size`` are alive)."""

    def __init__(self, cli_module: str, size: int):
        self._cli_module = cli_module
        self._size = size
        self._lock = threading.Lock()
        self._idle: list[Worker] = []
        self._alive = 0

    def acquire(self, kind: str) -> Worker:
        retired = None
        with self._lock:
            for worker in self._idle:
                if worker.kind == kind:
                    self._idle.remove(worker)
                    return worker
            if self._alive >= self._size and self._idle:
                retired = self._idle.pop(0)
                self._alive -= 1
            self._alive += 1
        if retired is not None:  # idle: nothing of its own to finish
            retired.kill()
        return Worker(self._cli_module, kind)

    def release(self, worker: Worker, reusable: bool) -> None:
        if reusable and worker.process.poll() is None:
            with self._lock:
                self._idle.append(worker)
            return
        with self._lock:
            self._alive -= 1
        worker.kill()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
            self._alive -= len(idle)
        for worker in idle:  # idle: every job answered, nothing half-written; TensorFlow's
            worker.kill()  # teardown at exit would only add seconds to the batch


def convert_in_worker(job: Job, running: Children, workers: Workers, kind: str) -> Result:
    """The run a process of its own would make (``batch._convert_one``), by a reused worker
    of the model's kind."""
    prog, model, output, options, timeout = job
    with tempfile.TemporaryDirectory(prefix="qonnx-ingest-") as scratch:
        result_file, err_file = Path(scratch) / "result.json", Path(scratch) / "stderr"
        argv = [model, *(["-o", output] if output is not None else []), *options, "--quiet"]
        argv += ["--result-file", str(result_file)]
        request = {"prog": prog, "argv": argv, "stdout": os.devnull, "stderr": str(err_file)}
        worker = workers.acquire(kind)
        running.add(worker.process)
        start = time.perf_counter()
        try:
            # a model's --timeout and seconds are its own: the clock starts once the worker's
            # imports are done
            started = worker.start()
            start = time.perf_counter()
            code = worker.run(request, timeout + KILL_GRACE_SECONDS if timeout else None)
            code = code if started else None
        except subprocess.TimeoutExpired:
            workers.release(worker, reusable=False)
            limit = timeout if timeout else STARTUP_SECONDS  # or its imports never ended
            return timed_out(model, output, limit, time.perf_counter() - start, worker.pid)
        finally:
            running.discard(worker.process)
        if code is None:  # the worker died with this model (a crash, a kill, a Ctrl-C)
            code = worker.exit_code()
            if running.stopped:
                workers.release(worker, reusable=False)
                seconds = time.perf_counter() - start
                return Result(model, None, "interrupted", EXIT_INTERRUPTED, seconds, "interrupted")
        # a model that timed out or was interrupted inside may leave the worker in any state
        workers.release(worker, reusable=code >= 0 and code not in (4, EXIT_INTERRUPTED))
        written = json.loads(result_file.read_text()) if result_file.is_file() else {}
        stderr = err_file.read_text(errors="replace") if err_file.is_file() else ""
    seconds = time.perf_counter() - start
    return outcome(prog, model, output, code, stderr, written, seconds, worker.pid)
