"""The version check guarding our dependencies' private internals.

Each converter keeps the internals it uses in a ``compat`` package, one module per library
(``qkeras2qonnx.compat``: tf2onnx, Keras/TensorFlow, QKeras, HGQ2; ``tflite2qonnx.compat``: the
tflite bindings; ``qonnx_ingest.compat``: qonnx), each access a small named function. A private
name can change meaning in any release without notice: each function first checks, once per
library and lazily (importing these packages imports no dependency), that the installed version
is of the series pinned in constraints.txt, and refuses in one line naming the pin otherwise,
so an upgrade fails by name instead of somewhere unnamed (or, worse, silently).
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
    """A dependency as constraints.txt pins it; ``module``: its import name; ``user``: our
    package that needs it (it leads the message)."""

    distribution: str
    module: str
    version: str
    user: str = "qkeras2qonnx"


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


def of_pinned_series(pin: Pin) -> bool:
    """Whether the installed ``pin`` library is of the pinned major.minor series (patch
    releases keep their internals)."""
    return _series(found_version(pin)) == _series(pin.version)


def require(pin: Pin, private: str) -> None:
    """Refuse unless ``of_pinned_series(pin)``; ``private``: the internal about to be used."""
    if not of_pinned_series(pin):
        raise IncompatibleDependency(
            f"{pin.user} needs {pin.distribution} {pin.version}'s private {private} (pinned "
            f"in constraints.txt); found {found_version(pin)}"
        )


def _series(version: str) -> tuple[str, ...]:
    return tuple(version.split("+")[0].split(".")[:2])
