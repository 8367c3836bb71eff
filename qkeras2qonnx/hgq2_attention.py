"""HGQ2's QMultiHeadAttention as its parts: four QEinsumDense projections, two einsums and a
QSoftmax, each stripped by its own rule (``hgq2_layers``) under ``<layer>/<part>``;
QLinformerAttention adds two QEinsumDense projecting key and value along the sequence first.

HGQ2 computes (``hgq.layers.attn.mha``, inference): ``q, k, v = query(Q), key(K), value(V)``,
``scores = einsum(dot, k, q)``, ``softmax(scores)`` whose exp table holds the 1/sqrt(key_dim)
scaling (``input_scaler``; HGQ2 sets the query's own multiplier to 1.0 after building it),
``einsum(combine, attention, v)``, ``attention_output(...)`` and the layer's output quantizer.
The plain layer runs the stripped parts with the same TensorFlow einsums. The einsums' sums
are of quantized values: exact in float32 within 24 bits (``hgq2_sums.check_einsum``).
Dropout is the identity at inference. Masks and ``return_attention_scores`` are refused, read
from the layer's calls in the model (the wrapper, ``hgq2_strip``, checks them again);
``fuse`` other than 'none' and Linformer's ``share_kv_proj`` too.
"""

from __future__ import annotations

import functools
from typing import Any

from qkeras2qonnx.hgq2_quantizer import Fixed, read_quantizer
from qonnx_ingest.errors import ConversionError

PARTS = ("query", "key", "value", "softmax", "output")


def attention(layer: Any, where: str) -> tuple[dict[str, Any], dict, Fixed | None]:
    """A QMultiHeadAttention's parts to strip, its plain layer's config and its output
    quantizer (``hgq2_layers`` makes the Plan)."""
    _refuse_masks(layer, where)
    if getattr(layer, "_inverse_sqrt_key_dim", 1.0) != 1.0:  # HGQ2 moved it into the softmax
        raise ConversionError("the query's 1/sqrt(key_dim) is not in the softmax table", where)
    if getattr(layer, "_fuse", "none") != "none":
        raise ConversionError(f"fuse={layer._fuse!r}: not supported", where)
    sublayers = (
        layer._query_dense,
        layer._key_dense,
        layer._value_dense,
        layer._softmax,
        layer._output_dense,
    )
    parts = dict(zip(PARTS, sublayers, strict=True))
    if type(layer).__name__ == "QLinformerAttention":  # key / value projected along the sequence
        if layer.share_kv_proj:
            raise ConversionError("share_kv_proj=True: not supported", where)
        parts.update(lin_key=layer._lin_k_proj, lin_value=layer._lin_v_proj)
    config = {
        "name": layer.name,
        "dot": layer._dot_product_equation,
        "combine": layer._combine_equation,
        "shape": tuple(layer._output_dense.full_output_shape[1:]),
    }
    output = read_quantizer(layer.oq, f"{where} output") if layer.enable_oq else None
    return parts, config, output


def _refuse_masks(layer: Any, where: str) -> None:
    """Masks (``attention_mask``, ``use_causal_mask``, ...) and ``return_attention_scores``
    change what the layer computes: refused, read from the calls in the model (Keras 3 keeps
    them on the layer's nodes; the cloned wrapper checks again when it is called)."""
    for node in getattr(layer, "_inbound_nodes", []):
        kwargs = getattr(getattr(node, "arguments", None), "kwargs", {}) or {}
        given = sorted(k for k, v in kwargs.items() if k not in ("value", "key", "training")
                       and v is not None and v is not False)  # fmt: skip
        if given:
            raise ConversionError(f"call arguments {given}: not supported", where)


def check_einsums(layer: Any, path: str, inexact: dict[str, str]) -> None:
    """The two einsums' partial sums (q . k, attention . v) fit float32, or warn."""
    from qkeras2qonnx.hgq2_sums import check_einsum

    def oq(sub: Any, role: str) -> Any:
        return read_quantizer(sub.oq, f"{path}/{role} output")

    q, k = oq(layer._query_dense, "query"), oq(layer._key_dense, "key")
    v = oq(layer._value_dense, "value")
    a = oq(layer._softmax, "softmax")
    q_shape = tuple(layer._query_dense.full_output_shape[1:])
    k_shape = tuple(layer._key_dense.full_output_shape[1:])
    v_shape = tuple(layer._value_dense.full_output_shape[1:])
    a_shape = tuple(layer._softmax.get_build_config()["input_shape"][1:])
    check_einsum(layer._dot_product_equation, [(k, k_shape), (q, q_shape)], f"{path} q.k", inexact)
    check_einsum(layer._combine_equation, [(a, a_shape), (v, v_shape)], f"{path} a.v", inexact)


@functools.cache
def attention_class() -> type:
    """The plain attention (Keras 3): the stripped parts and HGQ2's two einsums."""
    import keras
    import tensorflow as tf

    class HGQ2Attention(keras.layers.Layer):
        def __init__(
            self, parts: dict[str, Any], dot: str, combine: str, shape: tuple, **kwargs: Any
        ):
            super().__init__(**kwargs)
            self.parts = dict(parts)
            self.dot, self.combine, self.shape = dot, combine, tuple(shape)

        def call(self, inputs: Any) -> Any:
            query, value, key = inputs
            p = self.parts
            if "lin_key" in p:  # QLinformerAttention
                key, value = p["lin_key"](key), p["lin_value"](value)
            q, k, v = p["query"](query), p["key"](key), p["value"](value)
            scores = p["softmax"](tf.einsum(self.dot, k, q))
            return p["output"](tf.einsum(self.combine, scores, v))

        def compute_output_shape(self, input_shape: Any) -> Any:
            first = input_shape[0]  # the query's shape, or its batch size
            return (first[0] if isinstance(first, list | tuple) else first, *self.shape)

    return HGQ2Attention
