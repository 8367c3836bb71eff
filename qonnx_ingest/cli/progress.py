"""Status lines on stderr for the phases that can take a while (TensorFlow import, conversion,
report, verification, lowering).

A phase is announced only once it has run for a second: quick conversions stay silent, slow
ones say what they are doing. Lines are shown when stderr is a terminal; scripts and logs that
read stderr keep the one-line error unless they ask for the lines with
``QONNX_INGEST_STATUS_AFTER=SECONDS`` (which also sets the delay; 0 announces every phase at
once). The line goes to the stderr the user sees even while the conversion's native stderr is
silenced, and never to stdout, where a model or a JSON document may be going.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import TextIO

DEFAULT_DELAY = 1.0


def _delay() -> float | None:
    """The delay asked for in the environment, or None when nothing was asked."""
    text = os.environ.get("QONNX_INGEST_STATUS_AFTER")
    if text is None:
        return None
    try:
        return max(0.0, float(text))
    except ValueError:
        return DEFAULT_DELAY


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class Status:
    """``phase("converting m.tflite")`` starts a phase (ending the previous one); ``close()``
    ends the last. With ``quiet`` nothing is ever printed."""

    def __init__(self, prog: str, quiet: bool = False, stream: TextIO | None = None):
        asked = _delay()
        if asked is None and not _is_terminal(stream or sys.stderr):
            quiet = True  # a pipe or a file: only the result and the errors
        self.prog, self.quiet = prog, quiet
        self.delay = DEFAULT_DELAY if asked is None else asked
        self._stream, self._owned = stream, False
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self.shown: list[str] = []  # the lines printed, for callers that need to know
        if not quiet:
            self._out()  # opened now, before the caller silences fd 2 for native libraries

    def _out(self) -> TextIO | None:
        if self._stream is None:
            self._stream, self._owned = _user_stderr()
        return self._stream

    def phase(self, text: str) -> None:
        self._cancel()
        if self.quiet:
            return
        if self.delay == 0:
            self._show(text)
        else:
            self._timer = threading.Timer(self.delay, self._show, (text,))
            self._timer.daemon = True
            self._timer.start()

    def _show(self, text: str) -> None:
        with self._lock:
            stream = self._out()
            if stream is None:
                return
            line = f"{self.prog}: {text} ..."
            try:
                stream.write(line + "\n")
                stream.flush()
            except (OSError, ValueError):
                return
            self.shown.append(line)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def close(self) -> None:
        self._cancel()
        with self._lock:
            if self._owned and self._stream is not None:
                self._stream.close()
            self._stream = None


def _user_stderr() -> tuple[TextIO | None, bool]:
    """A stream on the stderr the user sees: a duplicate of fd 2 when sys.stderr is fd 2
    (so that silencing fd 2 for native libraries does not silence us), else sys.stderr."""
    err = sys.stderr
    if err is None:
        return None, False
    try:
        if err.fileno() == 2:
            return os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8"), True
    except (OSError, ValueError, AttributeError):
        pass
    return err, False
