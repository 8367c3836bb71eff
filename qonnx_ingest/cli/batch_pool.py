"""Run a batch's models ``--jobs`` at a time, and stop it on Ctrl-C keeping what finished.

The children run in sessions (process groups) of their own, so a Ctrl-C at the terminal
reaches the batch alone; it starts no other model and passes exactly one SIGINT to each
running child, which stops cleanly (exit 130, nothing written). A second Ctrl-C while they
stop kills them.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Children:
    """The running children; after ``stop``, each (running, or started later) has had exactly
    one signal."""

    def __init__(self):
        self._lock = threading.Lock()
        self._children: set[subprocess.Popen] = set()
        self.stopped: int | None = None  # the signal sent

    def add(self, child: subprocess.Popen) -> None:
        with self._lock:
            self._children.add(child)
            signum = self.stopped
        if signum is not None:
            _signal(child, signum)

    def discard(self, child: subprocess.Popen) -> None:
        with self._lock:
            self._children.discard(child)

    def stop(self, signum: int) -> None:
        with self._lock:
            self.stopped = signum
            children = list(self._children)
        for child in children:
            _signal(child, signum)


def _signal(child: subprocess.Popen, signum: int) -> None:
    if child.poll() is None:
        with contextlib.suppress(OSError):
            child.send_signal(signum)


def run_all(
    plan: Sequence[T], one: Callable[[T], R | None], jobs: int, running: Children
) -> tuple[list[R | None], bool]:
    """Each planned model through ``one``, ``jobs`` at a time: (results in plan order, None
    for a model never run; whether Ctrl-C stopped the run). ``one`` registers its child
    process in ``running`` and returns None once ``running.stopped``."""
    done: list[R | None] = [None] * len(plan)
    pool = ThreadPoolExecutor(max_workers=jobs)
    futures = {pool.submit(one, item): i for i, item in enumerate(plan)}
    try:
        for future in as_completed(futures):
            done[futures[future]] = future.result()
        return done, False
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        running.stop(signal.SIGINT)
        try:
            _collect(futures, done)
        except KeyboardInterrupt:
            running.stop(signal.SIGKILL)
            _collect(futures, done)
        return done, True
    finally:
        pool.shutdown(wait=True)


def _collect(futures: dict, done: list) -> None:
    for future, i in futures.items():
        if not future.cancelled():
            done[i] = future.result()
