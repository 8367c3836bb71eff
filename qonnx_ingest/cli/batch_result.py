"""One model's outcome in a batch, read from its run: the exit code, the error lines on its
stderr and the result file it wrote (``--result-file``), whichever process ran it."""

from __future__ import annotations

import shutil
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from qonnx_ingest.cli.options import EXIT_INTERRUPTED, EXIT_UNVERIFIED, default_output

# exit code 5 (verification skipped) is a conversion: the model was written
STATUS = {0: "converted", 1: "refused", 2: "refused", 3: "failed verification", 4: "timed out"}
STATUS[EXIT_UNVERIFIED] = "converted"
STATUS[EXIT_INTERRUPTED] = "interrupted"
# a child stuck in native code past its own --timeout is killed this much later
KILL_GRACE_SECONDS = 10.0


@dataclass
class Result:
    """One model's outcome; ``output`` only when the file was written."""

    input: str
    output: str | None
    status: str = "converted"
    exit_code: int = 0
    seconds: float = 0.0
    message: str = ""
    warnings: list[str] = field(default_factory=list)
    verification: dict | None = None  # the figures, as Verification.as_dict()
    verification_skipped: str | None = None  # why --verify could not run the source model
    pid: int | None = None  # the process that converted it (a reused worker converts many)


class Job(NamedTuple):
    """One model to convert in a child process (of its own, or a reused worker): the CLI
    (``prog``), the model, where to write it, the forwarded options and its ``--timeout``."""

    prog: str
    model: str
    output: str | None
    options: list[str]
    timeout: float | None


def timed_out(model: str, output: str | None, timeout: float, seconds: float, pid: int) -> Result:
    """A run killed past ``timeout``: what it left half-written is removed."""
    remove_staging(pid, output or str(default_output(model)))
    message = f"no answer within --timeout {timeout:g} s; killed"
    return Result(model, None, "timed out", 4, seconds, message, pid=pid)


def outcome(
    prog: str,
    model: str,
    output: str | None,
    code: int,
    stderr: str,
    written: dict,
    seconds: float,
    pid: int,
) -> Result:
    """The Result of a run that ended with ``code`` (negative: killed by that signal)."""
    result = _outcome(prog, model, output, code, stderr, written, seconds, pid)
    result.pid = pid
    return result


def _outcome(prog, model, output, code, stderr, written, seconds, pid) -> Result:
    for line in stderr.splitlines():
        if line.startswith(f"{prog}: warning: "):
            print(naming_model(prog, line, model), file=sys.stderr)
    if code < 0:  # killed (a second Ctrl-C, the OOM killer): what it left half-written
        remove_staging(pid, output or str(default_output(model)))
    if written:
        status = STATUS.get(code, "crashed")
        result = Result(model, written["output"], status, code, seconds, written["summary"])
        result.warnings = written["warnings"]
        result.verification = written["verification"]
        result.verification_skipped = written["verification_skipped"]
        if code == 3:
            result.message = _error(prog, stderr) or result.message
        return result
    if code == -signal.SIGINT:  # interrupted while Python was starting or importing
        return Result(model, None, "interrupted", EXIT_INTERRUPTED, seconds, "interrupted")
    message = _error(prog, stderr)
    if code in STATUS and code not in (0, EXIT_UNVERIFIED) and "internal error" not in message:
        return Result(model, None, STATUS[code], code, seconds, message)
    tail = (stderr.strip().splitlines() or [""])[-1]
    message = message or (f"killed by signal {-code}" if code < 0 else tail or f"exit {code}")
    return Result(model, None, "crashed", max(code, 1), seconds, message)


def naming_model(prog: str, line: str, model: str) -> str:
    """A child's warning line naming its model (among several models' lines): the TFLite
    converter's name the file already, qkeras2qonnx's name the Keras model inside it."""
    prefix = f"{prog}: warning: "
    text = line[len(prefix) :]
    if model in text or Path(model).name in text:
        return line
    return f"{prefix}{model}: {text}"


def _error(prog: str, stderr: str) -> str:
    """The child's last error line, without the prefix and the --verbose hint."""
    errors = [ln for ln in stderr.splitlines() if ln.startswith(f"{prog}: error: ")]
    message = errors[-1][len(f"{prog}: error: ") :] if errors else ""
    return message.removesuffix(" (--verbose for details)")


def remove_staging(pid: int, output: str) -> None:
    """What a killed child left half-written: its own staging files beside the output (they
    carry its pid, so a sibling's are never touched)."""
    from qonnx_ingest.save import STAGING_PREFIX

    folder = Path(output).parent
    for leftover in folder.glob(f"{STAGING_PREFIX}{pid}-*"):
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)
