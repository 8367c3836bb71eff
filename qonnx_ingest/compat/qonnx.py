"""qonnx's internals: the onnxscript rule set behind its QuantToQCDQ transformation."""

from __future__ import annotations

from typing import Any

from qonnx_ingest.compat import Pin, of_pinned_series

PIN = Pin("qonnx", "qonnx", "1.0.0", user="qonnx_ingest")


def rewrite_rule_set(transformation: Any) -> Any:
    """The onnxscript rewrite rules a qonnx transformation applies (``_rewrite_rule_set``), or
    None (use its public, slower path) when this qonnx is not of the pinned series or has none:
    both paths give the same graph, so another version needs no refusal here."""
    if not of_pinned_series(PIN):
        return None
    return getattr(transformation, "_rewrite_rule_set", None)
