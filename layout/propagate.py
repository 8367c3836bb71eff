"""Deciding which tensors are stored channels-first: a work-list over the linked tensors.

Implicit-op ports and explicit layouts are the seeds; a seed's layout spreads through every
node that links tensors (transparent and attribute ops), both upstream and downstream, and
stops at terminate ops. Each tensor and each node is visited once, so the cost is linear in
nodes + edges. Two seeds that reach one tensor with different layouts are an error naming
the tensor and both seeds: a silently transposed result would be worse.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

from layout.op_table import Kind, NodeRule
from qonnx_ingest.errors import ConversionError

Seed = tuple[str, bool, str]  # tensor, channels-first?, who asks for it


def implicit_seeds(nodes: Sequence, rules: Sequence[NodeRule]) -> list[Seed]:
    seeds = []
    for node, rule in zip(nodes, rules, strict=True):
        if rule.kind is Kind.IMPLICIT:
            who = f"{node.op_type} '{node.name or node.output[0]}'"
            seeds.extend((t, True, who) for t in rule.links)
    return seeds


def assign(rules: Sequence[NodeRule], seeds: Iterable[Seed]) -> dict[str, bool]:
    """tensor -> stored channels-first? for every tensor a seed reaches."""
    linked: dict[str, list[int]] = {}
    for k, rule in enumerate(rules):
        if rule.kind is not Kind.IMPLICIT:
            for t in rule.links:
                linked.setdefault(t, []).append(k)
    layout: dict[str, bool] = {}
    origin: dict[str, str] = {}
    queue: deque[str] = deque()
    for t, value, who in seeds:
        _set(layout, origin, queue, t, value, who)
    done = [False] * len(rules)
    while queue:
        t = queue.popleft()
        for k in linked.get(t, ()):
            if done[k]:
                continue
            done[k] = True
            for u in rules[k].links:
                _set(layout, origin, queue, u, layout[t], origin[t])
    return layout


def _set(layout: dict, origin: dict, queue: deque, t: str, value: bool, who: str) -> None:
    old = layout.get(t)
    if old is None:
        layout[t] = value
        origin[t] = who
        queue.append(t)
    elif old != value:
        a, b = (origin[t], who) if old else (who, origin[t])
        raise ConversionError(
            f"layout conflict: {a} needs this tensor channels-first, but {b} needs it in "
            "source order (propagation links them through layout-transparent ops)",
            t,
        )
