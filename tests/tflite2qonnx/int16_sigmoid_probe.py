"""Measure TFLite's int16 sigmoid table from the interpreter (scripts/probe_int16_sigmoid_table.py
writes the converter's copy from it; test_int16_sigmoid.py checks that copy against it).

TFLite's int16 LOGISTIC and TANH reference kernels interpolate a fixed 256-entry table
``T`` (sigmoid(i / 24) in 0.16) that no formula reproduces; the converter reads it from the
generated ``tflite2qonnx/ops/exact/int16_sigmoid_table.py``. This module obtains it by running
single-op int16 models (built by hand with tests/tflite2qonnx/tflite_writer.py, every int16
input at once) on ai-edge-litert's builtin reference kernels (``BUILTIN_REF``):

* TANH at an input scale (just above 1/6144) whose Prepare picks multiplier 16384 with a right
  shift of 13, so the kernel's input is ``v = 2q``: ``a = |v| = 256 h + t`` lands exactly on
  table point ``i`` (``t = 0``) at ``q = 128 i``, where the kernel returns ``T[i] - 2^15``
  (``(256 T[i] - 2^23 + 2^7) >> 8``). So ``T[i] = y(128 i) + 32768`` for i <= 254, and
  ``y(-128 i) = 32768 - T[i]`` must agree. Point 255 is only an interpolation end: at
  ``q = 128 * 254 + 127`` (t = 254) the kernel returns ``T[254] + d - 2^15`` for
  ``d = T[255] - T[254]`` in (-64, 64), so ``T[255] = y + 32768`` when ``y + 32768 - T[254]``
  lies there (checked).
* LOGISTIC, independently, at an input scale just above 1/3072 (``v = 4q``, zero weight at
  ``q = 128 i``) and one just above 1/12288 (``v = q``, every weight for points 0..64):
  at a table point the kernel returns ``(512 T[i] + 512) >> 10 = ceil(T[i] / 2)``, so each
  ``T[i]`` (i <= 254) is one of ``2k - 1, 2k``; between points every output constrains the
  pair ``(T[h], T[h + 1])``. Every pair consistent with every output of its segment is kept,
  and a table entry is determined by LOGISTIC where one value lies on all chains of
  consistent pairs. Where the interpolation never carries an entry's last bit across a
  rounding boundary (the flat tail, where neighbours are equal) LOGISTIC cannot see it.
* Consistency: the TANH table must lie on those chains (every LOGISTIC output agrees with it)
  and equal LOGISTIC's determined entries; then both kernels, emulated in numpy with the
  table, must equal the interpreter on every int16 input at power-of-two and general scales.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
ALL_INT16 = np.arange(-(1 << 15), 1 << 15, dtype=np.int64)
OUT_SCALE = 2.0**-15
# extra scales the emulation is checked at: power-of-two ones and general ones
CHECK_SCALES = {
    "LOGISTIC": (2.0**-12, 2.0**-10, 1 / 3000, 0.000123, 0.0021, 1.7),
    "TANH": (2.0**-12, 2.0**-11, 2.0**-9, 1 / 3000, 0.000123, 0.0021, 1.7),
}


def _paths() -> None:
    for p in (ROOT, ROOT / "tests/tflite2qonnx"):
        if str(p) not in sys.path:
            sys.path.insert(0, str(p))


def run_kernel(op: str, scale: float) -> np.ndarray:
    """The interpreter's int16 outputs of ``op`` for every int16 input (ascending)."""
    _paths()
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    from tflite_writer import build_model

    def tensor(name, scale_):
        return {
            "name": name,
            "shape": (ALL_INT16.size,),
            "dtype": "int16",
            "quant": ([scale_], [0]),
        }

    data = build_model(
        [tensor("x", scale), tensor("y", OUT_SCALE)],
        [{"op": op, "inputs": [0], "outputs": [1]}],
        [0],
        [1],
    )
    it = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], ALL_INT16.astype(np.int16))
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"]).astype(np.int64)


def kernel_input(op: str, scale: float) -> np.ndarray:
    """The kernel's rescaled input ``v`` for every int16 input, as its Prepare sets it up."""
    _paths()
    from tflite2qonnx.ops.exact.sigmoid16 import input_rescale

    m, shift = input_rescale(scale, op)
    return (ALL_INT16 * m + ((1 << shift) >> 1)) >> shift


def unit_scale(op: str, factor: int) -> float:
    """A float32 input scale at which the kernel's input is exactly ``factor * q``."""
    _paths()
    from tflite2qonnx.ops.exact.sigmoid16 import input_rescale

    s = np.float32(factor / 12288.0)
    for _ in range(64):
        m, shift = input_rescale(float(s), op)
        if m == factor << shift:
            return float(s)
        s = np.nextafter(s, np.float32(1))
    raise RuntimeError(f"no float32 scale gives {op} an input of exactly {factor} q")


