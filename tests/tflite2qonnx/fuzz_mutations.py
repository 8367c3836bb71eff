"""The fuzzer's mutations (byte level and structure aware, on the fields of fuzz_walk) and its
seeded cases: ``Corpus.case(seed, index)`` is one corpus model with one to four mutations."""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from fuzz_walk import Field, Fields, convertible_ops, walk

_FLOATS = (
    float("nan"),
    float("inf"),
    float("-inf"),
    0.0,
    -0.0,
    -1.0,
    1e-45,
    1e-38,
    3.4e38,
    65504.0,
    1e-7,
)


def _boundary(rng: random.Random, old: int, bits: int, file_len: int) -> int:
    """A value that tends to break readers: limits, off-by-one, file length, random."""
    top = 1 << bits
    candidates = [
        0,
        1,
        2,
        4,
        -1,
        -2,
        top // 2 - 1,
        top // 2,
        old + 1,
        old - 1,
        old + 4,
        old - 4,
        old * 2,
        old ^ (1 << rng.randrange(bits)),
        rng.getrandbits(bits),
        rng.randrange(256),
    ]
    if bits >= 16:
        candidates += [top - 1, 1 << 15]
    if bits >= 32:
        candidates += [file_len, file_len - old, file_len - 4, file_len + 4, 1 << 16, 1 << 24]
    return rng.choice(candidates) % top


_FLOAT_MAX = {"e": 65504.0, "f": 3.4028234663852886e38, "d": float("inf")}


def _set_value(rng: random.Random, data: bytearray, pos: int, fmt: str) -> str:
    """Overwrite the value of format ``fmt`` at ``pos``; describe the change."""
    fmt = "<" + fmt
    (old,) = struct.unpack_from(fmt, data, pos)
    if fmt[-1] in _FLOAT_MAX:
        new = rng.choice(_FLOATS + (old * 1e6, -old))
        if abs(new) > _FLOAT_MAX[fmt[-1]]:  # what the format holds: infinity
            new = float("inf") if new > 0 else float("-inf")
        struct.pack_into(fmt, data, pos, new)
        return f"{old!r}->{new!r}"
    size = struct.calcsize(fmt)
    unsigned = "<" + {1: "B", 2: "H", 4: "I", 8: "Q"}[size]
    new = _boundary(rng, int(old), 8 * size, len(data))
    struct.pack_into(unsigned, data, pos, new)
    (shown,) = struct.unpack_from(fmt, data, pos)
    return f"{old}->{shown}"


# How often each kind of field is picked; a kind is picked first so that a model with 70 000
# per-channel scales still gets its offsets and lengths mutated.
KIND_WEIGHTS = {
    "uoffset": 3,
    "vector_len": 3,
    "scalar": 3,
    "element": 3,
    "voffset": 2,
    "soffset": 1,
    "vtable_len": 1,
    "string_len": 1,
    "blob": 1,
}


def _pick(rng: random.Random, fields: Fields) -> Field:
    kinds = sorted(fields.by_kind)
    (kind,) = rng.choices(kinds, [KIND_WEIGHTS.get(k, 1) for k in kinds])
    return rng.choice(fields.by_kind[kind])


