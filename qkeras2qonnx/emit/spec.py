"""QuantSpec: one QKeras quantizer resolved to the parameters of one QONNX node.

Kept free of TensorFlow so the layer map can be inspected and tested without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from qkeras2qonnx.emit.composite import Composite

QUANT, BIPOLAR = "quant", "bipolar"
# qonnx 1.0's FloatQuant (a minifloat; ``minifloat`` holds its E, M, bias and max_val).
FLOAT = "float"
# No node: a non-uniform weight quantizer (po2, ulaw) has no QONNX form, so the weight becomes
# QKeras's quantized values as a plain constant and the annotation is reported as lost.
LOST = "lost"


@dataclass(eq=False)
class QuantSpec:
    """Parameters of a Quant (``kind="quant"``) or BipolarQuant (``kind="bipolar"``) node, or
    (``kind="lost"``) of no node at all.

    ``scale`` broadcasts against the quantized tensor in *Keras* layout (a scalar, or e.g.
    shape ``[1, 1, 1, C]`` for a per-output-channel conv kernel); ``axis`` names that channel
    axis when the scale is per-channel. Reinsertion maps it onto the ONNX layout.
    """

    kind: str
    scale: np.ndarray
    zero_point: float = 0.0
    bit_width: int = 8
    signed: bool = True
    narrow: bool = False
    rounding_mode: str = "ROUND"
    axis: int | None = None
    # Activations only: the exact float computation the Quant node follows (its input is then
    # the layer's output passed through these standard ONNX ops; see ``composite``).
    composite: Composite | None = None
    # FloatQuant only: (exponent bits, mantissa bits, exponent bias, max_val), scale 1.
    minifloat: tuple[int, int, int, float] | None = None

    def __post_init__(self) -> None:
        self.scale = np.asarray(self.scale, dtype=np.float32)
        if self.axis is None and self.scale.ndim and self.scale.size > 1:
            varying = [i for i, n in enumerate(self.scale.shape) if n > 1]
            self.axis = varying[0] if len(varying) == 1 else None

    def apply(self, x: np.typing.ArrayLike) -> np.ndarray:
        """What qonnx's executor computes for this node on ``x`` (float32, Keras layout)."""
        from qonnx.custom_op.general.bipolar_quant import binary_quant
        from qonnx.custom_op.general.quant import quant

        x = np.asarray(x, dtype=np.float32)
        if self.kind == FLOAT:
            from qonnx_ingest.float_quant import apply

            return apply(x, *self.minifloat)
        if self.kind == BIPOLAR:
            y = binary_quant(x, self.scale)
        else:
            y = quant(
                x,
                self.scale,
                np.float32(self.zero_point),
                np.float32(self.bit_width),
                int(self.signed),
                int(self.narrow),
                self.rounding_mode,
            )
        return np.asarray(y, dtype=np.float32)

    def describe(self) -> str:
        if self.kind == LOST:
            return "no QONNX node (quantized constant)"
        if self.kind == FLOAT:
            e, m, bias, top = self.minifloat
            text = f"FloatQuant(E={e}, M={m}, bias={bias}, max_val={top:g})"
            return text if self.composite is None else f"{self.composite.form}, then {text}"
        if self.kind == BIPOLAR:
            text = f"BipolarQuant(scale={_show(self.scale)})"
            return text if self.composite is None else f"{self.composite.form}, then {text}"
        sign = "signed" if self.signed else "unsigned"
        narrow = " narrow" if self.narrow else ""
        text = (
            f"Quant({self.bit_width}-bit {sign}{narrow}, scale={_show(self.scale)}, "
            f"zero_point={self.zero_point:g}, {self.rounding_mode})"
        )
        return text if self.composite is None else f"{self.composite.form}, then {text}"


def _show(a: np.ndarray) -> str:
    flat = np.asarray(a).ravel()
    return f"{flat[0]:g}" if flat.size == 1 else f"[{flat.size} per-channel values]"
