"""Unique tensor and node names, shared by every pass that invents names."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx


class TakenNames(set):
    """The names in use, remembering per hint the next suffix to try: without it a thousand
    nodes named after one hint cost a thousand probes each (quadratic on deep models)."""

    def __init__(self, names: Iterable[str] = ()):
        super().__init__(names)
        self.next_suffix: dict[str, int] = {}


def graph_names(graph: onnx.GraphProto) -> TakenNames:
    """Every name a graph uses (initializers, inputs, nodes and their outputs), for a pass
    that adds nodes and tensors to it."""
    names = TakenNames(i.name for i in graph.initializer)
    names.update(i.name for i in graph.input)
    for node in graph.node:
        names.add(node.name)
        names.update(node.output)
    return names


def unique_name(hint: str, taken: set[str]) -> str:
    """``hint``, or ``hint_1``, ``hint_2``, ... whichever is free first; it is then taken.

    Names are never released, so with a TakenNames the search resumes where the last one
    for this hint stopped.
    """
    counters = getattr(taken, "next_suffix", None)
    k = counters.get(hint, 1) if counters is not None else 1
    name = hint if k == 1 else f"{hint}_{k}"
    while name in taken:
        name, k = f"{hint}_{k}", k + 1
    if counters is not None:
        counters[hint] = k
    taken.add(name)
    return name


def readable(name: str, limit: int = 48) -> str:
    """A tensor name short enough for a message: the first of TFLite's ';'-joined fused names
    (the op's own), its tail kept when still longer than ``limit``."""
    first = name.split(";", 1)[0] or name
    return first if len(first) <= limit else "..." + first[-(limit - 3) :]


def name_list(names: list[str], shown: int = 3) -> str:
    """``a, b, c and 7 more``: a list a person can read, whatever its length."""
    head = ", ".join(readable(n) for n in names[:shown])
    return head if len(names) <= shown else f"{head} and {len(names) - shown} more"


def short_name(name: str, limit: int = 80) -> str:
    """A node or parameter name from a tensor name: TFLite's fused names ``a;b;c`` joined
    by ';' (up to hundreds of characters) become their first part, the op's own; still
    longer than ``limit``, the tail is kept (it says the most about the op)."""
    first = name.split(";", 1)[0] or name
    return first if len(first) <= limit else first[-limit:].lstrip("/_")
