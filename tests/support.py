"""Shared by the tests: the project root, its examples, the corpus beside it, and the checks
every bad-input CLI row makes."""

import fcntl
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CORPUS = ROOT.parent / "shared" / "corpus"

# CI clones ../shared beside the project; a checkout without it skips the corpus tests, saying why.
requires_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"no model corpus at {CORPUS}")


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """The directory ``build(directory)`` filled, once per test run: under pytest-xdist the
    workers share it (the first builds it under a file lock, the others wait for it), so a
    slow builder (a Keras 3 subprocess) runs once however the test files are spread. The
    tests only read it."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # <basetemp>/popen-gwN: the run's is its parent
        base = base.parent
    root, done = base / f"built-{name}", base / f"built-{name}.done"
    with open(base / f"built-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also on a failure
        if not done.exists():
            shutil.rmtree(root, ignore_errors=True)  # what a failed build left
            root.mkdir()
            build(root)
            done.touch()
    return root


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (None for directories)."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def assert_cli_fails(
    capsys, main: Callable[[list[str]], int], prog: str, argv: Sequence, code: int, *fragments: str
) -> str:
    """``main(argv)`` exits ``code`` with one stderr line holding ``fragments``."""
    assert main([str(a) for a in argv]) == code
    out, err = capsys.readouterr()
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith(f"{prog}: error: "), err
    assert "Traceback" not in err and "internal error" not in err, err
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    return err


def run_module(
    module: str, *args, cwd: Path, timeout: float = 300, path_first: Sequence[Path] = ()
) -> subprocess.CompletedProcess:
    """``python -m module args`` on this checkout's code (``path_first`` ahead of it), text
    output captured: how the CLI tests run a command as a user would."""
    pythonpath = os.pathsep.join([*map(str, path_first), str(ROOT)])
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": pythonpath},
    )


def ctrl_c_after_first_line(
    tool: str, args: Sequence[str], cwd: Path, timeout: float
) -> tuple[str, str, str, int]:
    """Run ``python -m tool args`` in ``cwd``, send it SIGINT once its first stdout line (one
    model done) arrives, as a user's Ctrl-C; return that line, the rest of stdout, stderr and
    the exit code."""
    child = subprocess.Popen(
        [sys.executable, "-m", tool, *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        # a shell's background job ignores SIGINT; a user's Ctrl-C is what this sends
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    first = child.stdout.readline()
    child.send_signal(signal.SIGINT)  # to the batch alone: it passes it on to its workers
    rest, err = child.communicate(timeout=timeout)
    return first, rest, err, child.returncode