def _mutate_field(rng: random.Random, data: bytearray, fields: Fields) -> str:
    f = _pick(rng, fields)
    if f.pos + f.size > len(data):  # an earlier mutation shortened the file
        return _bit_flip(rng, data, fields)
    if f.kind == "blob":  # a small byte vector: one of its bytes or aligned words
        if f.size >= 4 and rng.random() < 0.7:
            pos = f.pos + 4 * rng.randrange(f.size // 4)
            return f"blob word @{pos:#x} " + _set_value(rng, data, pos, "i")
        pos = f.pos + rng.randrange(f.size)
        return f"blob byte @{pos:#x} " + _set_value(rng, data, pos, "B")
    return f"{f.kind} @{f.pos:#x} " + _set_value(rng, data, f.pos, f.fmt or "B")


def _position(rng: random.Random, data: bytearray, fields: Fields) -> int:
    """Half the time at or next to a field (most of a big model is weight bytes)."""
    if fields and rng.random() < 0.5:
        f = _pick(rng, fields)
        return min(max(0, f.pos + rng.randrange(-2, f.size + 2)), len(data) - 1)
    return rng.randrange(len(data))


def _bit_flip(rng: random.Random, data: bytearray, fields: Fields) -> str:
    flips = []
    for _ in range(rng.randint(1, 8)):
        pos = _position(rng, data, fields)
        bit = rng.randrange(8)
        data[pos] ^= 1 << bit
        flips.append(f"{pos:#x}.{bit}")
    return "bitflip " + ",".join(flips)


def _byte_run(rng: random.Random, data: bytearray, fields: Fields) -> str:
    pos = _position(rng, data, fields)
    length = min(rng.choice((1, 2, 4, 8, rng.randint(1, 64), rng.randint(64, 1024))), len(data))
    pos = min(pos, len(data) - length)
    fill = rng.choice(("random", "ff", "00"))
    if fill == "random":
        run = bytes(rng.getrandbits(8) for _ in range(length))
    else:
        run = bytes.fromhex(fill) * length
    data[pos : pos + length] = run
    return f"run {fill} @{pos:#x}+{length}"


def _aligned_word(rng: random.Random, data: bytearray, fields: Fields) -> str:
    if len(data) < 4:
        return _bit_flip(rng, data, fields)
    pos = _position(rng, data, fields) & ~3
    if pos + 4 > len(data):
        pos = (len(data) - 4) & ~3
    return f"word @{pos:#x} " + _set_value(rng, data, pos, "i")


def _truncate(rng: random.Random, data: bytearray, fields: Fields) -> str:
    n = len(data)
    cut = rng.choice((rng.randrange(n), rng.randrange(1, 64), n // 3, 2 * n // 3, n - 1, 8))
    if fields and rng.random() < 0.5:  # cut right through a structure
        cut = _pick(rng, fields).pos + rng.randrange(4)
    cut = max(0, min(cut, n - 1))
    del data[cut:]
    return f"truncate to {cut}"


def _shift(rng: random.Random, data: bytearray, fields: Fields) -> str:
    """Insert or delete a few bytes: every offset across the gap is now wrong."""
    pos = _position(rng, data, fields)
    length = rng.choice((1, 2, 4, 8, rng.randint(1, 32)))
    if rng.random() < 0.5:
        data[pos:pos] = bytes(rng.getrandbits(8) for _ in range(length))
        return f"insert {length} @{pos:#x}"
    del data[pos : pos + length]
    return f"delete {length} @{pos:#x}"


def _swap_operator(rng: random.Random, data: bytearray, fields: Fields) -> str:
    """Every operator of one OperatorCode becomes another convertible kind: converters meet
    operands, options and shapes made for a different operator."""
    usable = [
        (k, f)
        for k, f in enumerate(fields.opcodes)
        if all(p is None or p < len(data) - 3 for p in f)
    ]
    if not usable:
        return _bit_flip(rng, data, fields)
    k, (deprecated, current) = rng.choice(usable)
    code = rng.choice(convertible_ops())
    if deprecated is not None:
        data[deprecated] = min(code, 127)  # the schema's rule: read the larger of the two
    if current is not None:
        struct.pack_into("<i", data, current, code)
    return f"opcode {k} -> {code}"


# (weight, mutator); structure-aware mutations make up more than half
MUTATORS: tuple[tuple[float, Callable[[random.Random, bytearray, Fields], str]], ...] = (
    (50, _mutate_field),
    (6, _swap_operator),
    (12, _bit_flip),
    (10, _byte_run),
    (12, _aligned_word),
    (8, _truncate),
    (8, _shift),
)


@dataclass
class Case:
    index: int
    model: str
    data: bytes
    description: str


class Corpus:
    """The corpus models and, computed on first use, the fields of each."""

    def __init__(self, paths: Iterable[Path]):
        self.paths = sorted(Path(p) for p in paths)
        if not self.paths:
            raise SystemExit("fuzz_tflite: no .tflite models to mutate")
        self._data: dict[Path, bytes] = {}
        self._fields: dict[Path, Fields] = {}

    def data(self, path: Path) -> bytes:
        if path not in self._data:
            self._data[path] = path.read_bytes()
        return self._data[path]

    def fields(self, path: Path) -> Fields:
        if path not in self._fields:
            self._fields[path] = walk(self.data(path))
        return self._fields[path]

    def case(self, seed: int, index: int) -> Case:
        """Case ``index`` of ``seed``: the same bytes in every process, every time."""
        rng = random.Random(f"fuzz_tflite/{seed}/{index}")
        path = rng.choice(self.paths)
        data = bytearray(self.data(path))
        fields = self.fields(path)
        weights = [w for w, _ in MUTATORS]
        steps = []
        for _ in range(1 if rng.random() < 0.6 else rng.randint(2, 4)):
            if len(data) < 2:
                break
            (mutate,) = rng.choices([m for _, m in MUTATORS], weights)
            if mutate is _mutate_field and not fields:
                mutate = _bit_flip
            steps.append(mutate(rng, data, fields))
        return Case(index, path.name, bytes(data), "; ".join(steps))
