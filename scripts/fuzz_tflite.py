"""Fuzz ``tflite2qonnx.convert`` with mutated copies of the corpus TFLite models.

Each case is one corpus model with one to four seeded mutations:

- byte level: bit flips, byte runs overwritten with random bytes / 0xFF / 0x00, truncation,
  inserted or deleted byte ranges, aligned int32 words set to boundary values;
- structure aware: the fields the reader actually dereferences (root and table uoffsets, table
  soffsets, vtable entries, vector and string lengths, scalar fields such as buffer / opcode
  indices, elements of shape and index vectors, small constant buffers) set to boundary values,
  and operator swaps (an OperatorCode turned into another convertible operator, so converters
  meet operands and options made for a different one). The fields are found by reading the
  unmutated model once with ``flatbuffers.table.Table`` instrumented, so no schema is restated
  here.

Every case runs in a persistent worker subprocess (``--jobs`` of them) with ``RLIMIT_AS``
(``--mem-gb``) set in the child; the parent gives each case ``--timeout`` seconds and replaces
a worker that hangs, dies or runs out of memory. Outcomes:

- converted: a QONNX model came out (and serializes);
- rejected:  ConversionError / InputError (what the CLI reports in one line, exit 1 or 2);
- crash:     any other exception (the CLI's "internal error"), or the worker died;
- hang:      no answer within the timeout;
- blowup:    MemoryError, or the worker was killed for memory.

A case is identified by ``--seed`` and its index; ``--case I`` reruns one in-process with its
traceback (``--dump FILE`` writes its bytes). The corpus files are only read. Exit status 1 if
any case crashed, hung or blew up.

Run: ``.venv/bin/python scripts/fuzz_tflite.py [--cases 10000] [--seed 0] [--jobs 2]``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import random
import re
import resource
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CORPUS = ROOT.parent / "shared" / "corpus" / "tflite"
PROBLEMS = ("crash", "hang", "blowup")
STATUSES = ("converted", "rejected", *PROBLEMS)
BOOT_SECONDS = 120.0  # worker start-up (imports) and per-case mutation (first walk of a model)


# ----------------------------------------------------------------------------- the walk


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


def _convertible_ops() -> list[int]:
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


# ----------------------------------------------------------------------------- mutations

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
    code = rng.choice(_convertible_ops())
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


# ----------------------------------------------------------------------------- one case


def run_case(data: bytes, fault: str | None = None) -> dict:
    """Convert ``data`` the way the CLI does (convert, serialize); classify the outcome.

    ``fault`` replaces the conversion by a failure of that kind (see FAULT_ENV).
    """
    from qonnx_ingest.errors import ConversionError
    from tflite2qonnx import convert

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if fault is not None:
                _inject(fault)
            convert(data).SerializeToString()
    except ConversionError as exc:
        return {"status": "rejected", "error": type(exc).__name__, "message": str(exc)[:300]}
    except MemoryError as exc:
        return {"status": "blowup", "error": "MemoryError", "message": str(exc)[:300]}
    except Exception as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        tail = [f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in frames[-4:]]
        return {
            "status": "crash",
            "error": type(exc).__name__,
            "message": " ".join(str(exc).split())[:300],
            "where": tail,
        }
    return {"status": "converted"}


# The harness's own test: FUZZ_TFLITE_FAULTS="hang:3,memory:5,segv:7,raise:9,stderr:11" makes
# those cases hang, run out of memory, die of a signal, raise a non-conversion error, or write
# to file descriptor 2 before converting.
FAULT_ENV = "FUZZ_TFLITE_FAULTS"


def _faults() -> dict[int, str]:
    spec = os.environ.get(FAULT_ENV, "")
    pairs = (item.split(":") for item in spec.split(",") if item)
    return {int(index): kind for kind, index in pairs}


def _inject(fault: str) -> None:
    if fault == "hang":
        time.sleep(3600)
    elif fault == "memory":  # as much as the whole limit: only a MemoryError if there is one
        limit, _ = resource.getrlimit(resource.RLIMIT_AS)
        if limit == resource.RLIM_INFINITY:
            raise RuntimeError("the worker has no RLIMIT_AS")
        bytearray(limit)
    elif fault == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif fault == "raise":
        raise RuntimeError("injected fault")
    elif fault == "stderr":  # as a C++ library's log line would: past sys.stderr
        os.write(2, b"injected line on fd 2\n")


# ----------------------------------------------------------------------------- workers


def _limit_memory(mem_bytes: int, core_dumps: bool = False) -> None:
    """RLIMIT_AS for the calling process (a worker: in preexec_fn); no core files."""
    if mem_bytes > 0:
        resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
    if not core_dumps:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def worker_main(seed: int, corpus: Corpus) -> int:
    """Loop: read a case index from stdin, answer ``start`` then one JSON line on stdout."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # whatever the converter prints must not garble the answers
    import tflite2qonnx.api  # noqa: F401  (imports before "ready", so they are not timed)

    faults = _faults()
    out.write("ready\n")
    for line in sys.stdin:
        index = int(line)
        case = corpus.case(seed, index)
        about = {"index": index, "model": case.model, "mutation": case.description}
        out.write("start " + json.dumps(about) + "\n")
        start, said = time.perf_counter(), os.fstat(2).st_size
        result = run_case(case.data, faults.get(index))
        result["seconds"] = round(time.perf_counter() - start, 3)
        if os.fstat(2).st_size > said:  # C++ libraries write to fd 2 past Python
            result["stderr"] = _tail_of_fd2(said)
        result.update(about)
        out.write(json.dumps(result) + "\n")
        if result["status"] == "blowup":
            return 0  # the parent starts a fresh worker
    return 0


