"""Seeded small Keras models of the kinds people ship, converted by TF's TFLiteConverter in the
usual modes (scripts/sweep/sweep_keras_tflite.py sweeps them; test_tflite_sweep_regressions
pins fixes).

Needs tf_keras (TF_USE_LEGACY_KERAS=1); build in a fresh process (control_flow_models.
in_fresh_process) since TF's converter depends on process-wide state.
"""

from __future__ import annotations

import numpy as np

MODES = ("float32", "float16", "dynamic", "int8", "int8_fio", "16x8")


def _keras():
    import tensorflow as tf
    import tf_keras as keras

    keras.utils.set_random_seed(7)
    return tf, keras, keras.layers


def _hard_swish(layers, x):
    return layers.Multiply()([x, layers.ReLU(6.0)(x + 3.0) * (1.0 / 6.0)])


def cnn_bn(tf, keras, L):
    x0 = keras.Input((16, 16, 3), batch_size=1)
    x = L.Conv2D(8, 3, padding="same", use_bias=False)(x0)
    x = L.ReLU()(L.BatchNormalization()(x))
    a = L.DepthwiseConv2D(3, padding="same")(x)
    a = L.BatchNormalization()(a)
    b = L.SeparableConv2D(8, 3, padding="same", activation="relu")(x)
    x = L.Add()([x, a, b])
    x = L.Concatenate()([x, L.Conv2D(4, 1, activation="relu")(x)])
    x = L.MaxPooling2D()(x)
    x = L.AveragePooling2D()(L.Conv2D(8, 3, strides=1, padding="valid")(x))
    x = L.GlobalAveragePooling2D()(x)
    return keras.Model(x0, L.Dense(5, activation="softmax")(x))


def mobilenet_block(tf, keras, L):
    x0 = keras.Input((16, 16, 3), batch_size=1)
    x = L.Conv2D(8, 3, strides=2, padding="same", use_bias=False)(x0)
    x = L.ReLU(6.0)(L.BatchNormalization()(x))
    h = L.Conv2D(16, 1)(x)
    h = _hard_swish(L, L.BatchNormalization()(h))
    h = L.DepthwiseConv2D(3, padding="same")(h)
    h = _hard_swish(L, h)
    s = L.GlobalAveragePooling2D(keepdims=True)(h)
    s = L.Conv2D(4, 1, activation="relu")(s)
    s = L.Conv2D(16, 1, activation="hard_sigmoid")(s)
    h = L.Multiply()([h, s])
    h = L.BatchNormalization()(L.Conv2D(8, 1)(h))
    x = L.Add()([x, h])
    x = L.ReLU(6.0)(L.Conv2D(16, 1)(x))
    x = L.GlobalAveragePooling2D()(x)
    return keras.Model(x0, L.Softmax()(L.Dense(4)(x)))


def conv1d_audio(tf, keras, L):
    x0 = keras.Input((64, 4), batch_size=1)
    x = L.Conv1D(8, 5, padding="same")(x0)
    x = L.ReLU()(L.BatchNormalization()(x))
    x = L.MaxPooling1D(2)(x)
    x = L.Conv1D(8, 3, dilation_rate=2, padding="causal", activation="relu")(x)
    x = L.AveragePooling1D(2)(x)
    x = L.Conv1D(8, 3, strides=2, activation="relu")(x)
    x = L.GlobalMaxPooling1D()(x)
    return keras.Model(x0, L.Dense(3, activation="softmax")(x))


def dilated_conv(tf, keras, L):
    x0 = keras.Input((20, 20, 2), batch_size=1)
    x = L.Conv2D(6, 3, dilation_rate=2, padding="same", activation="relu")(x0)
    x = L.Conv2D(6, 3, dilation_rate=3, padding="valid", activation="tanh")(x)
    x = L.DepthwiseConv2D(3, dilation_rate=2, padding="same", activation="sigmoid")(x)
    return keras.Model(x0, x)


def decoder(tf, keras, L):
    x0 = keras.Input((8, 8, 4), batch_size=1)
    x = L.Conv2D(8, 3, strides=2, padding="same", activation="relu")(x0)
    x = L.Conv2DTranspose(8, 3, strides=2, padding="same", activation="relu")(x)
    x = L.UpSampling2D(2)(x)
    x = L.UpSampling2D(2, interpolation="bilinear")(L.Conv2D(4, 3, padding="same")(x))
    x = L.Resizing(24, 24)(x)
    x = L.Conv2DTranspose(2, 2, strides=2, padding="valid")(x)
    return keras.Model(x0, L.Activation("sigmoid")(x))


def pooling_reshape(tf, keras, L):
    x0 = keras.Input((12, 12, 3), batch_size=1)
    x = L.ZeroPadding2D(((1, 2), (2, 1)))(x0)
    x = L.Conv2D(6, 3, activation="elu")(x)
    x = L.Cropping2D(((1, 0), (0, 1)))(x)
    x = L.MaxPooling2D(3, strides=2, padding="same")(x)
    x = L.Reshape((-1, 6))(x)
    x = L.Permute((2, 1))(x)
    x = L.Flatten()(x)
    x = L.Dense(16)(x)
    x = L.LeakyReLU(0.2)(x)
    x = L.PReLU()(x)
    x = L.Dense(8, activation="swish")(x)
    return keras.Model(x0, L.Dense(3, activation="tanh")(x))


def _seq_input(keras, steps=8, features=6):
    return keras.Input((steps, features), batch_size=1)


def gru(tf, keras, L):
    x0 = _seq_input(keras)
    x = L.GRU(12)(x0)
    return keras.Model(x0, L.Dense(3, activation="softmax")(x))


