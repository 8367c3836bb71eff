"""One small float model (Conv2D -> DepthwiseConv2D -> Dense), converted once with TF's
converter and quantized with each single-model recipe of Google's ai-edge-quantizer.

The recipes are read from ``ai_edge_quantizer.recipe`` (its module-level recipe functions);
the ``gemma4_*`` ones are dicts of per-model recipes for a multi-model bundle, not recipes of
one model, and are left out. Static recipes calibrate on 8 seeded uniform [-1, 1) inputs.
"""

from __future__ import annotations

import functools
import os

import numpy as np
from tf_models import _tf

SHAPE = (2, 4, 4, 64)
_NOT_SINGLE_MODEL = ("gemma4_",)


def recipe_names() -> list[str]:
    """ai-edge-quantizer's recipes of one model, by function name."""
    from ai_edge_quantizer import recipe

    return sorted(
        name
        for name, value in vars(recipe).items()
        if name.startswith(("dynamic_", "static_", "weight_only_")) and callable(value)
    )


@functools.cache
def float_model(seed: int = 3) -> bytes:
    """Conv2D(16, 3, same, relu) -> DepthwiseConv2D(3, same) -> Flatten -> Dense(5) on
    [2, 4, 4, 64]: the conv and dense weights have 64 and 256 input channels, so the
    blockwise recipes (blocks of 32 or 64 along the input channels) apply to them."""
    tf = _tf()
    tf.keras.utils.set_random_seed(seed)
    x = tf.keras.Input(batch_size=SHAPE[0], shape=SHAPE[1:], name="x")
    h = tf.keras.layers.Conv2D(
        16, 3, padding="same", activation="relu", bias_initializer="random_uniform"
    )(x)
    h = tf.keras.layers.DepthwiseConv2D(3, padding="same", bias_initializer="random_uniform")(h)
    y = tf.keras.layers.Dense(5, bias_initializer="random_uniform")(tf.keras.layers.Flatten()(h))
    converter = tf.lite.TFLiteConverter.from_keras_model(tf.keras.Model(x, y))
    return converter.convert()


def quantized(name: str, source: bytes) -> bytes:
    """``source`` quantized with ai-edge-quantizer's recipe ``name``."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from ai_edge_quantizer import quantizer, recipe

    q = quantizer.Quantizer(source, getattr(recipe, name)())
    calibration = None
    if q.need_calibration:
        rng = np.random.default_rng(0)
        samples = [{"x": rng.uniform(-1, 1, SHAPE).astype(np.float32)} for _ in range(8)]
        calibration = q.calibrate({"serving_default": samples})
    return bytes(q.quantize(calibration, enable_progress_report=False).quantized_model)


def recipe_model(name: str) -> bytes:
    """The float model quantized with recipe ``name`` (``float``: the float model itself)."""
    return float_model() if name == "float" else quantized(name, float_model())