def _tail_of_fd2(since: int) -> str:
    """What the case wrote to this worker's stderr (a file the parent gave it)."""
    text = os.pread(2, os.fstat(2).st_size - since, since)
    lines = text.decode(errors="replace").strip().splitlines()
    return " | ".join(lines[-2:])[-300:]


class _Worker:
    def __init__(self, cmd: list[str], mem_bytes: int):
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115  (closed by stop())
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            cwd=ROOT,
            env=env,
            preexec_fn=lambda: _limit_memory(mem_bytes),
        )
        self.fd = self.proc.stdout.fileno()
        self.buffer = b""
        self.case: int | None = None
        self.phase = "boot"  # boot -> idle -> generating -> running -> idle ...
        self.deadline = time.monotonic() + BOOT_SECONDS
        self.about: dict = {}
        self.tail = ""

    def lines(self) -> list[str] | None:
        """Complete lines now readable; None at end of file (the worker died)."""
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            return None
        self.buffer += chunk
        *complete, self.buffer = self.buffer.split(b"\n")
        return [c.decode() for c in complete]

    def send(self, index: int, timeout: float) -> bool:
        self.case, self.phase = index, "generating"
        self.deadline = time.monotonic() + BOOT_SECONDS
        try:
            self.proc.stdin.write(f"{index}\n".encode())
            self.proc.stdin.flush()
        except OSError:
            return False
        return True

    def stderr_tail(self) -> str:
        self.stderr.seek(0)
        text = self.stderr.read().decode(errors="replace").strip().splitlines()
        return " | ".join(text[-3:])[-400:]

    def stop(self, kill: bool) -> int:
        if kill and self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        code = self.proc.wait()
        self.proc.stdout.close()
        self.tail = self.stderr_tail()  # what it said before it went, for the report
        self.stderr.close()
        return code


@dataclass
class Report:
    seed: int
    cases: int
    seconds: float = 0.0
    results: list[dict] = field(default_factory=list)
    restarts: int = 0

    def counts(self) -> dict[str, int]:
        c = collections.Counter(r["status"] for r in self.results)
        return {s: c.get(s, 0) for s in STATUSES}

    def problems(self) -> list[dict]:
        return sorted(
            (r for r in self.results if r["status"] in PROBLEMS), key=lambda r: r["index"]
        )


