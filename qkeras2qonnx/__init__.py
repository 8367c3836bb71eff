"""Convert quantized QKeras models (QKeras 0.9, qkeras-v3) and HGQ2 models to QONNX.

Pipeline (one module per step): ``environment.load`` the Keras model, ``strip`` it into plain
Keras layers while recording every quantizer as a ``QuantSpec`` in a layer map, convert the
plain model with tf2onnx (``emit.tf2onnx_step``), ``emit.reinsert`` one Quant/BipolarQuant node
per recorded quantizer, then ``qonnx_ingest.finish.finish_model``. Quantizers and layers are
translated by the registries in ``qkeras_layers.quantizers`` and ``layers``; HGQ2 layers by
``hgq2_layers.hgq2_registry`` (see ``hgq2_layers.hgq2_strip``). The rooms, lowest first:
``environment``, ``emit``, ``qkeras_layers`` and ``hgq2_layers``, ``qkeras_recurrent``.

Importing this package (and ``qkeras2qonnx --help``) never imports TensorFlow; the functions
below import it on first use.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

# QKeras is written for Keras 2. TensorFlow >= 2.16 binds tf.keras to Keras 3 unless this is set
# before TensorFlow is first imported, so it must happen here, before any TensorFlow import.
# setdefault: a caller's explicit choice wins (and is reported by backend.keras() if unusable).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from qonnx_ingest import public  # noqa: E402
from qonnx_ingest.public import *  # noqa: E402, F403  (the errors and the version)

if TYPE_CHECKING:
    from qkeras2qonnx.pipeline import convert, from_keras
    from qkeras2qonnx.verified import convert_and_verify

__all__ = [*public.__all__, "convert", "convert_and_verify", "from_keras"]
# ``convert``, ``convert_and_verify`` and ``from_keras`` load the pipeline (and TensorFlow)
# on first use.
__getattr__ = public.lazy_attributes(
    "qkeras2qonnx",
    {
        "convert": "qkeras2qonnx.pipeline",
        "from_keras": "qkeras2qonnx.pipeline",
        "convert_and_verify": "qkeras2qonnx.verified",
    },
)