def emulate(op: str, v: np.ndarray, table: np.ndarray) -> np.ndarray:
    """The kernel's output for rescaled inputs ``v`` given a table (numpy, int64)."""
    table = np.asarray(table, np.int64)
    bits = 9 if op == "LOGISTIC" else 8
    a = np.abs(v)
    h, t = a >> bits, a & ((1 << bits) - 1)
    i = np.minimum(h, 254)
    r = (table[i] << bits) + t * (table[i + 1] - table[i])
    if op == "LOGISTIC":
        r = np.where(h >= 255, 0x7FFF << 10, r)
        y = np.where(v >= 0, (r + 512) >> 10, ((1 << 25) - r + 511) >> 10)
    else:
        r = np.where(h >= 255, 0xFFFF << 8, r)
        y = np.where(v >= 0, (r - (1 << 23) + 128) >> 8, ((1 << 23) - r + 127) >> 8)
    return ((y + 32768) & 0xFFFF) - 32768  # stored as int16


def table_from_tanh() -> np.ndarray:
    scale = unit_scale("TANH", 2)
    y = run_kernel("TANH", scale)
    at = lambda q: y[q + 32768]  # noqa: E731
    points = np.arange(255)
    table = np.empty(256, np.int64)
    table[:255] = at(128 * points) + 32768
    if not np.array_equal(at(-128 * points), 32768 - table[:255]):
        raise RuntimeError("TANH: negative table points disagree with the positive ones")
    d = at(128 * 254 + 127) + 32768 - table[254]
    if not -64 < d < 64:
        raise RuntimeError(f"TANH: the last step {d} is outside the readable range")
    table[255] = table[254] + d
    return table


def logistic_candidates() -> list[set[int]]:
    """Per entry, the values that lie on some chain of pairs consistent with every LOGISTIC
    output at the probe scales."""
    obs = []
    for factor in (4, 1):
        scale = unit_scale("LOGISTIC", factor)
        obs.append((kernel_input("LOGISTIC", scale), run_kernel("LOGISTIC", scale)))
    v4, y4 = obs[0]
    k = (y4[128 * np.arange(255) + 32768] + 32768) % 65536 - 32768  # ceil(T / 2), unwrapped
    k = np.where(k < 0, k + 65536, k)
    options = [{2 * int(c) - 1, 2 * int(c)} for c in k]
    options.append(set(range(max(0, 2 * int(k[-1]) - 1100), 65536)))  # entry 255: open
    v = np.concatenate([o[0] for o in obs])
    y = np.concatenate([o[1] for o in obs])
    seg = np.abs(v) >> 9
    pairs = []
    for i in range(255):
        sel = seg == i
        ok = set()
        for ua in options[i]:
            for ub in options[i + 1]:
                table = np.zeros(256, np.int64)
                table[i], table[i + 1] = ua, ub
                if np.array_equal(emulate("LOGISTIC", v[sel], table), y[sel]):
                    ok.add((ua, ub))
        pairs.append(ok)
    # forward and backward feasibility over the chain of pairs
    alive = [set(o) for o in options]
    for _ in range(2):
        for i in range(255):
            good = {(a, c) for a, c in pairs[i] if a in alive[i] and c in alive[i + 1]}
            alive[i] = {a for a, _ in good}
            alive[i + 1] = {c for _, c in good}
        for i in reversed(range(255)):
            good = {(a, c) for a, c in pairs[i] if a in alive[i] and c in alive[i + 1]}
            alive[i] = {a for a, _ in good}
            alive[i + 1] = {c for _, c in good}
    return alive


def measure() -> tuple[np.ndarray, dict]:
    """The table as TANH reads it, checked against LOGISTIC's reading and against both
    kernels at CHECK_SCALES; also a summary."""
    table = table_from_tanh()
    alive = logistic_candidates()
    off = [i for i in range(256) if int(table[i]) not in alive[i]]
    if off:
        raise RuntimeError(f"LOGISTIC disagrees with TANH's table at entries {off}")
    determined = [i for i in range(256) if len(alive[i]) == 1]
    for op, scales in CHECK_SCALES.items():
        for scale in scales:
            ours = emulate(op, kernel_input(op, scale), table)
            ref = run_kernel(op, scale)
            if not np.array_equal(ours, ref):
                bad = int(np.sum(ours != ref))
                raise RuntimeError(f"{op} at scale {scale}: {bad} of 65536 outputs differ")
    return table, {"determined_by_logistic": len(determined)}
