"""Run one conversion in a subprocess of the other QKeras flavour (see ``flavour``).

A process that imported QKeras 0.9 cannot import qkeras-v3 (same package name) and vice versa,
so ``convert`` hands a model of the other flavour to
``python -m qkeras2qonnx.environment.isolated_worker`` with that flavour's environment. The child
converts (and verifies, if asked) with the ordinary pipeline and writes the ONNX model; errors
and warnings come back as the same classes. An in-memory model is saved as a ``.keras`` archive
first.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import onnx

from qkeras2qonnx.environment import flavour
from qonnx_ingest.errors import ConversionError


def convert_elsewhere(
    source: Any, needed: str, *, weights: Any = None, **options: Any
) -> onnx.ModelProto:
    """The QONNX model of ``source`` (a path, or an in-memory model), converted in a
    subprocess running ``needed``; ``options`` are ``pipeline.convert``'s keywords."""
    return _elsewhere(source, needed, weights, options, None)[0]


def verify_elsewhere(
    source: Any, needed: str, figures: dict[str, Any], *, weights: Any = None, **options: Any
) -> tuple[onnx.ModelProto, Any]:
    """``convert_and_verify`` in that subprocess: the model and its ``Verification``;
    ``figures`` are ``convert_and_verify``'s inputs / seed / inputs_path."""
    return _elsewhere(source, needed, weights, options, figures)


def _elsewhere(
    source: Any, needed: str, weights: Any, options: dict[str, Any], figures: dict | None
) -> tuple[onnx.ModelProto, Any]:
    env = (
        flavour.qkeras3_environment() if needed == flavour.KERAS3 else flavour.keras2_environment()
    )
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with tempfile.TemporaryDirectory(prefix="qkeras2qonnx-") as tmp:
        work = Path(tmp)
        if not isinstance(source, str | os.PathLike):
            saved = work / "model.keras"
            source.save(saved)
            source = saved
        request = {
            "flavour": needed,
            "source": str(Path(source).resolve()),
            "weights": str(Path(weights).resolve()) if weights is not None else None,
            "output": str(work / "model.onnx"),
            "options": options,
            "figures": figures,
        }
        (work / "request.pkl").write_bytes(pickle.dumps(request))
        done = subprocess.run(
            [sys.executable, "-m", "qkeras2qonnx.environment.isolated_worker", str(work)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        reply_path = work / "reply.pkl"
        if not reply_path.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise ConversionError(
                f"the {needed} conversion subprocess failed (exit {done.returncode}): {tail[0]}"
            )
        reply = pickle.loads(reply_path.read_bytes())
        for category, message in reply["warnings"]:
            warnings.warn(message, _warning_class(category), stacklevel=3)
        if reply["error"] is not None:
            raise _rebuild(*reply["error"])
        return onnx.load(str(work / "model.onnx")), reply.get("verification")


def _rebuild(module: str, name: str, message: str, where: str | None, extra: Any) -> Exception:
    """The child's exception as the same class (ConversionError family), else a
    ConversionError quoting it."""
    if module.startswith(("qonnx_ingest.", "qkeras2qonnx.")):
        import importlib

        cls = getattr(importlib.import_module(module), name, None)
        if isinstance(cls, type) and issubclass(cls, ConversionError):
            if extra is not None:  # VerificationError carries its measurements
                return cls(extra)
            error = cls.__new__(cls)
            ConversionError.__init__(error, message, where)
            return error
    return ConversionError(f"{name}: {message}", where)


def _warning_class(category: tuple[str, str]) -> type[Warning]:
    import importlib

    module, name = category
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return UserWarning
    return cls if isinstance(cls, type) and issubclass(cls, Warning) else UserWarning
