"""The hls4ml form (``--format hls4ml``): the same function, written the way hls4ml 1.3.0's
QONNX frontend reads it.

hls4ml turns each Quant into a fixed-point type, and knows only the rounding modes ROUND and
FLOOR (``_calculate_precision_quantizer``, hls4ml/model/optimizer/passes/quant_opt.py); a
non-power-of-two or per-channel scale of a constant becomes a Constant + ApplyAlpha that its
passes often cannot move past a Dense or Conv (IndexError in ``InferPrecisionTypes``).

* A constant Quant (a weight or bias: QKeras ``alpha='auto'`` kernels, TFLite's weights) that
  hls4ml cannot read as one fixed-point type (a rounding other than ROUND/FLOOR, a scale not one
  power of two, a zero point; any constant BipolarQuant) is written as its already-quantized
  values under one power-of-two grid that holds every one of them: every float32 is a dyadic
  rational, so ``2**-k`` for the finest exponent among the values, and the bit width that spans
  them. The new Quant maps its values to themselves (this is checked, value for value, and
  refused otherwise), so its rounding mode (written ROUND) is moot, and hls4ml reads a plain
  fixed-point constant.
* A Clip the next Quant saturates anyway, and a global average pool (which hls4ml reads only
  in a channels-last domain qonnx does not have), are written as the same function in ops
  hls4ml reads (``hls4ml_layers``).
* An activation Quant rounding ``HALF_UP`` (TFLite's round half away from zero) differs from
  hls4ml's ROUND (half to even) at exact ties. Where a tie is provably never met, or met only
  where ``FLOOR(x + 1/2)`` gives the same result, it is written so
  (``qonnx_ingest.targets.hls4ml_rounding``); otherwise, with zero point 0, split by sign into
  two FLOOR Quants (``hls4ml_split``); any other is refused, naming the node. Nothing
  is approximated unless the caller asks for it (``round_unproven_ties``, the TFLite opt-in
  ``tflite2qonnx.hls4ml_form``), and then each such Quant is named in the metadata.
* hls4ml drops a zero point on a power-of-two scale: an int8 Quant with zero point -128 is
  written as the unsigned Quant it equals, any other such Quant refused
  (``hls4ml_zero_points``).
"""

from __future__ import annotations

import json
from functools import partial

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.finish import remove_unused_tensors
from qonnx_ingest.names import graph_names, unique_name
from qonnx_ingest.passes import PassResult, run_passes
from qonnx_ingest.targets.hls4ml_graph import QUANTS
from qonnx_ingest.targets.hls4ml_zero_points import zero_points_hls4ml_keeps

QONNX_DOMAIN = "qonnx.custom_op.general"
# rounding modes hls4ml 1.3.0 reads (quant_opt.py, _calculate_precision_quantizer)
HLS4ML_ROUNDING = ("ROUND", "FLOOR")
# what the form changed, when it changed something (JSON)
FORM_KEY = "qonnx_ingest.hls4ml"
EXACT = "HALF_UP written exactly"
DEVIATED = "HALF_UP as ROUND, ties may differ"
REGRIDDED = "constant Quants on a power-of-two grid"
LAYERS = "ops rewritten for hls4ml"


