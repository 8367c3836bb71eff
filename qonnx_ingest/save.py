"""Writing a model so that a failure never leaves a half-written file or touches the input."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import onnx

from qonnx_ingest.errors import InputError

# protobuf cannot serialize a message of 2 GiB or more; such models keep their tensors
# in a side file (ONNX external data).
EXTERNAL_DATA_THRESHOLD = 2**31 - 2**20
STAGING_PREFIX = ".qonnx-ingest-"


def _mode(path: Path) -> int:
    """The file type bits of what ``path`` names (through symlinks), 0 if nothing is there."""
    try:
        return stat.S_IFMT(os.stat(path).st_mode)
    except OSError:
        return 0


def is_special_file(path: Path) -> bool:
    """A device or FIFO (through a symlink too), or a system link to an open file
    (``/dev/stdout`` with stdout redirected to a file): written through, never replaced."""
    return _mode(path) in (stat.S_IFCHR, stat.S_IFBLK, stat.S_IFIFO) or _system_link(path)


def _system_link(path: Path) -> bool:
    """A symlink the system owns (``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``): renaming
    over it would replace the system's link, not write the file it points to."""
    return path.is_symlink() and str(path.absolute()).startswith(("/dev/", "/proc/"))


def check_output_path(output: str | os.PathLike, inputs: Iterable[str | os.PathLike] = ()) -> Path:
    """Fail before an expensive conversion when the output cannot or must not be written."""
    out = Path(output)
    if _mode(out) == stat.S_IFSOCK:
        raise InputError("output path is a socket", str(out))
    if is_special_file(out):
        return out
    if out.is_dir():
        raise InputError("output path is a directory", str(out))
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise InputError("output directory does not exist", str(parent))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError("output directory is not writable", str(parent))
    for src in inputs:
        if _same_file(out, Path(src)):
            raise InputError("output path is the input file; refusing to overwrite it", str(out))
    return out


def save_model(
    model: onnx.ModelProto,
    output: str | os.PathLike,
    *,
    inputs: Iterable[str | os.PathLike] = (),
    external_data_threshold: int = EXTERNAL_DATA_THRESHOLD,
) -> Path:
    """Write ``model`` to ``output`` atomically: a temporary file beside it, then a rename.

    Models larger than ``external_data_threshold`` bytes are written with their tensors in
    ``<output>.data``. ``model`` is left as it was (tensors in memory) either way. A device or
    FIFO (``-o /dev/stdout``, ``/dev/null``, a pipe) is written through, never renamed over;
    a symlink to anything else is replaced by the new file, so its target is never written.
    """
    out = check_output_path(output, inputs)
    if is_special_file(out):
        if model.ByteSize() > external_data_threshold:
            raise InputError("a model this large needs a regular file beside its .data", str(out))
        _write_through(out, model.SerializeToString())
        return out
    data_name = out.name + ".data"
    moved: list[Path] = []
    with _staging(out) as staging:
        try:
            external = model.ByteSize() > external_data_threshold
            if external:
                onnx.save_model(
                    model,
                    staging / out.name,
                    save_as_external_data=True,
                    all_tensors_to_one_file=True,
                    location=data_name,
                )
                # saving moved the tensors out of the proto; put them back for the caller
                onnx.load_external_data_for_model(model, str(staging))
                os.replace(staging / data_name, out.parent / data_name)
                moved.append(out.parent / data_name)
            else:
                onnx.save_model(model, staging / out.name)
            os.replace(staging / out.name, out)
        except BaseException:
            for path in moved:
                path.unlink(missing_ok=True)
            raise
    return out


@contextlib.contextmanager
def _staging(out: Path) -> Iterator[Path]:
    """A fresh directory beside ``out`` to write into, removed afterwards. Files are created
    in it by a plain open(), so the renamed result has the mode any new file gets (0666 less
    the umask) for the model and its side files alike; mkstemp's files are 0600."""
    try:
        staging = Path(tempfile.mkdtemp(prefix=staging_prefix(), dir=out.parent or "."))
    except OSError as exc:
        raise InputError(f"cannot write there: {exc.strerror}", str(out.parent)) from None
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def staging_prefix() -> str:
    """Temporary names carry the writer's pid, so a batch run can clean up after a child it
    had to kill without touching its siblings' files."""
    return f"{STAGING_PREFIX}{os.getpid()}-"


def write_text_atomically(path: Path, text: str, inputs: Iterable[str | os.PathLike] = ()) -> Path:
    """A side file (report, encodings) under the same rules as the model: checked path,
    temporary file beside it, rename; never the input."""
    out = check_output_path(path, inputs)
    if is_special_file(out):
        _write_through(out, text.encode("utf-8"))
        return out
    with _staging(out) as staging:
        (staging / out.name).write_text(text, encoding="utf-8")
        os.replace(staging / out.name, out)
    return out


def _write_through(out: Path, data: bytes) -> None:
    with open(out, "wb") as f:  # the device or FIFO itself, never a rename over it
        f.write(data)


def _same_file(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return a.resolve() == b.resolve()
