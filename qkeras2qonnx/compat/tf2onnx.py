"""tf2onnx's internals: its optimizer table, its global op-handler registry and its global
node-name counter."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from qkeras2qonnx.compat import IncompatibleDependency, Pin, require

PIN = Pin("tf2onnx", "tf2onnx", "1.17.0")
_fresh_counter: list[int] = []  # utils.INTERNAL_NAME once tf2onnx's modules were imported


def restart_name_counter() -> None:
    """Set tf2onnx's process-wide node-name counter (``utils.INTERNAL_NAME``, ``Mul__45``) to
    where a fresh process has it: its graph sorts nodes by these names before its optimizers
    (``merge_duplication`` keeps the first of equal nodes), so the counter left by the models
    converted before decided which duplicate's name survived."""
    require(PIN, "node-name counter (utils.INTERNAL_NAME)")
    import tf2onnx.tfonnx  # noqa: F401  (names a few rewriter constants when imported)
    from tf2onnx import utils

    if not isinstance(getattr(utils, "INTERNAL_NAME", None), int):
        raise IncompatibleDependency(
            f"qkeras2qonnx needs tf2onnx {PIN.version}'s utils.INTERNAL_NAME (pinned in "
            "constraints.txt)"
        )
    if not _fresh_counter:
        _fresh_counter.append(utils.INTERNAL_NAME)
    utils.INTERNAL_NAME = _fresh_counter[0]


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


def name_ordered_merges(optimizers: dict | None) -> dict:
    """``optimizers`` (None: tf2onnx's own) with its ``merge_duplication`` keeping, of equal
    nodes, the one first by name: tf2onnx keeps the first in its node list, whose order (the
    TensorFlow graph's) changes from process state to process state, and so did the name of
    the node left (``fb/Mul`` or ``fb2/Mul`` for two layers quantizing one input alike)."""
    require(PIN, "optimizer table (_get_optimizers) and MergeDuplicatedNodesOptimizer")
    from tf2onnx.optimizer import _get_optimizers
    from tf2onnx.optimizer.merge_duplicated_nodes_optimizer import MergeDuplicatedNodesOptimizer

    table = dict(_get_optimizers() if optimizers is None else optimizers)
    if table.get("merge_duplication") is not MergeDuplicatedNodesOptimizer:
        return table
    merge = getattr(MergeDuplicatedNodesOptimizer, "_merge_nodes_that_are_duplicated", None)
    if merge is None:
        raise IncompatibleDependency(
            f"qkeras2qonnx needs tf2onnx {PIN.version}'s MergeDuplicatedNodesOptimizer."
            "_merge_nodes_that_are_duplicated (pinned in constraints.txt)"
        )

    class NameOrderedMerge(MergeDuplicatedNodesOptimizer):
        def _merge_nodes_that_are_duplicated(self, nodes_to_process, graph):
            nodes_to_process.sort(key=lambda node: node.name)  # tf2onnx's sort after is stable
            merge(self, nodes_to_process, graph)

    table["merge_duplication"] = NameOrderedMerge
    return table


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
