"""Record or check a sha256 of every converted corpus model, to prove a refactor changes no byte.

Usage: ``check_corpus_bytes.py --write FILE`` records, ``--check FILE`` compares and prints a
table of equal / different. Each TFLite model is converted with default options and with
``bit_exact=True``; each QKeras corpus model with default options. A model that raises is
recorded as its exception class and message, which must stay the same too.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's converters, not an installed copy's
CORPUS = (ROOT.parent / "shared" / "corpus").resolve()  # as the tests name it, links resolved

# The JSON architectures need their weights file; every other .h5 / SavedModel stands alone.
QKERAS_WEIGHTS = {
    "qkeras_3layer.json": "qkeras_3layer_weights.h5",
    "qkeras_mnist_cnn.json": "qkeras_mnist_cnn_weights.h5",
}


def _digest(convert: Callable[[], object]) -> str:
    """sha256 of the serialised result, or ``error: Class: message`` when converting raises."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = convert()
    except Exception as exc:  # the error is the recorded outcome
        return f"error: {type(exc).__name__}: {exc}"
    return hashlib.sha256(model.SerializeToString()).hexdigest()


def _cases() -> Iterator[tuple[str, Callable[[], object]]]:
    import tflite2qonnx

    for path in sorted((CORPUS / "tflite").glob("*.tflite")):
        yield f"tflite/{path.name} default", lambda p=path: tflite2qonnx.convert(p)
        yield (
            f"tflite/{path.name} bit_exact",
            lambda p=path: tflite2qonnx.convert(p, bit_exact=True),
        )
    qkeras_dir = CORPUS / "qkeras"
    weights_files = set(QKERAS_WEIGHTS.values())
    for path in sorted(qkeras_dir.iterdir()):
        if path.name in weights_files or path.suffix == ".json" and path.name not in QKERAS_WEIGHTS:
            continue
        weights = QKERAS_WEIGHTS.get(path.name)

        def convert(p: Path = path, w: str | None = weights) -> object:
            import qkeras2qonnx

            return qkeras2qonnx.convert(p, weights=qkeras_dir / w if w else None)

        yield f"qkeras/{path.name} default", convert


def record() -> dict[str, str]:
    """Every case's digest, printed as it is made (dp_net takes a minute or two)."""
    results = {}
    for name, convert in _cases():
        results[name] = _digest(convert)
        print(f"{name}: {results[name][:100]}", flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", type=Path, metavar="FILE", help="record the digests in FILE")
    group.add_argument("--check", type=Path, metavar="FILE", help="compare with FILE")
    args = parser.parse_args(argv)
    if args.write:
        args.write.write_text(json.dumps(record(), indent=1, sort_keys=True) + "\n")
        return 0
    before = json.loads(args.check.read_text())
    after = record()
    rows = [(name, before.get(name), after.get(name)) for name in sorted({*before, *after})]
    width = max(len(name) for name, _, _ in rows)
    print(f"\n{'case':<{width}}  result")
    for name, old, new in rows:
        print(f"{name:<{width}}  {'equal' if old == new else 'DIFFERENT'}")
        if old != new:
            print(f"{'':<{width}}    before: {old}\n{'':<{width}}    after:  {new}")
    different = sum(old != new for _, old, new in rows)
    print(f"\n{len(rows) - different} equal, {different} different")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
