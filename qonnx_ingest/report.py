"""The quantization report: every quantized tensor's precision, and what the model costs.

Rows come from ``quant_info``; each carries its type in MLIR's quant dialect notation (seed
004), the one vendor-neutral way to write a uniform quantized type. The cost comes from
qonnx's inference-cost analysis, plus the QONNX paper's Eq. 5 BOPs, which also count the
additions and the accumulator width that qonnx's ``b_a * b_w`` per MAC leaves out.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np
import onnx

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.finish import QUANT_OP_TYPES
from qonnx_ingest.quant_info import (
    TENSOR_QUANTIZERS,
    QuantizedTensor,
    constant_quantizer_output,
    quantized_tensors,
)

_SHOWN_CHANNELS = 4  # per-axis values written out in the text table before "..."
# Model metadata key a converter sets to a JSON {quantizer node: what it computes} for the
# quantizers written as exact standard ops followed by a Quant that is the identity on their
# result's grid (e.g. QKeras's quantized_sigmoid): the report says which they are.
COMPOSITE_QUANTIZERS = "qonnx_ingest.composite_quantizers"


def mlir_type(q: QuantizedTensor, max_channels: int | None = None) -> str | None:
    """``!quant.uniform<...>`` for ``q``, or None where the dialect has no form for it
    (BipolarQuant's {-1, +1} has no zero code; a fractional bit width has no storage type)."""
    bits = q.integer_bits
    if q.bipolar or bits is None:
        return None
    storage = f"{'i' if q.signed else 'u'}{bits}"
    if q.narrow:
        lo, hi = q.storage_range
        storage += f"<{lo}:{hi}>"
    if not q.per_axis:
        return f"!quant.uniform<{storage}:f32, {_scale_zp(q.scale[0], q.zero_point[0])}>"
    shown = len(q.scale) if max_channels is None else min(len(q.scale), max_channels)
    # only the channels shown are formatted: a float's shortest text is slow to find
    pairs = [_scale_zp(s, z) for s, z in zip(q.scale[:shown], q.zero_point[:shown], strict=True)]
    if shown < len(q.scale):
        pairs.append("...")
    return f"!quant.uniform<{storage}:f32:{q.axis}, {{{','.join(pairs)}}}>"


def _scale_zp(scale: float, zero_point: float) -> str:
    text = _mlir_float(scale)
    return text if zero_point == 0 else f"{text}:{int(zero_point)}"


def _mlir_float(value: float) -> str:
    """The shortest text that reads back as the float32 ``value``, as an MLIR float literal:
    ``[0-9]+[.][0-9]*([eE][-+]?[0-9]+)?`` needs the point, so numpy's ``1e-05`` is written
    ``1.0e-05`` (``1e-05`` would lex as the integer 1 followed by garbage)."""
    text = str(np.float32(value))
    mantissa, e, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + e + exponent


@dataclass
class Cost:
    """Inference cost at batch 1, from qonnx's analysis (plus Eq. 5 BOPs)."""

    macs: float
    weights: float
    weight_bits: float
    bops: float  # qonnx: sum over MACs of b_a * b_w
    bops_eq5: float  # QONNX paper Eq. 5, summed over output positions
    unsupported: list[str] = field(default_factory=list)


@dataclass
class Report:
    tensors: list[QuantizedTensor]
    cost: Cost | None
    composite: dict[str, str] = field(default_factory=dict)  # node -> its computation

    def as_dict(self) -> dict:
        rows = [_row(q) for q in self.tensors]
        for row in rows:
            row["composite"] = self.composite.get(row["node"])
        return {"quantized_tensors": rows, "cost": None if self.cost is None else vars(self.cost)}

    def as_text(self) -> str:
        header = ("tensor", "role", "bits", "signed", "narrow", "scale", "zero point", "type")
        rows = [header]
        for q in self.tensors:
            rows.append(
                (
                    _shorten(q.tensor),
                    q.role,
                    "bipolar" if q.bipolar else f"{q.bit_width:g}",
                    "yes" if q.signed else "no",
                    "yes" if q.narrow else "no",
                    _scale_form(q),
                    _zero_point_text(q),
                    mlir_type(q, _SHOWN_CHANNELS) or "-",
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                 for r in rows]  # fmt: skip
        lines.insert(1, "  ".join("-" * w for w in widths))
        if not self.tensors:
            lines.append("(no quantized tensors)")
        lines.append("")
        if self.composite:
            lines.append("composite quantizers (exact standard ops, then an identity Quant):")
            lines.extend(f"  {_shorten(node)}: {form}" for node, form in self.composite.items())
            lines.append("")
        lines.extend(_cost_lines(self.cost))
        shifted = sum(bool(np.any(q.zero_point != 0)) for q in self.tensors)
        if self.cost is not None and shifted:
            # qonnx's datatype inference gives up on a zero point ("Only zero_point=0 IntQuant
            # nodes supported"): say so rather than let 32-bit figures pass for 8-bit ones
            lines.append(
                f"  note: qonnx types the {shifted} quantized tensors with a zero point as "
                "FLOAT32, so they count 32 bits in the weight bits and BOPs above"
            )
        return "\n".join(lines)


def report(model: onnx.ModelProto, cost: bool = True) -> Report:
    """The report of a converted model; ``cost=False`` skips the inference-cost analysis."""
    props = {p.key: p.value for p in model.metadata_props}
    try:
        composite = json.loads(props.get(COMPOSITE_QUANTIZERS, "{}"))
    except json.JSONDecodeError:
        composite = {}
    if not isinstance(composite, dict):
        composite = {}
    composite = {str(k): str(v) for k, v in composite.items()}
    return Report(quantized_tensors(model), inference_cost(model) if cost else None, composite)


def inference_cost(model: onnx.ModelProto) -> Cost:
    """qonnx's inference-cost analysis at batch 1 (dynamic dims set to 1; ``model`` unchanged).

    The preprocessing is qonnx's (datatypes inferred, weight quantizers folded so zero weights
    are discounted) but done in one linear pass: ``qonnx.util.inference_cost`` deep-copies
    and re-folds the whole graph per step, a minute on a MobileNet v2. qonnx's passes run on
    an IndexedModelWrapper, whose lookups do not scan the graph. The totals are summed here
    (``cost_totals``) rather than by ``qonnx.util.inference_cost``, whose import pulls in clize
    and qonnx's constant folding (a third of a second).
    """
    from qonnx.analysis.inference_cost import inference_cost as qonnx_analysis
    from qonnx.transformation.infer_datatypes import InferDataTypes

    from qonnx_ingest.indexed import IndexedModelWrapper

    wrapper = IndexedModelWrapper(_batch_one(model), cache_arrays=True)
    _name_nodes_uniquely(wrapper.model.graph)  # qonnx keys its per-node costs by name
    try:
        # one pass of qonnx's InferDataTypes: in a topologically sorted graph (every converted
        # model is) each node reads its inputs' final types, so qonnx's transform() loop only
        # repeats the pass to find nothing changed
        InferDataTypes(allow_scaledint_dtypes=True).apply(wrapper)
        _fold_constant_quantizers(wrapper)
        wrapper.reindex()  # quantizer nodes left the graph
        result = qonnx_analysis(wrapper, discount_sparsity=True, cost_breakdown=True)
    except Exception as exc:  # qonnx's analysis asserts on graphs it cannot read
        raise ConversionError(
            f"qonnx inference-cost analysis failed: {type(exc).__name__}: {exc}"
        ) from exc
    total = result["total_cost"]
    macs, bops, weights, weight_bits = cost_totals(total)
    return Cost(
        macs=macs,
        weights=weights,
        weight_bits=weight_bits,
        bops=bops,
        bops_eq5=_bops_eq5(wrapper, result.get("node_cost", {})),
        # qonnx's zero-cost list names Quant and Trunc but not qonnx's other quantizers
        unsupported=sorted(set(total.get("unsupported", ())) - QUANT_OP_TYPES),
    )


def cost_totals(costs: dict) -> tuple[float, float, float, float]:
    """(MACs, BOPs, weights, weight bits) of qonnx's cost dict, summed as
    ``qonnx.util.inference_cost``'s compute_bops_and_macs and compute_mem_bits_and_elems do:
    ``op_mac_<A>_<W>`` keys count MACs (BOPs: times both bit widths), ``mem_w_<T>`` weights."""
    from qonnx.core.datatype import DataType

    macs = bops = weights = weight_bits = 0.0
    for key, value in costs.items():
        parts = key.split("_")
        if key.startswith("op_mac"):
            macs += value
            bops += DataType[parts[2]].bitwidth() * DataType[parts[3]].bitwidth() * value
        elif key.startswith("mem_w"):
            weights += value
            weight_bits += DataType[parts[2]].bitwidth() * value
    return macs, bops, weights, weight_bits


def _name_nodes_uniquely(graph: onnx.GraphProto) -> None:
    """Name the unnamed and repeated nodes of ``graph`` (a copy): qonnx's analysis keys its
    per-node costs by node name, so two nodes called "" would count as one."""
    seen: set[str] = set()
    for index, node in enumerate(graph.node):
        if not node.name or node.name in seen:
            base = f"{node.op_type}_{index}"
            node.name = base
            while node.name in seen:
                node.name += "_"
        seen.add(node.name)


def _fold_constant_quantizers(wrapper) -> None:
    """Replace each quantizer of a constant by its output, keeping the output's datatype."""
    graph = wrapper.model.graph
    inits = {t.name for t in graph.initializer}
    folded = [
        node
        for node in graph.node
        if node.op_type in TENSOR_QUANTIZERS and all(name in inits for name in node.input)
    ]
    for node in folded:  # only the quantizers' inputs are read into arrays
        constants = {name: wrapper.get_initializer(name) for name in node.input}
        wrapper.set_initializer(node.output[0], constant_quantizer_output(node, constants, graph))
    if folded:  # one rebuild: removing nodes one by one scans the list per node
        gone = {id(node) for node in folded}
        kept = [node for node in graph.node if id(node) not in gone]
        copies = [onnx.NodeProto() for _ in kept]
        for copy, node in zip(copies, kept, strict=True):
            copy.CopyFrom(node)
        del graph.node[:]
        graph.node.extend(copies)


def _bops_eq5(wrapper, node_costs: dict) -> float:
    """Eq. 5, BOPs ~ m n k^2 (b_a b_w + b_a + b_w + log2(n k^2)), per output position: n k^2
    is the fan-in of one output (MACs / output elements), m n k^2 the MACs of one position."""
    from qonnx.core.datatype import DataType

    outputs = {n.name: n.output[0] for n in wrapper.model.graph.node}
    total = 0.0
    for name, cost in node_costs.items():
        shape = wrapper.get_tensor_shape(outputs.get(name, ""))
        for key, macs in cost.items():
            if not key.startswith("op_mac_") or not macs:
                continue
            _, _, a_type, w_type = key.split("_", 3)
            b_a, b_w = DataType[a_type].bitwidth(), DataType[w_type].bitwidth()
            fan_in = macs / math.prod(shape) if shape else 1.0
            total += macs * (b_a * b_w + b_a + b_w + math.log2(max(fan_in, 1.0)))
    return total


def _batch_one(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy with every dim static: dynamic ones set to 1 and shapes re-inferred, unless
    every tensor a node writes already has a static shape (the converters' finishing inferred
    them, and re-inferring the same shapes is a tenth of a second on a MobileNet)."""
    from qonnx_ingest.execute import with_static_shapes

    if _all_shapes_static(model.graph):
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        return copy
    feeds = {}
    inits = {t.name for t in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        dims = [
            d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim
        ]
        feeds[vi.name] = np.zeros(dims, dtype=np.float32)
    return with_static_shapes(model, feeds)  # a copy


def _all_shapes_static(graph: onnx.GraphProto) -> bool:
    infos = {v.name: v for v in (*graph.input, *graph.output, *graph.value_info)}
    names = [vi.name for vi in graph.input] + [o for n in graph.node for o in n.output if o]
    for name in names:
        info = infos.get(name)
        if info is None or not info.type.tensor_type.HasField("shape"):
            return False
        if not all(d.HasField("dim_value") for d in info.type.tensor_type.shape.dim):
            return False
    return True


def _row(q: QuantizedTensor) -> dict:
    return {
        "tensor": q.tensor,
        "node": q.node,
        "op_type": q.op_type,
        "role": q.role,
        "bit_width": q.bit_width,
        "signed": q.signed,
        "narrow": q.narrow,
        "bipolar": q.bipolar,
        "rounding_mode": q.rounding_mode,
        "axis": q.axis,
        "scale": q.scale.tolist(),
        "zero_point": q.zero_point.tolist(),
        "mlir": mlir_type(q),
    }


def _shorten(name: str, width: int = 56) -> str:
    """Long TFLite names keep their distinctive tail in the table (JSON has them whole)."""
    return name if len(name) <= width else "..." + name[-(width - 3) :]


def _scale_form(q: QuantizedTensor) -> str:
    if q.per_axis:
        return f"per-channel axis {q.axis} (x{q.scale.size})"
    return f"per-tensor {_mlir_float(q.scale[0])}"  # the float32 the MLIR type states


def _zero_point_text(q: QuantizedTensor) -> str:
    zp = np.unique(q.zero_point)
    return f"{zp[0]:g}" if zp.size == 1 else f"per-channel ({zp.min():g}..{zp.max():g})"


def _cost_lines(cost: Cost | None) -> list[str]:
    if cost is None:
        return []
    lines = [
        "inference cost (batch 1, qonnx inference_cost):",
        f"  MACs              {cost.macs:,.0f}",
        f"  weights           {cost.weights:,.0f}",
        f"  weight bits       {cost.weight_bits:,.0f}",
        f"  BOPs (b_a*b_w)    {cost.bops:,.0f}",
        f"  BOPs (Eq. 5)      {cost.bops_eq5:,.0f}",
    ]
    if cost.unsupported:
        lines.append(f"  not costed: {', '.join(cost.unsupported)}")
    return lines
