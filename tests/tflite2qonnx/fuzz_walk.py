"""The fuzzer's walk: the fields of a TFLite flatbuffer the reader dereferences (offsets,
lengths, scalars, shape and index vectors, small constant buffers), found by reading the
unmutated model once with ``flatbuffers.table.Table`` instrumented, so no schema is restated."""

from __future__ import annotations

import collections
import struct
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Field:
    """A value the reader dereferences: ``size`` bytes at ``pos``, struct format ``fmt``."""

    pos: int
    size: int
    kind: str  # uoffset soffset vtable_len voffset vector_len string_len scalar element blob
    fmt: str  # struct format character ("" for a blob of bytes)


class Fields(list):
    """The fields of one model in file order, grouped by kind, and where each OperatorCode
    keeps its operator: (deprecated_builtin_code byte, builtin_code int32), None if absent."""

    def __init__(self, fields: Iterable[Field] = (), opcodes=()):
        super().__init__(fields)
        self.by_kind: dict[str, list[Field]] = collections.defaultdict(list)
        for f in self:
            self.by_kind[f.kind].append(f)
        self.opcodes: list[tuple[int | None, int | None]] = list(opcodes)


def _opcode_fields(data: bytes) -> list[tuple[int | None, int | None]]:
    import tflite

    model = tflite.Model.GetRootAsModel(data, 0)
    out = []
    for i in range(model.OperatorCodesLength()):
        tab = model.OperatorCodes(i)._tab
        deprecated, current = tab.Offset(4), tab.Offset(10)  # vtable slots 0 and 3
        out.append(
            (tab.Pos + deprecated if deprecated else None, tab.Pos + current if current else None)
        )
    return out


def convertible_ops() -> list[int]:
    """BuiltinOperator codes that have a converter, to swap operators for one another."""
    import tflite

    from tflite2qonnx.ops import CONVERTERS

    codes = vars(tflite.BuiltinOperator)
    return sorted(codes[name] for name in CONVERTERS if isinstance(codes.get(name), int))


def _struct_fmt(np_dtype) -> str:
    kind, size = np_dtype.kind, np_dtype.itemsize
    table = {
        "f": {2: "e", 4: "f", 8: "d"},
        "i": {1: "b", 2: "h", 4: "i", 8: "q"},
        "u": {1: "B", 2: "H", 4: "I", 8: "Q"},
        "b": {1: "B"},
    }
    return table.get(kind, {}).get(size, "B" * size if size == 1 else "")


def walk(data: bytes) -> Fields:
    """Every field the reader touches while reading ``data``, in file order.

    ``flatbuffers.table.Table`` is instrumented for the duration of one ``read_model``: each
    accessor records the positions it reads, then does its normal work.
    """
    import flatbuffers.table as fb_table
    from flatbuffers import number_types as N

    from tflite2qonnx.reader import read_model

    found: dict[int, Field] = {}
    depth = [0]
    table_cls = fb_table.Table

    def word(pos: int, fmt: str = "<I") -> int | None:
        size = struct.calcsize(fmt)
        if pos >= 0 and pos + size <= len(data):
            return struct.unpack_from(fmt, data, pos)[0]
        return None

    def add(pos: int | None, size: int, kind: str, fmt: str) -> None:
        if pos is not None and pos >= 0 and pos + size <= len(data) and pos not in found:
            found[pos] = Field(pos, size, kind, fmt)

    def uoffset_at(pos: int, target_kind: str | None = None) -> None:
        add(pos, 4, "uoffset", "I")
        rel = word(pos)
        if target_kind is not None and rel is not None:
            add(pos + rel, 4, target_kind, "I")

    def on_offset(self, vtable_offset):
        add(self.Pos, 4, "soffset", "i")
        soff = word(self.Pos, "<i")
        if soff is None:
            return
        vtable = self.Pos - soff
        add(vtable, 2, "vtable_len", "H")
        end = word(vtable, "<H")
        if end is not None and vtable_offset < end:
            add(vtable + vtable_offset, 2, "voffset", "H")

    def on_vector_as_numpy(self, flags, off):
        if depth[0] != 1:  # only the call made by generated code
            return
        rel = word(self.Pos + off)
        if rel is None:
            return
        length = word(self.Pos + off + rel)
        start = self.Pos + off + rel + 4
        dtype = N.to_numpy_type(flags)
        if length is None:
            return
        if dtype.itemsize == 1:
            if 0 < length <= 256:
                add(start, length, "blob", "")
        elif length <= 4096:
            fmt = _struct_fmt(dtype)
            for k in range(length):
                add(start + k * dtype.itemsize, dtype.itemsize, "element", fmt)

    def on_get(self, flags, off):
        if depth[0] == 1:  # a scalar field read by generated code, not inside another accessor
            add(off, flags.bytewidth, "scalar", flags.packer_type.format.lstrip("<"))

    recorders: dict[str, Callable] = {
        "Offset": on_offset,
        "Indirect": lambda self, off: uoffset_at(off),
        "String": lambda self, off: uoffset_at(off, "string_len"),
        "VectorLen": lambda self, off: uoffset_at(self.Pos + off, "vector_len"),
        "Vector": lambda self, off: uoffset_at(self.Pos + off),
        "Union": lambda self, t2, off: uoffset_at(self.Pos + off),
        "Get": on_get,
        "GetVectorAsNumpy": on_vector_as_numpy,
    }
    originals = {name: getattr(table_cls, name) for name in recorders}

    def instrument(name: str) -> Callable:
        original, record = originals[name], recorders[name]

        def wrapper(self, *args):
            depth[0] += 1
            try:
                record(self, *args)
                return original(self, *args)
            finally:
                depth[0] -= 1

        return wrapper

    add(0, 4, "uoffset", "I")  # the root table offset
    try:
        for name in recorders:
            setattr(table_cls, name, instrument(name))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            read_model(data)
    finally:
        for name, original in originals.items():
            setattr(table_cls, name, original)
    return Fields((found[pos] for pos in sorted(found)), _opcode_fields(data))
