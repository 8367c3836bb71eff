"""The plain activations a stripped layer applies before a quantizer's Quant node.

One record each: the Keras name the stripped layer's config gets and the same function in numpy,
with which ``quantizer_proof`` checks the quantizer on probe inputs. A quantizer rule
(``quantizers.QUANTIZERS``) names its record, so a new activation is registered here once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PlainActivation:
    """A plain Keras activation: its name, and what it computes (float32 in, float32 out)."""

    name: str
    apply: Callable[[np.ndarray], np.ndarray]


LINEAR = PlainActivation("linear", lambda x: x)
RELU = PlainActivation("relu", lambda x: np.maximum(x, np.float32(0)))
