"""Work-arounds for qkeras-v3 1.2.1 bugs that stop its own saved models from loading.

* QDenseBatchnorm.get_config includes the inner BatchNormalization's training-only keys
  (synchronized, renorm, renorm_clipping, renorm_momentum), which its ``__init__`` rejects, so
  qkeras-v3 cannot load a .keras or .h5 file holding one. QConv2DBatchnorm drops exactly these
  keys in its ``__init__``; the subclass below does the same. They only affect training: at
  inference the layer folds the moving statistics, which are loaded unchanged.
* QDepthwiseConv2DBatchnorm saves its iteration counter twice (as its third variable and again
  under the key ``iteration``) and then refuses the four entries when loading a .keras file.
  The subclass loads the numbered entries, which hold every variable in the order they were
  saved, and skips the duplicate.

The subclasses keep the class names, so the layer rules find them as usual. Keras 3 resolves a
``qkeras>`` registered name through its global registry before any ``custom_objects``, so
``fixed_classes`` puts them there for the duration of a load.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

_TRAINING_ONLY_BN_KEYS = ("synchronized", "renorm", "renorm_clipping", "renorm_momentum")


@functools.cache
def loading_objects() -> dict[str, Any]:
    """Custom objects that replace qkeras-v3 classes when loading (by both names Keras 3
    looks up: the class name and the registered ``qkeras>`` name)."""
    from qkeras import QDenseBatchnorm as OriginalDense
    from qkeras import QDepthwiseConv2DBatchnorm as OriginalDepthwise

    class QDenseBatchnorm(OriginalDense):
        def __init__(self, *args: Any, **kwargs: Any):
            for key in _TRAINING_ONLY_BN_KEYS:
                kwargs.pop(key, None)
            super().__init__(*args, **kwargs)

    class QDepthwiseConv2DBatchnorm(OriginalDepthwise):
        def load_own_variables(self, store: Any) -> None:
            # H5 stores have keys() but no __iter__.
            numbered = {k: store[k] for k in store.keys() if k != "iteration"}  # noqa: SIM118
            super(OriginalDepthwise, self).load_own_variables(numbered)

    objects: dict[str, Any] = {}
    for cls in (QDenseBatchnorm, QDepthwiseConv2DBatchnorm):
        objects[cls.__name__] = objects[f"qkeras>{cls.__name__}"] = cls
    return objects


@contextlib.contextmanager
def fixed_classes() -> Iterator[None]:
    """While loading: the fixed classes in Keras 3's global registry; then the originals."""
    import keras

    registry = keras.saving.get_custom_objects()
    objects = loading_objects()
    saved = {name: registry.get(name) for name in objects}
    registry.update(objects)
    try:
        yield
    finally:
        for name, cls in saved.items():
            if cls is None:
                registry.pop(name, None)
            else:
                registry[name] = cls
