"""The operator lists the docs and ``tflite2qonnx.api.convert``'s docstring show, generated from
the records (``tflite2qonnx.ops.OPERATORS``): supported operators, how --bit-exact treats each,
which run an int8 kernel by default, which have an int16 kernel. ``regenerate`` rewrites each
marked section in place; ``scripts/update_readme_ops.py`` runs it and ``tests/test_readme.py``
fails when one drifts.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from pathlib import Path

from tflite2qonnx.ops import CONVERTERS, OPERATORS
from tflite2qonnx.ops.record import (
    ANY_INTEGER,
    BY_DEFAULT,
    DEFAULT_WHERE,
    DEQUANTIZES,
    EMULATED,
    EXACT,
    UNDER_BIT_EXACT,
)

ROOT = Path(__file__).resolve().parents[2]


def _names(keep: Callable) -> list[str]:
    return sorted(name for name, op in OPERATORS.items() if op.convert is not None and keep(op))


def _codes(names: list[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def supported() -> str:
    names = sorted(CONVERTERS)
    return f"{len(names)} operators: " + _codes(names)


def bit_exact() -> str:
    rows = [
        ("its integer kernel emulated", lambda op: op.bit_exact == EMULATED),
        ("exact as converted (the kernel copies, compares or clamps)",
         lambda op: op.bit_exact == EXACT),
        ("exact as converted (the kernel dequantizes)", lambda op: op.bit_exact == DEQUANTIZES),
        ("exact as converted on any integer type (the kernel ignores the scales)",
         lambda op: op.stored_integers == ANY_INTEGER),
    ]  # fmt: skip
    lines = ["| under `--bit-exact` | operators |", "|---|---|"]
    lines += [f"| {what} | {_codes(_names(keep))} |" for what, keep in rows]
    return "\n".join(lines)


def int8_default() -> str:
    """The int8 / uint8 kernels that run by default, by their ``when``."""
    conditions = sorted({k.when or "" for op in OPERATORS.values() for k in op.int8_default})
    lines = ["| int8 / uint8 input, by default | operators |", "|---|---|"]
    for when in conditions:
        what = f"kernel where `{when}` holds" if when else "kernel emulated"
        keep = lambda op, w=when: any((k.when or "") == w for k in op.int8_default)  # noqa: E731
        lines.append(f"| {what} | {_codes(_names(keep))} |")
    return "\n".join(lines)


def int16() -> str:
    rows = [
        ("kernel emulated by default", lambda op: op.int16_runs == BY_DEFAULT),
        ("kernel emulated by default with an int64 or int32 bias, under `--bit-exact` otherwise",
         lambda op: op.int16_runs == DEFAULT_WHERE),
        ("kernel emulated under `--bit-exact` (one rounding is within a step by default)",
         lambda op: op.int16_runs == UNDER_BIT_EXACT),
        ("the stored integers, as the kernel (exact)",
         lambda op: op.stored_integers and op.stored_integers != ANY_INTEGER),
    ]  # fmt: skip
    lines = ["| int16 input | operators |", "|---|---|"]
    lines += [f"| {what} | {_codes(_names(keep))} |" for what, keep in rows]
    return "\n".join(lines)


def convert_doc() -> str:
    """The paragraph of ``api.convert``'s docstring that names the emulated operators."""
    emulated = ", ".join(_names(lambda op: op.bit_exact == EMULATED))
    by_default = ", ".join(_names(lambda op: op.int16_runs in (BY_DEFAULT, DEFAULT_WHERE)))
    int8_default = ", ".join(_names(lambda op: op.int8_default))
    text = (
        "``bit_exact`` emulates the builtin integer kernels' arithmetic bit for bit where a "
        f"record says so: {emulated} (see ``tflite2qonnx.fixed_point``); the default rounds "
        "once per op, like XNNPACK, except the 16x8 (int16) kernels no single rounding agrees "
        f"with, emulated either way: {by_default} (the convolutions with an int64 or int32 bias, "
        "TRANSPOSE_CONV with no bias too; docs/int16.md), and the int8 / uint8 kernels that run "
        f"by default: {int8_default} (SVDF's and the LSTM's kernels; the others' "
        "requantization rounded twice, as the builtin kernels round it, where its multiplier "
        "shifts right; docs/tflite.md)."
    )
    return textwrap.fill(text, width=92, initial_indent="    ", subsequent_indent="    ")


# (file, section marker, generator); the marker pairs are ``<!-- name:begin -->`` in markdown and
# ``.. name:begin`` in a docstring
SECTIONS: list[tuple[str, str, Callable[[], str]]] = [
    ("docs/tflite.md", "tflite-ops", supported),
    ("docs/tflite.md", "tflite-bit-exact", bit_exact),
    ("docs/tflite.md", "tflite-int8-default", int8_default),
    ("docs/int16.md", "tflite-int16", int16),
    ("tflite2qonnx/api.py", "emulated-ops", convert_doc),
]


def _markers(path: str, name: str) -> tuple[str, str]:
    if path.endswith(".py"):
        return f"    .. {name}:begin", f"    .. {name}:end"
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def render(path: str, text: str) -> str:
    """``text`` (the file ``path``'s) with each of its generated sections regenerated."""
    for target, name, generate in SECTIONS:
        if target != path:
            continue
        begin, end = _markers(path, name)
        pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
        if not pattern.search(text):
            raise ValueError(f"{path}: no {begin} ... {end} section")
        section = f"{begin}\n{generate()}\n{end}"
        text = pattern.sub(lambda _m, section=section: section, text)
    return text


def regenerate(root: Path = ROOT) -> list[str]:
    """Rewrite every generated section under ``root``; the files that changed."""
    changed = []
    for path in dict.fromkeys(target for target, _, _ in SECTIONS):
        file = root / path
        text = file.read_text()
        new = render(path, text)
        if new != text:
            file.write_text(new)
            changed.append(path)
    return changed
