"""Axis orders: how a stored tensor's axes relate to the source (channels-last) axes.

An order ``o`` says stored axis ``i`` holds source axis ``o[i]``, so ``stored =
source.transpose(o)``. ``None`` is the source order itself, for any rank (ranks are not always
known); every other order is a tuple that is not the identity.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

Order = tuple[int, ...]
PERMUTABLE_RANKS = (3, 4, 5)
SOURCE_NAMES = {3: "NWC", 4: "NHWC", 5: "NDHWC"}
STORED_NAMES = {3: "NCW", 4: "NCHW", 5: "NCDHW"}


@cache
def channels_first(rank: int) -> Order:
    """The channels-first order of a channels-last tensor: (0, r-1, 1, ..., r-2)."""
    return (0, rank - 1, *range(1, rank - 1))


def norm(order: Sequence[int] | None) -> Order | None:
    """``None`` for the identity, else the order as a tuple."""
    if order is None:
        return None
    order = tuple(order)
    return None if order == tuple(range(len(order))) else order


def full(order: Order | None, rank: int) -> Order:
    return tuple(range(rank)) if order is None else order


def transpose_perm(src: Order | None, dst: Order | None, rank: int) -> list[int]:
    """The ONNX Transpose ``perm`` that turns a tensor stored in ``src`` into ``dst``."""
    a, b = full(src, rank), full(dst, rank)
    return [a.index(axis) for axis in b]


def letters(order: Order | None, rank: int) -> str:
    """'NCHW' for channels_first(4), 'NHWC' for None; other orders spell their letters."""
    source = SOURCE_NAMES.get(rank, "".join(f"d{k}" for k in range(rank)))
    return "".join(source[i] for i in full(order, rank)) if rank in SOURCE_NAMES else source


def tag(order: Order | None, rank: int | None) -> str:
    """A short suffix naming a tensor version: 'nhwc', 'nchw', 'perm0213', 'src'."""
    if rank is None or rank not in SOURCE_NAMES:
        return "src" if order is None else "perm" + "".join(map(str, order))
    if order is None or order == channels_first(rank):
        return letters(order, rank).lower()
    return "perm" + "".join(map(str, order))
