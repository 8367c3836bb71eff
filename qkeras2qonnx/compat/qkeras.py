"""QKeras's internals (QKeras 0.9 on Keras 2, qkeras-v3 on Keras 3: both are ``qkeras``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from qkeras2qonnx.compat import Pin, require

QKERAS09 = Pin("QKeras", "qkeras", "0.9.0")
QKERAS3 = Pin("qkeras-v3", "qkeras", "1.2.1")


def _pin() -> Pin:
    from qkeras2qonnx.environment import flavour

    return QKERAS3 if flavour.process_flavour() == flavour.KERAS3 else QKERAS09


def add_supported_quantized_objects(objects: dict[str, Any]) -> None:
    """QKeras's layers and quantizers by name into ``objects`` (``qkeras.utils``'s private
    ``_add_supported_quantized_objects``, the table its own ``load_qmodel`` uses)."""
    require(_pin(), "qkeras.utils._add_supported_quantized_objects")
    from qkeras.utils import _add_supported_quantized_objects

    _add_supported_quantized_objects(objects)


def internal_sigmoid() -> Callable[..., Any]:
    """The sigmoid QKeras's sigmoid-based quantizers use now (``quantizers._sigmoid``, set by
    ``set_internal_sigmoid``)."""
    require(_pin(), "qkeras.quantizers._sigmoid")
    from qkeras import quantizers

    return quantizers._sigmoid


def exponent_range(q: Any) -> tuple[Any, Any]:
    """A power-of-two quantizer's exponent bounds (``_min_exp``, ``_max_exp``)."""
    require(_pin(), "_min_exp / _max_exp of power-of-two quantizers")
    return q._min_exp, q._max_exp


def kernel_mask(layer: Any) -> Any:
    """qkeras-v3 QConv2D's kernel mask (``_mask``), or None."""
    require(_pin(), "QConv2D._mask")
    return getattr(layer, "_mask", None)


def built_input_shape(layer: Any) -> Any:
    """The input shape a qkeras-v3 layer kept in ``build`` (``_input_shape``), or None."""
    require(_pin(), "_input_shape")
    return getattr(layer, "_input_shape", None)