def lstm(tf, keras, L):
    x0 = _seq_input(keras)
    x = L.LSTM(12)(x0)
    return keras.Model(x0, L.Dense(3)(x))


def lstm_stacked(tf, keras, L):
    x0 = _seq_input(keras)
    x = L.LSTM(10, return_sequences=True)(x0)
    x = L.LSTM(8, return_sequences=True)(x)
    return keras.Model(x0, L.TimeDistributed(L.Dense(2))(x))


def bilstm(tf, keras, L):
    x0 = _seq_input(keras)
    x = L.Bidirectional(L.LSTM(8, return_sequences=True))(x0)
    x = L.Bidirectional(L.LSTM(6))(x)
    return keras.Model(x0, L.Dense(3, activation="softmax")(x))


def simple_rnn(tf, keras, L):
    x0 = _seq_input(keras)
    x = L.SimpleRNN(10, return_sequences=True)(x0)
    x = L.SimpleRNN(6)(x)
    return keras.Model(x0, L.Dense(2)(x))


def attention(tf, keras, L):
    x0 = keras.Input((6, 16), batch_size=1)
    h = L.MultiHeadAttention(num_heads=2, key_dim=8)(x0, x0)
    x = L.LayerNormalization()(x0 + h)
    f = L.Dense(32, activation="gelu")(x)
    x = L.LayerNormalization()(x + L.Dense(16)(f))
    x = L.GlobalAveragePooling1D()(x)
    return keras.Model(x0, L.Dense(4, activation="softmax")(x))


def dot_attention(tf, keras, L):
    q = keras.Input((5, 8), batch_size=1)
    v = keras.Input((7, 8), batch_size=1)
    x = L.Attention()([q, v])
    x = L.Concatenate()([L.GlobalAveragePooling1D()(x), L.GlobalMaxPooling1D()(q)])
    return keras.Model([q, v], L.Dense(2)(x))


def recommender(tf, keras, L):
    user = keras.Input((1,), batch_size=1, dtype="int32")
    item = keras.Input((3,), batch_size=1, dtype="int32")
    u = L.Flatten()(L.Embedding(20, 8)(user))
    i = L.GlobalAveragePooling1D()(L.Embedding(30, 8)(item))
    dot = L.Dot(axes=1)([u, i])
    x = L.Concatenate()([u, i, dot])
    x = L.Dense(16, activation="relu")(x)
    return keras.Model([user, item], L.Dense(1, activation="sigmoid")(x))


def multi_io(tf, keras, L):
    img = keras.Input((10, 10, 3), batch_size=1)
    vec = keras.Input((5,), batch_size=1)
    x = L.Conv2D(6, 3, activation="relu")(img)
    x = L.GlobalAveragePooling2D()(x)
    x = L.Concatenate()([x, L.Dense(6, activation="relu")(vec)])
    cls = L.Dense(4, activation="softmax", name="cls")(x)
    reg = L.Dense(2, name="reg")(x)
    return keras.Model([img, vec], [cls, reg])


MODELS = {
    f.__name__: f
    for f in (
        cnn_bn,
        mobilenet_block,
        conv1d_audio,
        dilated_conv,
        decoder,
        pooling_reshape,
        gru,
        lstm,
        lstm_stacked,
        bilstm,
        simple_rnn,
        attention,
        dot_attention,
        recommender,
        multi_io,
    )
}


def _sample(inputs, rng):
    """One seeded sample per input: floats in [-1, 1], integer ids in [0, 20)."""
    out = []
    for t in inputs:
        shape = [1 if d is None else d for d in t.shape]
        if t.dtype.is_integer:
            out.append(rng.integers(0, 20, shape).astype(t.dtype.as_numpy_dtype))
        else:
            out.append(rng.uniform(-1, 1, shape).astype(np.float32))
    return out


def build(name: str, mode: str) -> bytes:
    """Model ``name`` converted in ``mode`` (one of MODES); raises what TF's converter raises."""
    tf, keras, layers = _keras()
    model = MODELS[name](tf, keras, layers)
    # fit the BatchNorm statistics a little so they are not the identity
    rng = np.random.default_rng(1)
    for layer in model.layers:
        if isinstance(layer, layers.BatchNormalization):
            dim = layer.moving_mean.shape[0]
            layer.moving_mean.assign(rng.normal(0, 0.3, dim).astype(np.float32))
            layer.moving_variance.assign(rng.uniform(0.5, 2.0, dim).astype(np.float32))
            layer.gamma.assign(rng.uniform(0.5, 1.5, dim).astype(np.float32))
            layer.beta.assign(rng.normal(0, 0.2, dim).astype(np.float32))
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if mode == "float16":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.target_spec.supported_types = [tf.float16]
    elif mode == "dynamic":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    elif mode in ("int8", "int8_fio", "16x8"):
        data = np.random.default_rng(0)

        def representative():
            for _ in range(24):
                yield _sample(model.inputs, data)

        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative
        if mode == "16x8":
            ops = tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8
            converter.target_spec.supported_ops = [ops]
        else:
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        if mode == "int8":
            converter.inference_input_type = tf.int8
            converter.inference_output_type = tf.int8
    elif mode != "float32":
        raise ValueError(f"unknown mode {mode!r}")
    return converter.convert()


def hybrid_dense() -> bytes:
    """Dense(24, relu) on 2 rows of 64 (TF leaves weights under 1024 elements float), dynamic
    range: a hybrid FULLY_CONNECTED, per-channel int8 weights, asymmetric_quantize_inputs."""
    tf, keras, layers = _keras()
    x0 = keras.Input((64,), batch_size=2)
    model = keras.Model(x0, layers.Dense(24, activation="relu", bias_initializer="uniform")(x0))
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    return converter.convert()
