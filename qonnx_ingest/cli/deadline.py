"""A time limit on one model's conversion (--timeout), for runs over many models where one
slow or stuck model must not hold up the rest."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from qonnx_ingest.errors import TimedOut


@contextlib.contextmanager
def deadline(seconds: float | None, what: str) -> Iterator[None]:
    """Raise ``TimedOut`` naming ``what`` once ``seconds`` of wall time have passed.

    Python code is interrupted between bytecodes: a single native call that never returns is
    not (the batch runner kills such a process from outside). Outside the main thread, or
    without ``seconds``, this does nothing.
    """
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum, frame):
        raise TimedOut(f"not converted within --timeout {seconds:g} s", what)

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
