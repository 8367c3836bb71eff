"""MediaPipe ``.task`` bundles: a zip whose members are ``.tflite`` models (a face landmarker
holds its face detector, landmarks and blendshapes models), nested ``.task`` zips (a gesture
recognizer holds a hand landmarker) and other files (metadata, label maps), which are not
models. Each model member converts on its own; a nested member is named through its bundle,
``hand_landmarker.task/hand_detector.tflite``.

``members`` lists a bundle's models, ``read_member`` gives one's bytes, ``model_source`` is
what ``tflite2qonnx.convert`` reads for a path (and ``member=``), ``output_name`` where a
member's model goes under a bundle's output directory. Standard library only (the CLI lists
members before importing the converter).
"""

from __future__ import annotations

import io
import os
import zipfile
import zlib
from pathlib import Path, PurePosixPath

ZIP_MAGIC = b"PK\x03\x04"
SUFFIX = ".task"
_TFLITE_IDENTIFIER = b"TFL3"
_NESTED = (SUFFIX,)


def is_bundle(source: str | os.PathLike | bytes) -> bool:
    """A zip that is a bundle: named ``.task``, or holding a ``.tflite`` or ``.task`` member
    (a Keras ``.keras`` zip holds neither)."""
    head = _head(source)
    if head[:4] != ZIP_MAGIC:
        return False
    if _shown(source) != "<bytes>" and Path(source).suffix.lower() == SUFFIX:
        return True
    try:
        with _open(source) as archive:
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile):
        return False
    return any(n.lower().endswith((".tflite", SUFFIX)) for n in names)


def members(source: str | os.PathLike | bytes) -> list[str]:
    """The model members, in the zip's order: ``.tflite`` files and members that carry the
    TFLite identifier, nested bundles' through theirs. InputError for an unreadable zip."""
    with _archive(source) as archive:
        return _guarded(lambda: _models(archive, ""), source)


def read_member(source: str | os.PathLike | bytes, name: str) -> bytes:
    """Member ``name``'s bytes (``a.task/b.tflite``: b.tflite in the nested a.task);
    InputError naming the bundle's models when it has none by that name."""
    with _archive(source) as archive:
        data = _guarded(lambda: _read(archive, name), source)
    if data is None or name not in members(source):
        models = ", ".join(members(source)) or "none"
        raise _error(f"has no model member {name!r}; its models: {models}", source)
    return data


def model_source(
    source: str | os.PathLike | bytes, member: str | None
) -> tuple[str | os.PathLike | bytes, str | None]:
    """What to read for ``source`` (the member's bytes for a bundle) and the name messages
    give it (``bundle.task:member``; None: the source's own)."""
    bundle = is_bundle(source)
    if member is None and bundle:
        listed = members(source)
        if not listed:
            raise _error("is a .task bundle (zip) with no .tflite model in it", source)
        raise _error(
            f"is a MediaPipe .task bundle of {len(listed)} models ({', '.join(listed)}): "
            "convert one with member=NAME (the CLI's --member NAME), or all with "
            "tflite2qonnx BUNDLE.task -o DIR/",
            source,
        )
    if member is None:
        return source, None
    if not bundle:
        raise _error("member= (--member) names a model inside a .task bundle; this is none", source)
    return read_member(source, member), f"{_shown(source)}:{member}"


def output_name(member: str) -> str:
    """A member's path under its bundle's output directory, suffix kept (the caller puts
    .onnx): nested bundles lose their .task, names never leave the directory (no ``..``)."""
    parts = [p for p in PurePosixPath(member.replace("\\", "/")).parts if p not in ("/", ".", "..")]
    dirs = [p[: -len(SUFFIX)] if p.lower().endswith(SUFFIX) else p for p in parts[:-1]]
    return "/".join([*dirs, *parts[-1:]]) or "model"


def _guarded(read, source):
    """A damaged member (bad CRC, unknown compression) as one line naming the bundle."""
    try:
        return read()
    except (OSError, zipfile.BadZipFile, zlib.error, NotImplementedError, EOFError) as exc:
        raise _error(f"damaged .task bundle (zip): {exc}", source) from None


def _models(archive: zipfile.ZipFile, prefix: str) -> list[str]:
    found = []
    for info in archive.infolist():
        if info.is_dir():
            continue
        name = info.filename
        with archive.open(info) as f:
            head = f.read(8)
        if head[:4] == ZIP_MAGIC and name.lower().endswith(_NESTED):
            try:
                with zipfile.ZipFile(io.BytesIO(archive.read(info))) as inner:
                    found += _models(inner, f"{prefix}{name}/")
            except zipfile.BadZipFile:
                found.append(f"{prefix}{name}")  # converting it says what is wrong
        elif name.lower().endswith(".tflite") or head[4:8] == _TFLITE_IDENTIFIER:
            found.append(f"{prefix}{name}")
    return found


def _read(archive: zipfile.ZipFile, name: str) -> bytes | None:
    if name in archive.namelist():
        return archive.read(name)
    for nested in archive.namelist():
        if name.startswith(nested + "/") and nested.lower().endswith(_NESTED):
            try:
                with zipfile.ZipFile(io.BytesIO(archive.read(nested))) as inner:
                    return _read(inner, name[len(nested) + 1 :])
            except zipfile.BadZipFile:
                return None
    return None


class _archive:
    """The bundle opened as a zip; InputError naming it when it is not a readable one."""

    def __init__(self, source) -> None:
        self.source = source

    def __enter__(self) -> zipfile.ZipFile:
        try:
            self.zip = _open(self.source)
        except (OSError, zipfile.BadZipFile) as exc:
            raise _error(f"not a readable .task bundle (zip): {exc}", self.source) from None
        return self.zip

    def __exit__(self, *exc_info) -> None:
        self.zip.close()


def _open(source) -> zipfile.ZipFile:
    if isinstance(source, bytes | bytearray | memoryview):
        return zipfile.ZipFile(io.BytesIO(bytes(source)))
    return zipfile.ZipFile(source)


def _head(source) -> bytes:
    if isinstance(source, bytes | bytearray | memoryview):
        return bytes(source[:8])
    try:
        with open(source, "rb") as f:
            return f.read(8)
    except OSError:
        return b""


def _shown(source) -> str:
    return "<bytes>" if isinstance(source, bytes | bytearray | memoryview) else os.fspath(source)


def _error(message: str, source):
    from qonnx_ingest.errors import InputError

    return InputError(message, _shown(source))
