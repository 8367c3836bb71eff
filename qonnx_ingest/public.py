"""What both converter packages export besides their entry points (the errors and the
version), and the lazy loading of those entry points, so that importing a converter package
(and its ``--help``) loads nothing heavy."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

import qonnx_ingest
from qonnx_ingest import *  # noqa: F403  (the errors and the version)

# qonnx_ingest's own list, but its DEFAULT_OPSET: the converter packages do not export it
__all__ = [name for name in qonnx_ingest.__all__ if name != "DEFAULT_OPSET"]


def lazy_attributes(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports ``where[name]`` (a module path)
    on first use of ``name`` and returns its attribute of that name."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
