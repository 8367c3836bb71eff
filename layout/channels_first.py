"""``to_channels_first``: the layout pass converters run on a graph built in source layout."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import onnx

from layout.classes import infer_ranks, node_rule
from layout.collapse import collapse_moves
from layout.graph import GraphIndex, constants_to_initializers, has_subgraph
from layout.matmul_swap import swap_transposed_matmuls
from layout.orders import PERMUTABLE_RANKS, SOURCE_NAMES, STORED_NAMES
from layout.propagate import Seed, assign, implicit_seeds
from layout.rewrite import Rewriter
from qonnx_ingest.errors import ConversionError, InputError
from qonnx_ingest.passes import PassResult, run_passes

_SOURCE = {"NHWC", *SOURCE_NAMES.values()}
_STORED = {"NCHW", *STORED_NAMES.values()}


def to_channels_first(model: onnx.ModelProto, **options: Any) -> onnx.ModelProto:
    """``channels_first``'s model (the layout package's entry point outside pass lists)."""
    return channels_first(model, **options)[0]


def channels_first(
    model: onnx.ModelProto,
    *,
    keep_io_layout: bool = False,
    explicit: Mapping[str, str] | None = None,
    keep_layout: Collection[str] = (),
) -> PassResult:
    """A copy of ``model`` whose layout-sensitive ops run channels-first, computing the same
    (a pass: modified, conservatively, always).

    ``model`` is in the source layout: activations channels-last (NWC / NHWC / NDHWC), implicit
    ops (Conv, pools, ...) already in ONNX form. Tensors linked to those ops through
    layout-transparent ops are stored channels-first; terminate ops (Reshape, MatMul, ...) get
    one shared Transpose back to source order where they need it. Graph inputs and outputs are
    exposed in their stored layout (recorded under the ``layout`` metadata key), or kept in
    source order with ``keep_io_layout``, or those named in ``keep_layout`` (streaming states
    a user feeds back as they are). ``explicit`` forces tensors to "NHWC" (source order) or
    "NCHW" (channels-first); a layout that contradicts another raises ``ConversionError``.
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    constants_to_initializers(out)
    g = GraphIndex(out)
    infer_ranks(g)
    rules = [node_rule(node, g) for node in g.nodes]
    seeds = implicit_seeds(g.nodes, rules) + _explicit_seeds(g, explicit or {})
    permuted = assign(rules, seeds)
    _refuse_subgraphs(g.nodes, rules, permuted)
    kept = set(g.inputs) | set(g.outputs) if keep_io_layout else set(keep_layout)
    Rewriter(g, rules, permuted, kept).run(out)
    out, _ = run_passes([swap_transposed_matmuls, collapse_moves], out)
    return out, True


def _refuse_subgraphs(nodes, rules, permuted: Mapping[str, bool]) -> None:
    """A graph holding a node with subgraphs whose class does not say how they read outer
    values (If, Loop and Scan do: ``OpClass.scoped``) cannot be permuted: the subgraphs may
    read any outer tensor by name. The error names the node (with its source op, recorded
    in its doc_string) and a permuted tensor, one the node reads where there is one."""
    stored = [t for t, value in permuted.items() if value]
    unknown = [n for n, r in zip(nodes, rules, strict=True) if has_subgraph(n) and not r.op.scoped]
    if not stored or not unknown:
        return
    node = unknown[0]
    tensor = next((t for t in node.input if permuted.get(t)), stored[0])
    source = f" ({node.doc_string})" if node.doc_string else ""
    raise ConversionError(
        f"{node.op_type} node '{node.name}'{source} holds a subgraph and tensor "
        f"'{tensor}' is stored channels-first: the layout pass does not know how this op's "
        "subgraphs read outer values (--channels-last keeps every tensor NHWC)",
        node.name or node.output[0],
    )


def _explicit_seeds(g: GraphIndex, explicit: Mapping[str, str]) -> list[Seed]:
    seeds = []
    for name, value in explicit.items():
        if g.is_const(name):
            raise InputError("explicit layouts apply to activations, not constants", name)
        if not g.is_activation(name):
            raise InputError("explicit layout names a tensor the graph does not have", name)
        key = str(value).upper()
        if key not in _SOURCE | _STORED:
            raise InputError(f"explicit layout {value!r} is not NHWC or NCHW", name)
        rank = g.rank.get(name)
        permuted = key in _STORED
        if permuted and rank not in PERMUTABLE_RANKS:
            raise InputError(f"explicit layout {value}: rank {rank} cannot be permuted", name)
        if (
            key not in ("NHWC", "NCHW")
            and rank is not None
            and key
            not in (
                SOURCE_NAMES.get(rank),
                STORED_NAMES.get(rank),
            )
        ):
            raise InputError(f"explicit layout {value} does not fit rank {rank}", name)
        seeds.append((name, permuted, f"the explicit layout {value} of '{name}'"))
    return seeds