def to_hls4ml(model: onnx.ModelProto, *, round_unproven_ties: bool = False) -> onnx.ModelProto:
    """A copy of ``model`` in the hls4ml form; ``model`` is not changed.

    ``round_unproven_ties`` writes ROUND on an activation HALF_UP Quant no rule proves
    (a deviation at exact ties, named in the metadata) instead of refusing it."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    record: dict = {}
    passes = [
        partial(constant_quants_on_dyadic_grid, record=record),
        remove_unused_tensors,
        partial(hls4ml_layers, record=record),
        partial(exact_half_up, record=record),
        partial(refuse_other_rounding, deviate=round_unproven_ties, record=record),
        partial(zero_points_hls4ml_keeps, record=record),
    ]
    model, _ = run_passes(passes, model)
    if any(record.values()):
        props = {p.key: p.value for p in model.metadata_props}
        helper.set_model_props(model, {**props, FORM_KEY: json.dumps(record)})
    return model


def hls4ml_layers(model: onnx.ModelProto, *, record: dict | None = None) -> PassResult:
    """Clips the next Quant saturates anyway dropped; global average pools as a sum MatMul
    (``qonnx_ingest.targets.hls4ml_layers``)."""
    from qonnx_ingest.targets.hls4ml_layers import fold_saturating_clips, global_average_as_matmul

    model, folded = fold_saturating_clips(model, _quantized)
    model, pooled = global_average_as_matmul(model)
    if record is not None and (folded or pooled):
        record[LAYERS] = {"Clip folded into its Quant": folded, "global average as MatMul": pooled}
    return model, folded or pooled


def exact_half_up(model: onnx.ModelProto, *, record: dict | None = None) -> PassResult:
    """Activation HALF_UP Quants written as ROUND / FLOOR where provably the same function,
    proven tie-free or split by sign."""
    from qonnx_ingest.targets.hls4ml_rounding import rewrite_half_up
    from qonnx_ingest.targets.hls4ml_split import split_half_up

    report = rewrite_half_up(model, _quantized)
    report.update(split_half_up(model, _quantized))  # what no rule proves tie-free
    if record is not None and report:
        record[EXACT] = report
    return model, bool(report)


def constant_quants_on_dyadic_grid(
    model: onnx.ModelProto, *, record: dict | None = None
) -> PassResult:
    """Each constant Quant becomes Quant(its quantized values) on the one power-of-two grid
    that holds them all exactly (scale ``2**-k``, zero point 0, ROUND)."""
    from qonnx.custom_op.general.quant import quant

    graph = model.graph
    constants = {i.name: i for i in graph.initializer}
    taken = graph_names(graph)
    modified = False
    for node in graph.node:
        if node.op_type not in (*QUANTS, "BipolarQuant") or any(
            n not in constants for n in node.input
        ):
            continue
        if _read_as_is(node, constants):
            continue
        where = f"{node.op_type} {node.name or node.output[0]}"
        values = _quantized(node, [numpy_helper.to_array(constants[n]) for n in node.input])
        x = numpy_helper.to_array(constants[node.input[0]])
        values = np.broadcast_to(values, np.broadcast_shapes(values.shape, x.shape)).copy()
        if not np.all(np.isfinite(values)):
            raise ConversionError("a constant Quant gives a non-finite value", where)
        exponent = _finest_exponent(values)
        ints = values.astype(np.float64) * 2.0**exponent
        top = max(float(np.abs(ints).max()), 1.0)
        width = int(np.ceil(np.log2(top + 1))) + 1  # signed: -2**(w-1) .. 2**(w-1) - 1
        grid_scale = np.float32(2.0**-exponent)
        again = quant(values, grid_scale, np.float32(0), np.float32(width), 1, 0, "ROUND")
        if not np.array_equal(np.asarray(again, dtype=np.float32), values):
            raise ConversionError(
                "a constant Quant's values are not their own quantization on a power-of-two "
                "grid (hls4ml needs one)",
                where,
            )
        base = node.name or node.output[0]
        names = [unique_name(f"{base}_hls4ml_{what}", taken) for what in ("x", "s", "z", "b")]
        for name, value in zip(
            names,
            (values, grid_scale, np.float32(0), np.float32(width)),
            strict=True,
        ):
            graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
        node.op_type, node.domain = "Quant", QONNX_DOMAIN
        del node.input[:]
        node.input.extend(names)
        del node.attribute[:]
        node.attribute.extend(
            [
                helper.make_attribute("signed", 1),
                helper.make_attribute("narrow", 0),
                helper.make_attribute("rounding_mode", "ROUND"),
            ]
        )
        modified = True
        if record is not None:
            record[REGRIDDED] = record.get(REGRIDDED, 0) + 1
    return model, modified


def _read_as_is(node: onnx.NodeProto, constants: dict) -> bool:
    """A Quant hls4ml already reads as one fixed-point type: one power-of-two scale, zero
    point 0, ROUND or FLOOR. Left as it is."""
    if node.op_type not in QUANTS:
        return False
    scale, zero_point = (numpy_helper.to_array(constants[n]) for n in node.input[1:3])
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    rounding = attrs.get("rounding_mode", b"ROUND")
    rounding = rounding.decode() if isinstance(rounding, bytes) else rounding
    if scale.size != 1 or np.any(zero_point) or rounding not in HLS4ML_ROUNDING:
        return False
    mantissa, _ = np.frexp(np.float64(scale.flat[0]))
    return bool(mantissa == 0.5)


def _quantized(node: onnx.NodeProto, inputs: list[np.ndarray]) -> np.ndarray:
    """What the constant Quant / BipolarQuant ``node`` computes, by qonnx's own functions."""
    if node.op_type == "BipolarQuant":
        from qonnx.custom_op.general.bipolar_quant import binary_quant

        return np.asarray(binary_quant(*inputs), dtype=np.float32)
    from qonnx.custom_op.general.quant import quant

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    rounding = attrs.get("rounding_mode", b"ROUND")
    rounding = rounding.decode() if isinstance(rounding, bytes) else rounding
    signed, narrow = int(attrs.get("signed", 1)), int(attrs.get("narrow", 0))
    return np.asarray(quant(*inputs, signed, narrow, rounding), dtype=np.float32)


def refuse_other_rounding(
    model: onnx.ModelProto, *, deviate: bool = False, record: dict | None = None
) -> PassResult:
    """An activation Quant rounding otherwise than ROUND/FLOOR has no exact hls4ml form:
    refused, or with ``deviate`` a HALF_UP one written ROUND and named in ``record``."""
    deviated = []
    for node in model.graph.node:
        if node.op_type not in QUANTS:
            continue
        for attr in node.attribute:
            if attr.name != "rounding_mode":
                continue
            mode = helper.get_attribute_value(attr)
            mode = mode.decode() if isinstance(mode, bytes) else mode
            if mode == "HALF_UP" and deviate:
                attr.s = b"ROUND"
                deviated.append(node.name or node.output[0])
            elif mode not in HLS4ML_ROUNDING:
                raise ConversionError(
                    f"rounds {mode}; hls4ml 1.3.0 has only ROUND (half to even) and FLOOR, "
                    "and no rule proves that ties are never met or moot here",
                    f"{node.op_type} {node.name or node.output[0]}",
                )
    if record is not None and deviated:
        record[DEVIATED] = deviated
    return model, bool(deviated)


def _finest_exponent(values: np.ndarray) -> int:
    """The least k with every value times 2**k an integer (values are float32: k <= 149)."""
    nonzero = values[values != 0].astype(np.float64)
    if nonzero.size == 0:
        return 0
    mantissa, exponent = np.frexp(nonzero)  # value = m * 2**e, 0.5 <= |m| < 1
    # m * 2**53 is an integer; its trailing zeros say how much of 2**53 is not needed
    m = np.abs(mantissa * 2.0**53).astype(np.int64)
    lowest_bit = (m & -m).astype(np.float64)  # a power of two up to 2**53: log2 is exact
    trailing = np.log2(lowest_bit).astype(np.int64)
    return int(np.max(53 - trailing - exponent))
