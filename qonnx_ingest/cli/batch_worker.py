"""A reused worker of a batch: ``python -m qonnx_ingest.cli.batch_worker CLI_MODULE KIND``.

It converts one model after another in this one process, so the converter's heavy imports
(TensorFlow) are paid once: first the module's ``warm_up(KIND)`` (if any), so a model's
--timeout counts its own conversion, then ``{"ready": true}``. Each job is a JSON line on
stdin: ``argv`` for the CLI module's ``main`` (the command line a process of its own would
get) and the files that take the job's stdout and stderr (file descriptors 1 and 2, so native
libraries' output goes there too). The reply is a JSON line ``{"code": exit code}`` on the
stdout this process started with. Between jobs it calls the module's ``between_models()`` (if
any), which drops what one model left behind (a Keras session, name counters). A crash or a
kill ends the worker; the batch (``batch_workers``) reports that model and starts another
worker for the rest.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
from collections.abc import Callable, Iterator


def serve(cli_module: str, kind: str) -> None:
    reply = os.fdopen(os.dup(1), "w", buffering=1)
    _point(1, os.devnull)  # stray output between jobs never reaches the reply channel
    try:
        module = importlib.import_module(cli_module)
        warm_up: Callable[[str], None] | None = getattr(module, "warm_up", None)
        if warm_up is not None:
            # a failure here is the first model's run's to report, in its own words
            with _redirected(os.devnull, os.devnull), contextlib.suppress(Exception):
                warm_up(kind)
        reply.write(json.dumps({"ready": True}) + "\n")
        between: Callable[[], None] | None = getattr(module, "between_models", None)
        for line in sys.stdin.buffer:
            job = json.loads(line)
            code = _run(module.main, job)
            reply.write(json.dumps({"code": code}) + "\n")
            if between is not None:
                with _redirected(os.devnull, os.devnull):
                    between()
    except KeyboardInterrupt:  # a Ctrl-C while idle: the batch is stopping
        pass


def _run(main: Callable[[list[str]], int], job: dict) -> int:
    with _redirected(job["stdout"], job["stderr"]):
        try:
            return main(job["argv"])
        except SystemExit as exc:  # argparse
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except KeyboardInterrupt:  # outside the run's own handling (parsing, imports)
            print(f"{job['prog']}: error: interrupted", file=sys.stderr)
            return 130


@contextlib.contextmanager
def _redirected(stdout: str, stderr: str) -> Iterator[None]:
    """File descriptors 1 and 2 (and Python's streams on them) into these files, then back."""
    saved = []
    for fd, path in ((1, stdout), (2, stderr)):
        (sys.stdout if fd == 1 else sys.stderr).flush()
        saved.append(os.dup(fd))
        _point(fd, path, append=True)
    try:
        yield
    finally:
        for fd, old in zip((1, 2), saved, strict=True):
            (sys.stdout if fd == 1 else sys.stderr).flush()
            os.dup2(old, fd)
            os.close(old)


def _point(fd: int, path: str, append: bool = False) -> None:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else 0)
    target = os.open(path, flags, 0o600)
    os.dup2(target, fd)
    os.close(target)


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2])
