"""tensorflow-model-optimization's pruning wrapper, converted as the layer it wraps.

``PruneLowMagnitude.call`` assigns ``weight = weight * mask`` to every pruned weight on each
call, inference included, before running the inner layer; so the inner layer with those masked
weights is what the model computes. tensorflow-model-optimization is imported only for models
whose configuration names one of its wrappers (its import takes seconds).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from qkeras2qonnx.stripped import LayerRule, Stripped
from qonnx_ingest.errors import ConversionError

WRAPPERS = frozenset({"PruneLowMagnitude"})


def wrapper_objects(config: str | bytes) -> dict[str, Any]:
    """Custom objects for the pruning wrappers a model configuration names (else nothing)."""
    text = config.decode("utf-8", "replace") if isinstance(config, bytes) else str(config)
    if not any(f'"{name}"' in text for name in WRAPPERS):
        return {}
    from tensorflow_model_optimization.python.core.sparsity.keras import pruning_wrapper

    return {"PruneLowMagnitude": pruning_wrapper.PruneLowMagnitude}


def unwrapped(inner_rule: LayerRule) -> LayerRule:
    """The rule of a wrapper: the inner layer's rule, on the masked weights, under the
    wrapper's name (the name the model's graph knows)."""

    def strip(wrapper: Any, where: str) -> Stripped:
        inner = wrapper.layer
        stripped = inner_rule(inner, where)
        masks = {id(w): m for w, m, _ in getattr(wrapper, "pruning_vars", [])}
        if masks and stripped.weights is not None:
            raise ConversionError(
                f"pruning wrapper around {type(inner).__name__}, whose weights are transformed "
                "before use: the pruning mask cannot be applied",
                where,
            )
        stripped.weights = [
            np.asarray(w.numpy()) * np.asarray(masks[id(w)].numpy()).astype(w.dtype.as_numpy_dtype)
            if id(w) in masks
            else np.asarray(w.numpy())
            for w in inner.weights
        ]
        stripped.config["name"] = wrapper.name
        return stripped

    return strip
