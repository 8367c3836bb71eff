"""Which TFLite operators tf2onnx's TFLite path handles that tflite2qonnx does not (and back).

tf2onnx registers one handler per TFLite op with ``@tfl_op("TFL_<NAME>", ...)`` in
tf2onnx/tflite_handlers/*.py; the names are read from those sources (importing tf2onnx would
import TensorFlow). Ours is ``tflite2qonnx.ops.CONVERTERS``. Run from the repository root:

    PYTHONPATH=. python scripts/tflite_op_gap.py
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

_HANDLER = re.compile(r"@tfl_op\(\s*(\[[^\]]*\]|\"[^\"]*\"|'[^']*')")
_NAME = re.compile(r"[\"']TFL_([A-Za-z0-9_]+)[\"']")


def tf2onnx_tflite_ops() -> set[str]:
    """The TFLite op names (builtin names, custom codes) tf2onnx has a handler for."""
    spec = importlib.util.find_spec("tf2onnx")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("tf2onnx is not installed (the keras extra)")
    handlers = Path(next(iter(spec.submodule_search_locations))) / "tflite_handlers"
    names: set[str] = set()
    for path in sorted(handlers.glob("*.py")):
        for match in _HANDLER.finditer(path.read_text()):
            names |= set(_NAME.findall(match.group(1)))
    return names


def _builtins() -> set[str]:
    """BuiltinOperator names of the TFLite schema the reader uses."""
    import tflite

    return {k for k in vars(tflite.BuiltinOperator) if not k.startswith("_")}


def main() -> None:
    from tflite2qonnx.ops import CONVERTERS, CUSTOM_OPERATORS

    ours, theirs, builtins = set(CONVERTERS), tf2onnx_tflite_ops(), _builtins()
    gap, extra = sorted(theirs - ours), sorted(ours - theirs)
    stale = [n for n in gap if n not in builtins and n not in CUSTOM_OPERATORS]
    rest = sorted(builtins - ours - {"CUSTOM", "DELEGATE", "PLACEHOLDER_FOR_GREATER_OP_CODES"})
    print(
        f"tflite2qonnx converts {len(ours)} operators; tf2onnx's TFLite path handles {len(theirs)}"
    )
    print(f"handled by tf2onnx, not by us ({len(gap)}): {', '.join(gap) or '-'}")
    print(f"  of those, not a builtin of the TFLite schema: {', '.join(stale) or '-'}")
    print(f"converted by us, not by tf2onnx ({len(extra)}): {', '.join(extra) or '-'}")
    print(f"TFLite builtins neither handles ({len(rest)}): {', '.join(rest)}")


if __name__ == "__main__":
    main()
