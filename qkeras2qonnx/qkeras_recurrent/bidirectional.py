"""Bidirectional (QBidirectional, or Keras's own) around QSimpleRNN / QLSTM / QGRU.

Keras runs the forward layer on the sequence and the backward layer (``go_backwards=True``)
on the same sequence from its last step, flips the backward outputs back into time order
when it returns sequences, and merges the two (concat on the last axis, sum, mul, or
``(y + y_rev) / 2``). The layer is stripped to one placeholder like a single recurrent layer;
``recurrent_cells`` unrolls both cells in its place and writes the merge with the same ops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from qkeras2qonnx.qkeras_layers.stripped import Stripped, config_of
from qkeras2qonnx.qkeras_recurrent.recurrent import (
    Recurrent,
    input_shape,
    next_marker,
    placeholder_class,
    recurrent_plan,
)
from qonnx_ingest.errors import ConversionError

MERGE_MODES = ("concat", "sum", "mul", "ave")
RECURRENT = ("QSimpleRNN", "QLSTM", "QGRU")


@dataclass
class Bidirectional:
    """The two cells of one Bidirectional layer, unrolled in place of placeholder ``marker``."""

    path: str
    forward: Recurrent
    backward: Recurrent
    merge_mode: str
    return_sequences: bool
    marker: int
    nodes: dict[str, str] = field(default_factory=dict)
    composite: dict[str, str] = field(default_factory=dict)


def wraps_qkeras_recurrent(layer: Any) -> bool:
    """True for a Bidirectional wrapper around a QKeras recurrent layer."""
    inner = getattr(layer, "forward_layer", None)
    return inner is not None and type(inner).__name__ in RECURRENT


def strip_bidirectional(layer: Any, where: str) -> Stripped:
    """A Bidirectional around QKeras recurrent layers -> a placeholder and its plan."""
    merge_mode = layer.merge_mode
    if merge_mode not in MERGE_MODES:
        raise ConversionError(
            f"Bidirectional with merge_mode={merge_mode!r} is not supported "
            f"(supported: {', '.join(MERGE_MODES)})",
            where,
        )
    if getattr(layer, "return_state", False):
        raise ConversionError("Bidirectional with return_state=True is not supported", where)
    pairs = (("forward", layer.forward_layer), ("backward", layer.backward_layer))
    for _, inner in pairs:
        if type(inner).__name__ not in RECURRENT:
            raise ConversionError(
                f"Bidirectional around {type(inner).__name__} is not supported "
                f"(only around {', '.join(RECURRENT)})",
                where,
            )
    shape = input_shape(layer)
    cells = []
    # Nodes named by direction: qkeras-v3 does not give the inner layers Keras's
    # forward_/backward_ names.
    for direction, inner in pairs:
        cells.append(recurrent_plan(inner, f"{where}/{direction}", shape, -1))
    forward, backward = cells
    if forward.go_backwards == backward.go_backwards:
        raise ConversionError("Bidirectional whose two layers run the same direction", where)
    plan = Bidirectional(
        path=where,
        forward=forward,
        backward=backward,
        merge_mode=merge_mode,
        return_sequences=forward.return_sequences,
        marker=next_marker(),
    )
    for cell in cells:
        plan.nodes.update(cell.nodes)
        plan.composite.update(cell.composite)
    units = forward.units + backward.units if merge_mode == "concat" else forward.units
    full = config_of(layer)
    config = {k: full[k] for k in ("name", "trainable", "dtype") if k in full}
    config.update(units=units, return_sequences=plan.return_sequences, marker=plan.marker)
    return Stripped(placeholder_class(), config, [], [], recurrent=plan)
