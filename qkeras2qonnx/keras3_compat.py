"""Work-arounds for qkeras-v3 1.2.1 bugs that stop its own saved models from loading.

QDenseBatchnorm.get_config includes the inner BatchNormalization's training-only keys
(synchronized, renorm, renorm_clipping, renorm_momentum), which its ``__init__`` rejects, so
qkeras-v3 cannot load a .keras or .h5 file holding one. QConv2DBatchnorm drops exactly these
keys in its ``__init__``; the subclass below does the same. They only affect training: at
inference the layer folds the moving statistics, which are loaded unchanged.
"""

from __future__ import annotations

import functools
from typing import Any

_TRAINING_ONLY_BN_KEYS = ("synchronized", "renorm", "renorm_clipping", "renorm_momentum")


@functools.cache
def loading_objects() -> dict[str, Any]:
    """Custom objects that replace qkeras-v3 classes when loading (by both names Keras 3
    looks up: the class name and the registered ``qkeras>`` name)."""
    from qkeras import QDenseBatchnorm as Original

    class QDenseBatchnorm(Original):
        def __init__(self, *args: Any, **kwargs: Any):
            for key in _TRAINING_ONLY_BN_KEYS:
                kwargs.pop(key, None)
            super().__init__(*args, **kwargs)

    return {"QDenseBatchnorm": QDenseBatchnorm, "qkeras>QDenseBatchnorm": QDenseBatchnorm}