def fuzz(
    cases: int = 10000,
    seed: int = 0,
    jobs: int = 2,
    timeout: float = 10.0,
    mem_gb: float = 2.0,
    corpus_paths: Iterable[Path] | None = None,
    start: int = 0,
    progress: Callable[[Report], None] | None = None,
) -> Report:
    """Run cases ``start .. start + cases - 1`` of ``seed`` on ``jobs`` worker processes."""
    paths = sorted(corpus_paths) if corpus_paths is not None else sorted(CORPUS.glob("*.tflite"))
    Corpus(paths)  # fail early on an empty corpus
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--seed", str(seed)]
    cmd += ["--corpus", *map(str, paths)]
    mem_bytes = int(mem_gb * (1 << 30))
    report = Report(seed=seed, cases=cases)
    todo = collections.deque(range(start, start + cases))
    t0 = time.perf_counter()
    workers = [_Worker(cmd, mem_bytes) for _ in range(max(1, min(jobs, cases)))]

    def finish(w: _Worker, result: dict) -> None:
        report.results.append(result)
        w.case, w.phase = None, "idle"
        if progress is not None:
            progress(report)

    def replace(w: _Worker, kill: bool) -> _Worker:
        w.stop(kill)
        report.restarts += 1
        return _Worker(cmd, mem_bytes)

    def died(w: _Worker, code: int) -> dict:
        tail = w.tail
        memory = code == -9 or re.search(r"MemoryError|bad_alloc|out of memory", tail)
        return {
            "status": "blowup" if memory else "crash",
            "error": f"worker died ({_exit_name(code)})",
            "message": tail,
        }

    try:
        while todo or any(w.case is not None for w in workers):
            for k, w in enumerate(workers):
                if w.phase == "idle" and todo and not w.send(todo.popleft(), timeout):
                    todo.appendleft(w.case)
                    workers[k] = replace(w, kill=True)
            busy = {w.fd: w for w in workers if w.phase != "idle"}
            if not busy:
                break
            wait = max(0.0, min(w.deadline for w in busy.values()) - time.monotonic())
            ready, _, _ = select.select(list(busy), [], [], wait)
            now = time.monotonic()
            for k, w in enumerate(workers):
                if w.fd in ready:
                    lines = w.lines()
                    if lines is None:  # the worker died
                        index, phase = w.case, w.phase
                        code = w.stop(kill=True)
                        if index is not None and phase == "running":
                            result = {**w.about, **died(w, code)}
                            report.results.append(result)
                            if progress is not None:
                                progress(report)
                        elif index is not None:  # died before the case began: retry it
                            raise RuntimeError(
                                f"fuzz worker died ({_exit_name(code)}) while {phase} case "
                                f"{index}: {w.tail}"
                            )
                        report.restarts += 1
                        workers[k] = _Worker(cmd, mem_bytes)
                        continue
                    for line in lines:
                        if line == "ready":
                            w.phase = "idle"
                        elif line.startswith("start "):
                            w.phase, w.about = "running", json.loads(line[6:])
                            w.deadline = time.monotonic() + timeout
                        else:
                            result = json.loads(line)
                            finish(w, result)
                            if result["status"] == "blowup":
                                workers[k] = replace(w, kill=True)
                                break
                elif w.phase != "idle" and now >= w.deadline:
                    if w.phase != "running":
                        raise RuntimeError(f"fuzz worker stuck while {w.phase} (case {w.case})")
                    result = {
                        **w.about,
                        "status": "hang",
                        "error": "timeout",
                        "message": f"no answer after {timeout:g} s",
                    }
                    workers[k] = replace(w, kill=True)
                    report.results.append(result)
                    if progress is not None:
                        progress(report)
    finally:
        for w in workers:
            w.stop(kill=True)
    report.seconds = time.perf_counter() - t0
    report.results.sort(key=lambda r: r["index"])
    return report


def _exit_name(code: int) -> str:
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit {code}"


# ----------------------------------------------------------------------------- report


def _pattern(message: str) -> str:
    """A rejection message with the numbers and names taken out, to group similar ones."""
    text = re.sub(r"'[^']*'", "'…'", message)
    text = re.sub(r"-?\d+(\.\d+)?", "N", text)
    return text.split(": ", 1)[-1] if text.startswith("<bytes>") else text


