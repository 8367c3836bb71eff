"""The layer map: every quantizer of a stripped model, where it sits and the node it becomes.

Kept apart from ``strip`` so the layer families that record into it (QKeras rules, HGQ2 in
``hgq2_strip``) import it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qkeras2qonnx.emit.spec import QuantSpec


@dataclass(eq=False)
class MapEntry:
    """One quantizer: where it sits and the QONNX node it becomes.

    ``values`` (Keras layout, in the shape QKeras quantizes the weight in; the markers number
    the same elements in the same order) feed a weight's Quant node; None marks an activation
    quantizer.
    ``marker`` is the weight's first marker number, or the id of the layer's output marker.
    """

    layer: str
    role: str
    quantizer: str
    spec: QuantSpec
    values: np.ndarray | None
    marker: int

    @property
    def where(self) -> str:
        return f"{self.layer} {self.role} {self.quantizer}"


@dataclass
class LayerMap:
    entries: list[MapEntry] = field(default_factory=list)
    outputs: dict[int, str] = field(default_factory=dict)  # output marker id -> layer path
    weight_count: int = 0  # marker numbers handed out so far
    lost: dict[str, str] = field(default_factory=dict)  # "layer role" -> quantizer, no node
    folded: dict[str, str] = field(default_factory=dict)  # quantizers of constants, exact
    recurrent: list[Any] = field(default_factory=list)  # recurrent.Recurrent plans
    grouped: dict[int, str] = field(default_factory=dict)  # grouped_transpose tag -> layer
    # HGQ2: Quant node name -> the per-element (k, i, f) and modes it stands for (metadata)
    widths: dict[str, dict] = field(default_factory=dict)
    # Quant node name -> the exact computation before it, when that is in the graph already
    forms: dict[str, str] = field(default_factory=dict)
    # HGQ2: layer path -> why its float32 partial sums may round (``hgq2_sums``)
    inexact_sums: dict[str, str] = field(default_factory=dict)

    def recurrent_nodes(self) -> dict[str, str]:
        """Quant node name -> quantizer, of the unrolled recurrent cells."""
        return {name: q for plan in self.recurrent for name, q in plan.nodes.items()}
