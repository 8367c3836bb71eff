"""tf2onnx's internals: its optimizer table and its global op-handler registry."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from qkeras2qonnx.compat import IncompatibleDependency, Pin, require

PIN = Pin("tf2onnx", "tf2onnx", "1.17.0")


def optimizers_without(name: str) -> dict:
    """tf2onnx's optimizers (private ``_get_optimizers``) but the one called ``name``."""
    require(PIN, "_get_optimizers")
    from tf2onnx.optimizer import _get_optimizers

    optimizers = _get_optimizers()
    if name not in optimizers:
        raise IncompatibleDependency(
            f"qkeras2qonnx needs tf2onnx {PIN.version}'s optimizer {name!r} (pinned in "
            f"constraints.txt); this tf2onnx has {', '.join(optimizers)}"
        )
    return {k: v for k, v in optimizers.items() if k != name}


@contextlib.contextmanager
def restoring_handler(op: str) -> Iterator[None]:
    """tf2onnx registers custom_op_handlers in its global op registry (``tf_op.get_opsets``)
    and never removes them; put back what ``op`` had there so one conversion does not change
    the next (best effort)."""
    require(PIN, "op-handler registry (tf_op.get_opsets)")
    try:
        from tf2onnx import constants
        from tf2onnx.handler import tf_op

        versions = tf_op.get_opsets().get(constants.TENSORFLOW_OPSET.domain)
        saved = [v.get(op) for v in versions] if versions is not None else None
    except (ImportError, AttributeError):
        yield
        return
    try:
        yield
    finally:
        opsets = tf_op.get_opsets()
        domain = constants.TENSORFLOW_OPSET.domain
        for k, table in enumerate(opsets.get(domain, [])):
            before = saved[k] if saved is not None and k < len(saved) else None
            if before is None:
                table.pop(op, None)
            else:
                table[op] = before
        if saved is None and not any(opsets.get(domain, [])):
            opsets.pop(domain, None)  # the domain did not exist before
