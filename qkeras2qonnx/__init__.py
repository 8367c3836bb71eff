"""Convert quantized QKeras models to QONNX.

Pipeline (one module per step): ``load`` the Keras model, ``strip`` it into plain Keras layers
while recording every quantizer as a ``QuantSpec`` in a layer map, convert the plain model with
tf2onnx (``tf2onnx_step``), ``reinsert`` one Quant/BipolarQuant node per recorded quantizer, then
``qonnx_ingest.finish.finish_model``. Quantizers and layers are translated by the registries in
``quantizers`` and ``layers``.

Importing this package (and ``qkeras2qonnx --help``) never imports TensorFlow; the functions
below import it on first use.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

# QKeras is written for Keras 2. TensorFlow >= 2.16 binds tf.keras to Keras 3 unless this is set
# before TensorFlow is first imported, so it must happen here, before any TensorFlow import.
# setdefault: a caller's explicit choice wins (and is reported by backend.keras() if unusable).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

if TYPE_CHECKING:
    import onnx

__all__ = ["convert", "from_keras"]


def convert(
    model_or_path: Any,
    output_path: str | os.PathLike | None = None,
    *,
    opset: int = 13,
    batch_size: int | None = None,
    weights: str | os.PathLike | None = None,
    allow_lambda: bool = False,
    int_quant: bool = False,
    channels_last: bool = False,
) -> onnx.ModelProto:
    """Convert a QKeras model (in memory, or a .h5/.keras/SavedModel/.json path) to QONNX.

    ``batch_size=None`` keeps the batch dimension dynamic. ``weights`` loads a weights file on
    top (required for a .json architecture). Lambda layers run code stored in the model, so
    they are refused unless ``allow_lambda``. ``int_quant`` emits IntQuant instead of Quant.
    ``channels_last`` runs qonnx's ConvertToChannelsLastAndClean on the result (static shapes:
    the batch is fixed to 1 unless ``batch_size`` says otherwise).
    Every quantizer becomes exactly one QONNX node, or a ``ConversionError`` names it.
    """
    from qkeras2qonnx.pipeline import convert as _convert

    return _convert(
        model_or_path,
        output_path,
        opset=opset,
        batch_size=batch_size,
        weights=weights,
        allow_lambda=allow_lambda,
        int_quant=int_quant,
        channels_last=channels_last,
    )


def from_keras(
    model: Any,
    name: str = "qkeras_to_qonnx_converted",
    input_signature: Any = None,
    opset: int | None = None,
    custom_ops: dict | None = None,
    custom_op_handlers: dict | None = None,
    custom_rewriter: list | None = None,
    inputs_as_nchw: list | None = None,
    extra_opset: list | None = None,
    shape_override: dict | None = None,
    target: list | None = None,
    large_model: bool = False,
    output_path: str | os.PathLike | None = None,
) -> tuple[onnx.ModelProto, None]:
    """Drop-in for the removed ``qonnx.converters.from_keras``: same arguments, same
    ``(model_proto, external_storage)`` result (external storage is always None: models that
    need it are written as external data by ``save_model``)."""
    from qkeras2qonnx.pipeline import from_keras as _from_keras

    return _from_keras(
        model,
        name=name,
        input_signature=input_signature,
        opset=opset,
        custom_ops=custom_ops,
        custom_op_handlers=custom_op_handlers,
        custom_rewriter=custom_rewriter,
        inputs_as_nchw=inputs_as_nchw,
        extra_opset=extra_opset,
        shape_override=shape_override,
        target=target,
        large_model=large_model,
        output_path=output_path,
    )
