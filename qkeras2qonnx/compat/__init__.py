"""Our dependencies' private internals, one module per library (``tf2onnx``, ``keras`` for
Keras and TensorFlow, ``qkeras``, ``hgq2``), each access a small named function.

A private name can change meaning in any release without notice: each function first checks,
once per library and lazily (importing this package imports no dependency), that the installed
version is in the series pinned in constraints.txt, and refuses in one line naming the pin
otherwise, so an upgrade fails here by name instead of somewhere unnamed (or, worse, silently).
tests/test_compat.py fails if a private name of a dependency is used outside these modules.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from importlib import metadata

from qonnx_ingest.errors import InputError


@dataclass(frozen=True)
class Pin:
    """A dependency as constraints.txt pins it; ``module``: its import name."""

    distribution: str
    module: str
    version: str


class IncompatibleDependency(InputError):
    """A dependency whose private internals we use is not of the pinned series (exit 2)."""


def found_version(pin: Pin) -> str:
    """The version of ``pin``'s library this process runs: its imported module's
    ``__version__`` (two ``qkeras`` packages exist; the imported one counts), else metadata."""
    return _found(pin)


@functools.cache
def _found(pin: Pin) -> str:
    version = getattr(sys.modules.get(pin.module), "__version__", None)
    if isinstance(version, str):
        return version
    try:
        return metadata.version(pin.distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def require(pin: Pin, private: str) -> None:
    """Refuse unless the installed ``pin`` library is of the pinned major.minor series (patch
    releases keep their internals); ``private``: the internal the caller is about to use."""
    found = found_version(pin)
    if _series(found) != _series(pin.version):
        raise IncompatibleDependency(
            f"qkeras2qonnx needs {pin.distribution} {pin.version}'s private {private} (pinned "
            f"in constraints.txt); found {found}"
        )


def _series(version: str) -> tuple[str, ...]:
    return tuple(version.split("+")[0].split(".")[:2])
