"""Unique tensor and node names, shared by every pass that invents names."""

from __future__ import annotations


def unique_name(hint: str, taken: set[str]) -> str:
    """``hint``, or ``hint_1``, ``hint_2``, ... whichever is free first; it is then taken."""
    name, k = hint, 1
    while name in taken:
        name, k = f"{hint}_{k}", k + 1
    taken.add(name)
    return name