def print_report(report: Report, top: int = 15, out=sys.stdout) -> None:
    counts = report.counts()
    n = len(report.results)
    print(
        f"fuzz_tflite: seed {report.seed}, {n} cases in {report.seconds:.1f} s "
        f"({n / max(report.seconds, 1e-9):.1f} cases/s, {report.restarts} worker restarts)",
        file=out,
    )
    print("  " + ", ".join(f"{s} {counts[s]}" for s in STATUSES), file=out)
    by_model: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in report.results:
        by_model[r["model"]][r["status"]] += 1
    print("  per model:", file=out)
    for model in sorted(by_model):
        c = by_model[model]
        print(f"    {model:50s} " + " ".join(f"{s}={c[s]}" for s in STATUSES if c[s]), file=out)
    rejections = collections.Counter(
        _pattern(r["message"]) for r in report.results if r["status"] == "rejected"
    )
    if rejections and top:
        print(f"  most frequent rejections (of {len(rejections)} kinds):", file=out)
        for text, k in rejections.most_common(top):
            print(f"    {k:6d}  {text[:150]}", file=out)
    noisy = [r for r in report.results if r.get("stderr")]
    if noisy:  # C++ logging (onnxruntime): the CLIs silence it, API callers see it
        print(f"  {len(noisy)} cases wrote to stderr past Python (not a problem), e.g.:", file=out)
        for r in noisy[:5]:
            print(f"    case {r['index']} ({r['status']}): {r['stderr'][:150]}", file=out)
    slow = sorted(report.results, key=lambda r: -r.get("seconds", 0))[:3]
    if slow and "seconds" in slow[0]:
        print(
            "  slowest: "
            + ", ".join(f"case {r['index']} {r.get('seconds', 0):.2f} s" for r in slow),
            file=out,
        )
    problems = report.problems()
    if problems:
        print(f"  {len(problems)} problems:", file=out)
    for r in problems:
        print(
            f"  {r['status'].upper()} case {r['index']} [{r['model']}: {r['mutation']}]: "
            f"{r['error']}: {r['message']}",
            file=out,
        )
        if r.get("where"):
            print(f"      at {' <- '.join(reversed(r['where']))}", file=out)
        print(
            f"      rerun: .venv/bin/python scripts/fuzz_tflite.py --seed {report.seed} "
            f"--case {r['index']}",
            file=out,
        )


# ----------------------------------------------------------------------------- main


def _time_out(signum, frame):
    raise TimeoutError("the case ran past --timeout (the traceback shows where)")


def rerun(
    corpus: Corpus, seed: int, index: int, dump: Path | None, mem_gb: float, timeout: float
) -> int:
    """One case in this process, with the full traceback of anything but a clean rejection
    (a hang becomes a TimeoutError raised where the conversion was)."""
    _limit_memory(int(mem_gb * (1 << 30)), core_dumps=True)
    case = corpus.case(seed, index)
    print(f"case {index} (seed {seed}): {case.model}: {case.description}")
    if dump is not None:
        dump.write_bytes(case.data)
        print(f"wrote {len(case.data)} bytes to {dump}")
    from qonnx_ingest.errors import ConversionError
    from tflite2qonnx import convert

    start = time.perf_counter()
    previous = signal.signal(signal.SIGALRM, _time_out)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        convert(case.data).SerializeToString()
    except ConversionError as exc:
        print(f"rejected ({type(exc).__name__}, exit code {exc.exit_code}): {exc}")
        return 0
    except Exception:
        traceback.print_exc()
        return 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        print(f"{time.perf_counter() - start:.2f} s")
    print("converted")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10000, help="number of cases (10000)")
    parser.add_argument("--start", type=int, default=0, help="first case index (0)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the mutations (0)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (2)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per case (10)")
    parser.add_argument("--mem-gb", type=float, default=2.0, help="RLIMIT_AS per worker (2)")
    parser.add_argument("--case", type=int, help="rerun this case in-process, with traceback")
    parser.add_argument("--dump", type=Path, help="with --case: write the mutated bytes here")
    parser.add_argument("--top", type=int, default=15, help="rejection kinds to list (15)")
    parser.add_argument(
        "--corpus", nargs="+", type=Path, help=f"models to mutate (default: {CORPUS}/*.tflite)"
    )
    parser.add_argument("--json", type=Path, help="also write every case's result here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    paths = args.corpus or sorted(CORPUS.glob("*.tflite"))
    if args.worker:
        return worker_main(args.seed, Corpus(paths))
    if args.case is not None:
        return rerun(Corpus(paths), args.seed, args.case, args.dump, args.mem_gb, args.timeout)

    last = [0.0]

    def progress(report: Report) -> None:
        now = time.perf_counter()
        if now - last[0] > 30:
            last[0] = now
            c = report.counts()
            done = ", ".join(f"{s} {c[s]}" for s in STATUSES)
            print(f"  ... {len(report.results)}/{report.cases}: {done}", file=sys.stderr)

    report = fuzz(
        cases=args.cases,
        seed=args.seed,
        jobs=args.jobs,
        timeout=args.timeout,
        mem_gb=args.mem_gb,
        corpus_paths=paths,
        start=args.start,
        progress=progress,
    )
    print_report(report, top=args.top)
    if args.json is not None:
        args.json.write_text(json.dumps(report.results, indent=0) + "\n")
    return 1 if report.problems() else 0


if __name__ == "__main__":
    sys.exit(main())
