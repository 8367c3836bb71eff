"""HGQ2's internals: attributes its layers and quantizers keep under private names."""

from __future__ import annotations

from typing import Any

from qkeras2qonnx.compat import Pin, require

PIN = Pin("hgq2", "hgq", "0.2.0")


def average_scale(layer: Any) -> Any:
    """QAveragePow2's power-of-two scale (``_scale``)."""
    require(PIN, "QAveragePow2._scale")
    return layer._scale


def batchnorm_shape(layer: Any) -> Any:
    """QBatchNormalization's broadcast shape of scale and offset (``_shape``)."""
    require(PIN, "QBatchNormalization._shape")
    return layer._shape


def is_weight_quantizer(quantizer: Any) -> bool:
    """Whether HGQ2 made ``quantizer`` for a weight (``_is_weight``; False if unset)."""
    require(PIN, "_is_weight")
    return getattr(quantizer, "_is_weight", False)


def cell_enables_oq(cell: Any) -> bool:
    """Whether a recurrent cell quantizes its output (``_enable_oq``; False if unset)."""
    require(PIN, "_enable_oq")
    return getattr(cell, "_enable_oq", False)
