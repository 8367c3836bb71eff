"""tensorflow-model-optimization's pruning wrapper, converted as the layer it wraps.

``PruneLowMagnitude.call`` assigns ``weight = weight * mask`` to every pruned weight on each
call, inference included, before running the inner layer; so the inner layer with those masked
weights is what the model computes. Loading imports tensorflow-model-optimization only for
models whose configuration names one of its wrappers (``environment.load``, ``PRUNING_WRAPPERS``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from qkeras2qonnx.qkeras_layers.stripped import LayerRule, Stripped


def unwrapped(inner_rule: LayerRule) -> LayerRule:
    """The rule of a wrapper: the inner layer's rule, on the masked weights, under the
    wrapper's name (the name the model's graph knows).

    The inner rule runs while the pruned variables hold ``weight * mask``, as they do when the
    wrapper calls the layer, so a rule that transforms weights before use (QConv2DBatchnorm's
    folding) transforms the masked ones; the variables get their values back afterwards.
    """

    def strip(wrapper: Any, where: str) -> Stripped:
        inner = wrapper.layer
        pruned = [(w, m) for w, m, _ in getattr(wrapper, "pruning_vars", [])]
        saved = [w.numpy() for w, _ in pruned]
        try:
            for weight, mask in pruned:
                weight.assign(_masked(weight, mask))
            stripped = inner_rule(inner, where)
            if stripped.weights is None:
                stripped.weights = [np.asarray(w.numpy()) for w in inner.weights]
        finally:
            for (weight, _), value in zip(pruned, saved, strict=True):
                weight.assign(value)
        stripped.config["name"] = wrapper.name
        return stripped

    return strip


def _masked(weight: Any, mask: Any) -> np.ndarray:
    """``weight * mask`` as the wrapper's ``weight_mask_op`` assigns it (the mask is 0 or 1)."""
    return np.asarray(weight.numpy()) * np.asarray(mask.numpy()).astype(weight.dtype.as_numpy_dtype)
