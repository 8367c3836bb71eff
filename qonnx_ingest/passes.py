"""The one contract every graph pass follows, and the two ways passes are run.

A pass is a callable ``pass_(model) -> (model, modified)``, qonnx's
``Transformation.apply`` shape: it returns the model it leaves (the same object when it edits
in place, a new one otherwise; callers use the returned one) and whether it changed anything.
Options are keyword-only arguments after the model, bound with ``functools.partial`` before the
pass is handed on. A pass that cannot tell cheaply whether it changed the model says True.

``run_passes`` runs a sequence once, with an optional ``cleanup`` pass (finishing) after each
pass that modified the model: what converters did by calling ``finish_model`` again by hand.
``apply_until_fixed`` repeats a sequence until a whole round modifies nothing (qonnx's
``apply_repeated``); only passes that say False once done belong in it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import onnx

from qonnx_ingest.errors import ConversionError

PassResult = tuple[onnx.ModelProto, bool]
Pass = Callable[[onnx.ModelProto], PassResult]

MAX_ROUNDS = 64  # a sequence still changing the model after this many rounds has a bug


def run_passes(
    passes: Iterable[Pass], model: onnx.ModelProto, *, cleanup: Pass | None = None
) -> PassResult:
    """Each pass once, in order; ``cleanup`` after each one that modified the model."""
    modified = False
    for pass_ in passes:
        model, changed = pass_(model)
        if changed and cleanup is not None:
            model, _ = cleanup(model)
        modified |= changed
    return model, modified


def apply_until_fixed(
    passes: Sequence[Pass], model: onnx.ModelProto, *, max_rounds: int = MAX_ROUNDS
) -> PassResult:
    """Run ``passes`` in rounds until a round modifies nothing; True if any round did."""
    modified = False
    for _ in range(max_rounds):
        model, changed = run_passes(passes, model)
        if not changed:
            return model, modified
        modified = True
    names = ", ".join(pass_name(p) for p in passes)
    raise ConversionError(f"passes still changing the model after {max_rounds} rounds: {names}")


def pass_name(pass_: Pass) -> str:
    """The function's name, through ``functools.partial``."""
    func = getattr(pass_, "func", pass_)
    return getattr(func, "__name__", type(func).__name__)
