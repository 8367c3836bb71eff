"""HGQ2's QMultiHeadAttention as its parts: four QEinsumDense projections, two einsums and a
QSoftmax, each stripped by its own rule (``hgq2_registry``) under ``<layer>/<part>``;
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

from qkeras2qonnx.compat import hgq2 as compat_hgq2
from qkeras2qonnx.compat import keras as compat_keras
from qkeras2qonnx.hgq2_layers.hgq2_quantizer import Fixed, read_quantizer
from qonnx_ingest.errors import ConversionError

PARTS = ("query", "key", "value", "softmax", "output")


def attention(layer: Any, where: str) -> tuple[dict[str, Any], dict, Fixed | None]:
    """A QMultiHeadAttention's parts to strip, its plain layer's config and its output
    quantizer (``hgq2_registry`` makes the Plan)."""
    _refuse_masks(layer, where)
    inverse_sqrt_key_dim, fuse = compat_hgq2.attention_options(layer)
    if inverse_sqrt_key_dim != 1.0:  # HGQ2 moved it into the softmax
        raise ConversionError("the query's 1/sqrt(key_dim) is not in the softmax table", where)
    if fuse != "none":
        raise ConversionError(f"fuse={fuse!r}: not supported", where)
    parts = dict(zip(PARTS, compat_hgq2.attention_parts(layer), strict=True))
    if type(layer).__name__ == "QLinformerAttention":  # key / value projected along the sequence
        if layer.share_kv_proj:
            raise ConversionError("share_kv_proj=True: not supported", where)
        lin_key, lin_value = compat_hgq2.linformer_projections(layer)
        parts.update(lin_key=lin_key, lin_value=lin_value)
    dot, combine = compat_hgq2.attention_equations(layer)
    config = {
        "name": layer.name,
        "dot": dot,
        "combine": combine,
        "shape": tuple(parts["output"].full_output_shape[1:]),
    }
    output = read_quantizer(layer.oq, f"{where} output") if layer.enable_oq else None
    return parts, config, output


def _refuse_masks(layer: Any, where: str) -> None:
    """Masks (``attention_mask``, ``use_causal_mask``, ...) and ``return_attention_scores``
    change what the layer computes: refused, read from the calls in the model (Keras 3 keeps
    them on the layer's nodes; the cloned wrapper checks again when it is called)."""
    for node in compat_keras.inbound_nodes(layer):
        kwargs = getattr(getattr(node, "arguments", None), "kwargs", {}) or {}
        given = sorted(k for k, v in kwargs.items() if k not in ("value", "key", "training")
                       and v is not None and v is not False)  # fmt: skip
        if given:
            raise ConversionError(f"call arguments {given}: not supported", where)


def check_einsums(layer: Any, path: str, inexact: dict[str, str]) -> None:
    """The two einsums' partial sums (q . k, attention . v) fit float32, or warn."""
    from qkeras2qonnx.hgq2_layers.hgq2_sums import check_einsum

    def oq(sub: Any, role: str) -> Any:
        return read_quantizer(sub.oq, f"{path}/{role} output")

    query, key, value, softmax, _ = compat_hgq2.attention_parts(layer)
    q, k = oq(query, "query"), oq(key, "key")
    v, a = oq(value, "value"), oq(softmax, "softmax")
    q_shape = tuple(query.full_output_shape[1:])
    k_shape = tuple(key.full_output_shape[1:])
    v_shape = tuple(value.full_output_shape[1:])
    a_shape = tuple(softmax.get_build_config()["input_shape"][1:])
    dot, combine = compat_hgq2.attention_equations(layer)
    check_einsum(dot, [(k, k_shape), (q, q_shape)], f"{path} q.k", inexact)
    check_einsum(combine, [(a, a_shape), (v, v_shape)], f"{path} a.v", inexact)


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
