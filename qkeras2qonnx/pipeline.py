"""The conversion pipeline behind ``qkeras2qonnx.convert`` and ``qkeras2qonnx.from_keras``."""

from __future__ import annotations

import json
import os
import warnings
from functools import partial
from typing import TYPE_CHECKING, Any

import onnx

from layout.channels_last import fuse_channels_last
from layout.global_pool import source_global_pools
from qkeras2qonnx.emit.conv1d import conv1d_as_rank3
from qkeras2qonnx.emit.conv1d_bias import fold_conv1d_bias
from qkeras2qonnx.emit.explicit_pads import explicit_pads
from qkeras2qonnx.emit.output_shapes import fill_output_shapes, keras_output_dims
from qkeras2qonnx.emit.reinsert import check_quantizer_count, node_name, reinsert
from qkeras2qonnx.emit.tf2onnx_step import source_order_optimizers, to_onnx
from qkeras2qonnx.environment import flavour
from qkeras2qonnx.environment.load import load_model
from qkeras2qonnx.qkeras_layers.grouped_transpose import set_groups
from qkeras2qonnx.qkeras_recurrent.recurrent_cells import unroll_recurrent
from qkeras2qonnx.strip import LayerMap, strip_model
from qonnx_ingest.errors import ConversionError, ConversionWarning, NoQuantizerWarning
from qonnx_ingest.finish import DEFAULT_OPSET, MIN_OPSET, QUANT_OP_TYPES, finish_model
from qonnx_ingest.output import OutputOptions, finish_output, save_output
from qonnx_ingest.passes import PassResult, run_passes
from qonnx_ingest.report import COMPOSITE_QUANTIZERS
from qonnx_ingest.save import save_model

if TYPE_CHECKING:
    from qonnx_ingest.verification import Verification

HGQ2_WIDTHS = "qkeras2qonnx.hgq2_widths"


class OpsetRaised(ConversionWarning):
    """``from_keras`` was asked for an opset below the lowest it emits and used that one."""


def convert(
    model_or_path: Any,
    output_path: str | os.PathLike | None = None,
    *,
    opset: int = DEFAULT_OPSET,
    batch_size: int | None = None,
    weights: str | os.PathLike | None = None,
    allow_lambda: bool = False,
    int_quant: bool = False,
    channels_last: bool = False,
    verify: bool = False,
    format: str = "qonnx",
) -> onnx.ModelProto:
    """Convert a QKeras model (in memory, or a .h5/.keras/SavedModel/.json path) to QONNX.

    ``batch_size=None`` keeps the batch dimension dynamic. ``weights`` loads a weights file on
    top (required for a .json architecture). Lambda layers run code stored in the model, so
    they are refused unless ``allow_lambda``. ``int_quant`` emits IntQuant instead of Quant.
    ``channels_last`` writes Conv, MaxPool and BatchNormalization as qonnx's channels-last ops
    on the NHWC tensors (``layout.channels_last``; static shapes: the batch is fixed to 1
    unless ``batch_size`` says otherwise).
    Every quantizer becomes a QONNX node (inside an unrolled recurrent cell, one per step),
    or a ``ConversionError`` names it.
    A model of the QKeras generation this process did not import (qkeras-v3 / Keras 3 vs
    QKeras 0.9 / tf_keras, see ``flavour``) is converted in a subprocess.
    ``verify`` compares the result with ``model.predict`` on seeded inputs and raises
    ``VerificationError`` (nothing saved) when they differ beyond 1e-6 relative;
    ``convert_and_verify`` returns the figures too.
    ``format="qcdq"`` lowers the quantizers to QuantizeLinear/Clip/DequantizeLinear
    (``qonnx_ingest.qcdq.to_qcdq``; what is verified and saved is that form).
    """
    out = OutputOptions(
        opset=opset, int_quant=int_quant, channels_last=channels_last, batch_size=batch_size,
        format=format, verify=verify, output_path=output_path,
        inputs=tuple(str(p) for p in (model_or_path, weights) if isinstance(p, str | os.PathLike)),
    )  # fmt: skip
    out.check_output()  # fail before the expensive part
    needed = flavour.needed(model_or_path)
    options = {"opset": opset, "batch_size": out.batch, "int_quant": int_quant}
    options["channels_last"] = channels_last
    if not flavour.can_run(needed):  # the other QKeras generation: in a subprocess
        from qkeras2qonnx.environment.isolated import convert_elsewhere

        elsewhere = {"allow_lambda": allow_lambda, "verify": verify, "format": format}
        proto = convert_elsewhere(model_or_path, needed, weights=weights, **options, **elsewhere)
        return save_output(proto, out)  # in its format and verified there
    model = load_model(model_or_path, weights=weights, allow_lambda=allow_lambda)
    proto = convert_keras(model, **options)
    return finish_output(proto, out, reference=partial(_reference, model))[0]


