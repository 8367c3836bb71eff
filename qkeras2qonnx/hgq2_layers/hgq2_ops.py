"""Plain Keras 3 stand-ins for HGQ2 operations Keras has no layer for (QSum, QMeanPow2,
QAveragePow2, QEinsum), and QAdd: the same TensorFlow arithmetic in the same order, between
the layer's quantizers. (Keras's own Add goes through ``keras.ops.add``, which at batch 1
turns a (1, n) second input into a squeezed ``BiasAdd``: a Squeeze hls4ml's ONNX frontend
refuses.) Sums of quantized values are exact in float32 as long as they fit its 24-bit
significand (``hgq2_sums`` checks it); scales are powers of two (exact)."""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def op_class() -> type:
    import keras
    import tensorflow as tf

    class HGQ2Op(keras.layers.Layer):
        """``kind`` is "sum" (reduce_sum over ``axes`` times ``scale``), "average_pow2"
        (inputs added in order, times ``scale``; QAdd: scale 1) or "einsum" (``equation``)."""

        def __init__(self, kind: str, params: dict, **kwargs: Any):
            super().__init__(**kwargs)
            self.kind = kind
            self.params = dict(params)

        def call(self, inputs: Any) -> Any:
            p = self.params
            if self.kind == "sum":
                total = tf.reduce_sum(inputs, axis=p["axes"], keepdims=p["keepdims"])
                return total if p["scale"] == 1.0 else tf.multiply(total, p["scale"])
            if self.kind == "average_pow2":
                total = inputs[0]
                for x in inputs[1:]:
                    total = tf.add(total, x)
                return total if p["scale"] == 1.0 else tf.multiply(total, p["scale"])
            return tf.einsum(p["equation"], *inputs)

        def compute_output_shape(self, input_shape: Any) -> Any:
            from qkeras2qonnx.compat.keras import compute_output_spec

            many = self.kind != "sum"
            specs = [keras.KerasTensor(s) for s in input_shape] if many else None
            spec = compute_output_spec(self.call, specs or keras.KerasTensor(input_shape))
            return spec.shape

    return HGQ2Op
