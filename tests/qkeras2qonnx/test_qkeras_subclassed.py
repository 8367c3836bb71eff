"""Subclassed QKeras models (``keras.Model`` subclasses, in memory and as SavedModels) convert
through their traced call, every quantizer in place, and equal QKeras's outputs."""

from __future__ import annotations

import numpy as np
import pytest
from qkeras_helpers import (
    assert_matches_qkeras,
    count_quantizers,
    keras,
    quant_nodes,
    set_seeded_weights,
)

from qonnx_ingest.errors import ConversionError

pytestmark = pytest.mark.keras

INPUT = (6, 6, 2)


def _classes():
    """The model classes, defined once Keras is imported (tf_keras, for QKeras 0.9)."""
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

    return Residual, RawOp, Nested


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    residual_cls, raw_cls, _ = _classes()
    x = np.zeros((1, *INPUT), np.float32)
    residual = residual_cls(name="residual")
    residual(x)
    set_seeded_weights(residual, 12)
    raw = raw_cls(name="raw")
    raw(x)
    set_seeded_weights(raw, 13)
    folder = tmp_path_factory.mktemp("subclassed")
    residual.save(folder / "residual")
    raw.save(folder / "raw")
    return {"residual": residual, "raw": raw, "folder": folder}


def test_in_memory_subclassed_model_with_a_nested_functional_matches_qkeras(models):
    import qkeras2qonnx

    model = models["residual"]
    onnx_model = qkeras2qonnx.convert(model)
    for batch in (1, 8):
        assert_matches_qkeras(model, onnx_model, batch=batch, step=1 / 16)
    # stem and branch convs (kernel and bias each), two relus, the head's dense kernel
    assert len(quant_nodes(onnx_model)) == count_quantizers(model) == 7


def test_saved_subclassed_model_converts_through_its_traced_call(models):
    import qkeras2qonnx
    from qkeras2qonnx.load import load_model

    path = models["folder"] / "residual"
    revived = load_model(path)
    assert type(revived).__module__.endswith("saved_model.load")  # no Python call to run
    onnx_model = qkeras2qonnx.convert(path)
    for batch in (1, 8):
        assert_matches_qkeras(revived, onnx_model, batch=batch, step=1 / 16)
        assert_matches_qkeras(models["residual"], onnx_model, batch=batch, step=1 / 16)
    assert len(quant_nodes(onnx_model)) == 7


def test_saved_subclassed_model_with_a_raw_op_between_layers_is_refused_naming_it(models):
    import qkeras2qonnx

    with pytest.raises(ConversionError, match=r"op '[^']*Relu' \(Relu\) in the subclassed model"):
        qkeras2qonnx.convert(models["folder"] / "raw")


def test_in_memory_subclassed_model_with_a_raw_op_matches_qkeras(models):
    """In memory the raw op is traced as a layer of its own (TFOpLambda) and converts."""
    import qkeras2qonnx

    model = models["raw"]
    onnx_model = qkeras2qonnx.convert(model)
    assert_matches_qkeras(model, onnx_model, batch=4, step=1 / 16)
    assert len(quant_nodes(onnx_model)) == count_quantizers(model) == 3


def test_subclassed_model_never_called_is_refused_with_a_hint():
    import qkeras2qonnx

    residual_cls, _, _ = _classes()
    with pytest.raises(ConversionError, match="never called has no input shape"):
        qkeras2qonnx.convert(residual_cls(name="fresh"))


@pytest.fixture(scope="module")
def nested():
    _, _, nested_cls = _classes()
    model = nested_cls(name="outer")
    model(np.zeros((1, *INPUT), np.float32))
    set_seeded_weights(model, 14)
    return model


def test_subclassed_model_and_custom_layer_nested_in_a_subclassed_model_match_qkeras(nested):
    """The nested subclassed model and the user-defined layer are traced through: their QKeras
    layers are converted where they sit (Keras cannot clone a model holding a subclassed one)."""
    import qkeras2qonnx

    onnx_model = qkeras2qonnx.convert(nested)
    for batch in (1, 8):
        assert_matches_qkeras(nested, onnx_model, batch=batch, step=1 / 16)
    # block's conv (kernel, bias) and relu; the dense block's kernel and relu
    assert len(quant_nodes(onnx_model)) == 5


def test_subclassed_model_nested_in_a_functional_model_is_refused_naming_it(nested):
    """A Functional model is cloned, not traced: a subclassed model inside is refused by name
    (Keras's cloning loops forever on it), not converted or hung on."""
    import qkeras2qonnx

    k = keras()
    inp = k.Input(INPUT)
    outer = k.Model(inp, k.layers.Flatten()(nested.block(inp)), name="functional_outer")
    with pytest.raises(ConversionError, match="subclassed model 'block' nested inside"):
        qkeras2qonnx.convert(outer)
