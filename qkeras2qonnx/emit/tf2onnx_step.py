"""Convert the stripped plain-Keras model with tf2onnx's public ``convert.from_keras``."""

from __future__ import annotations

from typing import Any

import onnx

from qkeras2qonnx.compat import tf2onnx as compat_tf2onnx
from qkeras2qonnx.emit.canonical import canonicalize
from qkeras2qonnx.emit.markers import tf2onnx_handler
from qonnx_ingest.errors import ConversionError
from qonnx_ingest.symbolic_dims import dynamic_dim_name

_HANDLED_OP = "CheckNumerics"


def to_onnx(
    model: Any,
    *,
    opset: int,
    batch_size: int | None = None,
    input_signature: Any = None,
    custom_op_handlers: dict | None = None,
    **options: Any,
) -> onnx.ModelProto:
    """The ONNX graph of ``model`` (markers included); ``options`` go to tf2onnx unchanged.

    ``batch_size`` fixes the batch dimension of every input; None keeps it dynamic.
    """
    import tf2onnx

    handlers = dict(custom_op_handlers or {})
    if _HANDLED_OP in handlers:
        raise ConversionError(f"custom_op_handlers may not replace {_HANDLED_OP}: it marks layers")
    handlers[_HANDLED_OP] = (tf2onnx_handler, [])
    model = _functional(model)
    if input_signature is None and batch_size is not None:
        input_signature = _signature(model, batch_size)
    optimizers = options.pop("optimizers", None)
    compat_tf2onnx.restart_name_counter()  # the same names whatever was converted before
    with compat_tf2onnx.restoring_handler(_HANDLED_OP):
        try:
            proto, _ = tf2onnx.convert.from_keras(
                model,
                input_signature=input_signature,
                opset=opset,
                custom_op_handlers=handlers,
                optimizers=compat_tf2onnx.name_ordered_merges(optimizers),
                **options,
            )
        except ConversionError:
            raise
        except Exception as exc:
            raise ConversionError(f"tf2onnx failed: {type(exc).__name__}: {exc}") from exc
    _check_converted(proto)
    _name_batch_dims(proto.graph)
    canonicalize(proto.graph)
    return proto


def source_order_optimizers() -> dict:
    """tf2onnx's optimizers but its transpose optimizer: the graph stays in Keras's NHWC order,
    each Conv/pool between a Transpose to channels-first and one back (what
    ``layout.channels_last.fuse_channels_last`` turns into qonnx's channels-last ops)."""
    return compat_tf2onnx.optimizers_without("optimize_transpose")


def _functional(model: Any) -> Any:
    """tf2onnx 1.17 cannot name the outputs of a Keras 3 Sequential (KeyError 'keras_tensor_N');
    the same layers as a functional model convert."""
    from qkeras2qonnx.environment.flavour import KERAS3, model_flavour

    if model_flavour(model) != KERAS3 or not hasattr(model, "inputs"):
        return model
    import keras

    if not isinstance(model, keras.Sequential):
        return model
    return keras.Model(model.inputs, model.outputs, name=model.name)


def _signature(model: Any, batch_size: int) -> list:
    import tensorflow as tf

    return [
        tf.TensorSpec([batch_size, *t.shape[1:]], t.dtype, name=t.name.split(":")[0])
        for t in model.inputs
    ]


def _check_converted(proto: onnx.ModelProto) -> None:
    """tf2onnx.from_keras continues past ops it cannot convert; we do not."""
    for node in proto.graph.node:
        if node.domain in ("", "ai.onnx") and not onnx.defs.has(node.op_type):
            raise ConversionError(
                f"tf2onnx could not convert the TensorFlow op {node.op_type}", node.name
            )
        if node.op_type == _HANDLED_OP:
            raise ConversionError("tf2onnx left a CheckNumerics op unconverted", node.name)


def _name_batch_dims(graph: onnx.GraphProto) -> None:
    """tf2onnx names the dynamic dims of inputs and outputs unk__N, N from a process-wide
    counter; call the batch what it is and the others after their tensor, as tflite2qonnx
    does (``qonnx_ingest.symbolic_dims``)."""
    for value in (*graph.input, *graph.output):
        for axis, dim in enumerate(value.type.tensor_type.shape.dim):
            if not dim.HasField("dim_value"):
                dim.dim_param = dynamic_dim_name(value.name, axis)
