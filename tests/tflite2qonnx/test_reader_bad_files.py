"""Tests for tflite2qonnx.reader on bad files: empty, random, truncated, corrupted, missing
or unreadable input is an InputError in one line naming the file, never another exception.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from reader_testkit import CORPUS_FILES, assert_one_line_error, corpus_model

import support
from qonnx_ingest.errors import InputError
from tflite2qonnx.reader import read_model

pytestmark = support.requires_corpus


def test_empty_bytes() -> None:
    with pytest.raises(InputError) as exc:
        read_model(b"")
    assert_one_line_error(exc, "<bytes>", "not a TFLite flatbuffer")


def test_random_bytes() -> None:
    rng = np.random.default_rng(1234)
    data = rng.integers(0, 256, 4096, dtype=np.uint8).tobytes()
    with pytest.raises(InputError) as exc:
        read_model(data)
    assert_one_line_error(exc, "not a TFLite flatbuffer", "identifier")


def test_wrong_identifier(tmp_path: Path) -> None:
    data = bytearray(corpus_model("tflm__hello_world_int8.tflite").read_bytes())
    data[4:8] = b"XXXX"
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(bytes(data))
    with pytest.raises(InputError) as exc:
        read_model(bad)
    assert_one_line_error(exc, str(bad), "not a TFLite flatbuffer", "XXXX")


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.stem)
def test_truncated(path: Path, fraction: float) -> None:
    data = path.read_bytes()
    with pytest.raises(InputError) as exc:
        read_model(data[: int(len(data) * fraction)])
    assert_one_line_error(exc, "<bytes>")


def test_nonexistent_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.tflite"
    with pytest.raises(InputError) as exc:
        read_model(missing)
    assert_one_line_error(exc, str(missing), "does not exist")


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        read_model(tmp_path)
    assert_one_line_error(exc, str(tmp_path), "directory")


def test_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "locked.tflite"
    p.write_bytes(b"")

    def deny(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", deny)  # portable stand-in for chmod 000 (root)
    with pytest.raises(InputError) as exc:
        read_model(p)
    assert_one_line_error(exc, str(p), "cannot read", "Permission denied")


def test_random_corruption_only_raises_input_error() -> None:
    """Seeded byte flips inside the flatbuffer: the reader either succeeds or says InputError."""
    original = corpus_model("tflm__hello_world_int8.tflite").read_bytes()
    rng = np.random.default_rng(20240521)
    failures = 0
    for _ in range(300):
        data = bytearray(original)
        for pos in rng.integers(8, len(data), rng.integers(1, 9)):
            data[pos] = int(rng.integers(0, 256))
        try:
            read_model(bytes(data))
        except InputError as exc:
            assert "\n" not in str(exc)
            failures += 1
    assert failures > 0


@pytest.mark.parametrize("kind", ["MAXIMUM", "MINIMUM"])
def test_maximum_or_minimum_with_one_input_is_refused_naming_the_operator(kind: str) -> None:
    """The fuzzer's case: an opcode mutated into MAXIMUM over a one-input operator (ONNX's Max
    would take one input; TFLite's kernel needs two)."""
    from tflite_writer import build_model

    tensors = [{"name": n, "shape": [4]} for n in ("x", "y")]
    data = build_model(tensors, [{"op": kind, "inputs": [0], "outputs": [1]}], [0], [1])
    with pytest.raises(InputError) as exc:
        read_model(data)
    assert_one_line_error(exc, kind, "has 1 inputs, needs 2")
