"""What both converter packages export besides their entry points (the errors and the
version), and the lazy loading of those entry points, so that importing a converter package
(and its ``--help``) loads nothing heavy."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from qonnx_ingest import __version__
from qonnx_ingest.errors import (
    ConversionError,
    ConversionWarning,
    InputError,
    ReferenceUnavailable,
    VerificationError,
)

__all__ = [
    "ConversionError",
    "ConversionWarning",
    "InputError",
    "ReferenceUnavailable",
    "VerificationError",
    "__version__",
]


def lazy_attributes(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports ``where[name]`` (a module path)
    on first use of ``name`` and returns its attribute of that name."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
