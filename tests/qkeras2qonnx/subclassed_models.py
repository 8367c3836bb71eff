"""Subclassed QKeras models (and a user-defined layer holding QKeras layers) for the
subclassed-model tests, defined once Keras is imported (tf_keras, for QKeras 0.9)."""

from __future__ import annotations

import functools
from types import SimpleNamespace

from qkeras_helpers import keras

INPUT = (6, 6, 2)
SET = (5, 3)  # a Deep Sets input: 5 elements of 3 features


@functools.cache
def classes() -> SimpleNamespace:
    """The model classes, defined once (after Keras is imported)."""
    from qkeras import QActivation, QConv2D, QDense, quantized_bits, quantized_relu

    k = keras()

    def qconv(name):
        return QConv2D(
            4, 3, padding="same", kernel_quantizer=quantized_bits(6, 2, alpha=1),
            bias_quantizer=quantized_bits(6, 2, alpha=1), name=name,
        )  # fmt: skip

    class Block(k.Model):
        """A subclassed model to nest: conv, quantized relu."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.conv = qconv("conv")
            self.act = QActivation(quantized_relu(6, 2), name="act")

        def call(self, x):
            return self.act(self.conv(x))

    class Residual(k.Model):
        """conv -> act, a second conv -> act branch, an Add of the two, a nested Functional."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.stem = qconv("stem")
            self.stem_act = QActivation(quantized_relu(6, 2), name="stem_act")
            self.branch = qconv("branch")
            self.branch_act = QActivation(quantized_relu(6, 2), name="branch_act")
            self.add = k.layers.Add(name="add")
            self.pool = k.layers.MaxPooling2D(2, name="pool")
            head_in = k.Input((3, 3, 4))
            head_out = QDense(3, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="fc")(
                k.layers.Flatten()(head_in)
            )
            self.head = k.Model(head_in, head_out, name="head")

        def call(self, x):
            h = self.stem_act(self.stem(x))
            return self.head(self.pool(self.add([h, self.branch_act(self.branch(h))])))

    class DenseBlock(k.layers.Layer):
        """A user-defined layer holding QKeras layers (and taking ``training``)."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.flat = k.layers.Flatten(name="flat")
            self.fc = QDense(3, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="fc")
            self.act = QActivation(quantized_relu(6, 2), name="fc_act")

        def call(self, x, training=None):
            return self.act(self.fc(self.flat(x)))

    class Nested(k.Model):
        """A subclassed model and a user-defined layer inside a subclassed model."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.block = Block(name="block")
            self.pool = k.layers.MaxPooling2D(2, name="pool")
            self.dense = DenseBlock(name="dense")

        def call(self, x, training=None):
            return self.dense(self.pool(self.block(x)), training=training)

    class RawOp(k.Model):
        """Adds with a raw TensorFlow op between its layers."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.conv = qconv("conv")
            self.fc = QDense(2, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="fc")
            self.flat = k.layers.Flatten(name="flat")

        def call(self, x):
            import tensorflow as tf

            return self.fc(self.flat(tf.nn.relu(self.conv(x))))

    class DeepSets(k.Model):
        """Deep Sets: phi on each element of the set, ``tf.reduce_mean`` over the set axis in
        the model's own call (a raw op between layers), rho on the pooled features."""

        def __init__(self, pool: str = "reduce_mean", **kwargs):
            super().__init__(**kwargs)
            self.pool = pool
            self.phi = QDense(
                8, kernel_quantizer=quantized_bits(6, 0, alpha=1),
                bias_quantizer=quantized_bits(6, 0, alpha=1), name="phi",
            )  # fmt: skip
            self.phi_act = QActivation(quantized_relu(6, 2), name="phi_act")
            self.rho = QDense(3, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="rho")

        def call(self, x):
            import tensorflow as tf

            h = self.phi_act(self.phi(x))
            return self.rho(getattr(tf.math, self.pool)(h, axis=1))

    class Holder(k.Model):
        """A subclassed block, a Functional and a Sequential sub-model, in a subclassed model."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.block = Block(name="block")
            inp = k.Input((6, 6, 4))
            relu = QActivation(quantized_relu(4, 1), name="relu")(inp)
            self.func = k.Model(inp, k.layers.MaxPooling2D(2, name="pool")(relu), name="func")
            self.seq = k.Sequential(
                [
                    k.Input((3, 3, 4)),
                    k.layers.Flatten(name="flat"),
                    QDense(3, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="fc"),
                ],
                name="seq",
            )

        def call(self, x):
            return self.seq(self.func(self.block(x)))

    class Scale(k.layers.Layer):
        """A user-defined layer holding no layers: its computation is its own Python code."""

        def call(self, x):
            return 0.5 * x

    return SimpleNamespace(
        Block=Block, Residual=Residual, RawOp=RawOp, Nested=Nested, Holder=Holder, Scale=Scale,
        DeepSets=DeepSets,
    )  # fmt: skip