def _reference(keras_model: Any, proto: onnx.ModelProto) -> Verification:
    """QKeras ``predict`` against ``proto`` on seeded inputs."""
    from qkeras2qonnx.reference import verify

    return verify(keras_model, proto)


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
    need it are written as external data by ``save_model``).

    The old converter's default was opset 9; an opset below the lowest we emit (its tests pass
    ``opset=9``) is raised to that one with one ``OpsetRaised`` warning.
    """
    if opset is not None and not isinstance(opset, bool) and int(opset) < MIN_OPSET:
        warnings.warn(
            f"opset {opset} is below the lowest opset qkeras2qonnx emits; using {MIN_OPSET}",
            OpsetRaised,
            stacklevel=2,
        )
        opset = MIN_OPSET
    if large_model:
        raise ConversionError(
            "large_model=True is not supported; save_model writes models over 2 GiB with "
            "their tensors as ONNX external data"
        )
    proto = convert_keras(
        load_model(model),
        opset=opset or DEFAULT_OPSET,
        name=name,
        input_signature=input_signature,
        custom_ops=custom_ops,
        custom_op_handlers=custom_op_handlers,
        custom_rewriter=custom_rewriter,
        inputs_as_nchw=inputs_as_nchw,
        extra_opset=extra_opset,
        shape_override=shape_override,
        target=target,
    )
    if output_path is not None:
        save_model(proto, output_path)
    return proto, None


def convert_keras(
    model: Any,
    *,
    opset: int = DEFAULT_OPSET,
    int_quant: bool = False,
    channels_last: bool = False,
    name: str | None = None,
    **tf2onnx_options: Any,
) -> onnx.ModelProto:
    """strip -> tf2onnx [-> groups] -> reinsert -> finish, then [1-D convolutions -> finish]
    and [channels-last -> finish], then count the quantizers once more. For channels-last,
    tf2onnx runs without its transpose optimizer, so the graph stays in Keras's NHWC order."""
    plain, layer_map = strip_model(model)
    if channels_last:  # source order: NHWC, tf2onnx's Transposes only around each Conv/pool
        tf2onnx_options["optimizers"] = source_order_optimizers()
    proto = to_onnx(plain, opset=opset, **tf2onnx_options)
    # the Keras model's own name when the caller gives none, not tf2onnx's "tf2onnx"
    graph_name = name or getattr(model, "name", None)
    if graph_name:
        proto.graph.name = graph_name
    built = [
        partial(set_groups, grouped=layer_map.grouped),
        partial(unroll_recurrent, layer_map=layer_map, int_quant=int_quant),
        partial(reinsert, layer_map=layer_map, int_quant=int_quant),
        explicit_pads,
        partial(fill_output_shapes, dims=keras_output_dims(plain)),
    ]
    proto, _ = run_passes(built, proto)
    finish = partial(finish_model, opset=opset)
    finished, _ = finish(proto, metadata=_metadata(layer_map))
    # each later pass that changes the graph is followed by finishing again
    # channels-last: each bias inside its Conv, global pools as in the default output, fused
    last = [fold_conv1d_bias, source_global_pools, fuse_channels_last] if channels_last else []
    reshaped = [conv1d_rank3, *last]
    finished, _ = run_passes(reshaped, finished, cleanup=finish)
    check_quantizer_count(finished, layer_map)
    if not any(n.op_type in QUANT_OP_TYPES for n in finished.graph.node):
        warnings.warn(
            f"{graph_name or 'the model'}: no quantizer: the ONNX model is float (is this a "
            "QKeras model?)",
            NoQuantizerWarning,
            stacklevel=2,
        )
    return finished


def conv1d_rank3(model: onnx.ModelProto) -> PassResult:
    """tf2onnx's Unsqueeze -> 2-D Conv -> Squeeze as a 1-D Conv with its bias inside: the
    form qonnx's channels-last pass returns on (a quantized bias Add after a rank-3 Conv
    made it loop, see qkeras2qonnx.emit.conv1d_bias) and hls4ml's ONNX frontend parses."""
    model, modified = conv1d_as_rank3(model)
    if modified:
        model, _ = fold_conv1d_bias(model)
    return model, modified


def _metadata(layer_map: LayerMap) -> dict[str, str]:
    """Which QKeras quantizer each QONNX node stands for, for people and tools downstream."""
    quantizers = {node_name(e): e.quantizer for e in layer_map.entries}
    quantizers.update(layer_map.recurrent_nodes())  # unrolled cells: one node per step
    metadata = {"qkeras2qonnx.quantizers": json.dumps(quantizers)}
    if layer_map.lost:
        metadata["qkeras2qonnx.lost_quantizers"] = json.dumps(layer_map.lost)
    if layer_map.folded:
        metadata["qkeras2qonnx.folded_quantizers"] = json.dumps(layer_map.folded)
    composite = {node_name(e): e.spec.composite.form for e in layer_map.entries if e.spec.composite}
    composite.update(layer_map.forms)
    if layer_map.inexact_sums:  # HGQ2: sums beyond float32's significand (warned)
        metadata["qkeras2qonnx.hgq2_inexact_sums"] = json.dumps(layer_map.inexact_sums)
    if layer_map.widths:  # HGQ2: per-element (k, i, f) of each Quant node, Keras layout
        metadata[HGQ2_WIDTHS] = json.dumps(layer_map.widths)
    for plan in layer_map.recurrent:
        composite.update(plan.composite)
    if composite:  # quantizers emitted as exact standard ops followed by an identity Quant
        metadata[COMPOSITE_QUANTIZERS] = json.dumps(composite)
    return metadata
