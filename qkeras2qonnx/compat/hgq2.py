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


# QMultiHeadAttention's sublayers, in the order hgq2_attention.PARTS names them
_ATTENTION_PARTS = ("_query_dense", "_key_dense", "_value_dense", "_softmax", "_output_dense")


def attention_parts(layer: Any) -> tuple[Any, ...]:
    """QMultiHeadAttention's query, key, value projections, softmax and output projection."""
    require(PIN, "QMultiHeadAttention._query_dense")
    return tuple(getattr(layer, name) for name in _ATTENTION_PARTS)


def linformer_projections(layer: Any) -> tuple[Any, Any]:
    """QLinformerAttention's key and value projections along the sequence."""
    require(PIN, "QLinformerAttention._lin_k_proj")
    return layer._lin_k_proj, layer._lin_v_proj


def attention_equations(layer: Any) -> tuple[str, str]:
    """The einsum equations of q . k and attention . v."""
    require(PIN, "QMultiHeadAttention._dot_product_equation")
    return layer._dot_product_equation, layer._combine_equation


def attention_options(layer: Any) -> tuple[float, str]:
    """The query's own 1/sqrt(key_dim) multiplier (1.0 once HGQ2 moved it into the softmax
    table) and the ``fuse`` mode ('none' if unset)."""
    require(PIN, "QMultiHeadAttention._inverse_sqrt_key_dim")
    return getattr(layer, "_inverse_sqrt_key_dim", 1.0), getattr(layer, "_fuse", "none")
