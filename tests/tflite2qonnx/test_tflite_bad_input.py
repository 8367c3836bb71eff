"""Hostile inputs for ``tflite2qonnx``: one table, run in-process through ``main(argv)``.

Every row asserts the exit code (2: unusable input, 1: a model that cannot be converted), one
stderr line that names the problem and the file / operator / tensor, no traceback (no
``--verbose``), and that nothing was written: no output, no staging directory left behind, the
input untouched. One row also runs through a subprocess for the real exit status;
tests/tflite2qonnx/test_tflite_cli.py runs the basic rows (missing, directory, empty, random,
identifier, output paths, read-only directory) that way too. The fuzzer (fuzz_tflite.py here,
run by scripts/fuzz.py and test_fuzz_tflite.py) covers the mutations no table lists.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import tflite
from tflite_writer import build_model

from support import CORPUS, assert_cli_fails, requires_corpus, snapshot
from tflite2qonnx.cli import main

PROG = "tflite2qonnx"
TFLITE = sorted((CORPUS / "tflite").glob("*.tflite"))
HELLO = CORPUS / "tflite" / "tflm__hello_world_int8.tflite"


def assert_fails(capsys, argv, code: int, *fragments: str) -> str:
    return assert_cli_fails(capsys, main, PROG, argv, code, *fragments)


# ----------------------------------------------------------------------------- a small model
# ADD(x, c) -> y, RELU(y) -> z, built here so each row can break exactly one field.


def small_model(x_shape=(1, 4), y_name: str = "y", add_inputs=(0, 1)) -> bytes:
    tensors = [
        {"name": "x", "shape": x_shape},
        {"name": "c", "shape": (1, 4), "data": np.array([[1, -2, 3, -4]], np.float32)},
        {"name": y_name, "shape": (1, 4)},
        {"name": "z", "shape": (1, 4)},
    ]
    ops = [
        {"op": "ADD", "inputs": list(add_inputs), "outputs": [2]},
        {"op": "RELU", "inputs": [2], "outputs": [3]},
    ]
    return build_model(tensors, ops, [0], [3])


def patch_u32(data: bytes, table, slot: int, value: int) -> bytes:
    """``data`` with the uint32 field in vtable slot ``slot`` of ``table`` set to ``value``."""
    offset = table._tab.Offset(4 + 2 * slot)
    assert offset, "the field must be stored (not left to its default) to be patched"
    out = bytearray(data)
    struct.pack_into("<I", out, table._tab.Pos + offset, value)
    return bytes(out)


def _subgraph(data: bytes):
    return tflite.Model.GetRootAsModel(data, 0).Subgraphs(0)


def buffer_index_out_of_range() -> bytes:
    data = small_model()
    return patch_u32(data, _subgraph(data).Tensors(1), 2, 99)  # Tensor.buffer


def opcode_index_out_of_range() -> bytes:
    data = small_model()
    return patch_u32(data, _subgraph(data).Operators(1), 0, 7)  # Operator.opcode_index


def tensor_index_out_of_range() -> bytes:
    return small_model(add_inputs=(0, 42))


def shape_overflow() -> bytes:
    return small_model(x_shape=(2**31 - 1, 2**31 - 1, 4))


def control_characters_in_a_name() -> bytes:
    """ADD reads its own output, a tensor named with ESC and NUL: nothing produced it (exit 1)."""
    return small_model(y_name="\x1b[31mevil\x00", add_inputs=(2, 1))


def test_the_small_model_converts(tmp_path, capsys):
    """The rows below fail because of their one broken field, not because of the model."""
    (tmp_path / "small.tflite").write_bytes(small_model())
    assert main([str(tmp_path / "small.tflite")]) == 0
    onnx.checker.check_model(onnx.load(tmp_path / "small.onnx"))


# ----------------------------------------------------------------------------- the table


def _write(name: str, data: bytes):
    def make(tmp: Path):
        (tmp / name).write_bytes(data() if callable(data) else data)
        return [tmp / name]

    return make


def _missing(tmp):
    return [tmp / "nope.tflite"]


def _directory(tmp):
    (tmp / "folder.tflite").mkdir()
    return [tmp / "folder.tflite"]


def _copy(tmp):
    shutil.copy(HELLO, tmp / "m.tflite")
    return tmp / "m.tflite"


def _wrong_identifier():
    data = bytearray(HELLO.read_bytes())
    data[4:8] = b"TFL2"
    return bytes(data)


def _random_bytes():
    return np.random.default_rng(8).integers(0, 256, 4096, dtype=np.uint8).tobytes()


# name: (make(tmp) -> argv, exit code, fragments of the message)
ROWS = {
    "missing_path": (_missing, 2, ["nope.tflite", "no such file"]),
    "directory": (_directory, 2, ["folder.tflite", "is a directory"]),
    "empty_file": (_write("empty.tflite", b""), 2, ["empty.tflite", "only 0 bytes"]),
    "random_bytes": (_write("noise.tflite", _random_bytes), 2, ["noise.tflite", "identifier"]),
    "file_identifier_changed": (
        _write("tfl2.tflite", _wrong_identifier),
        2,
        ["tfl2.tflite", "file identifier is b'TFL2', expected b'TFL3'"],
    ),
    "buffer_index_out_of_range": (
        _write("buf.tflite", buffer_index_out_of_range),
        2,
        ["buf.tflite", "tensor 1 'c'", "buffer index 99 out of range"],
    ),
    "tensor_index_out_of_range": (
        _write("tensor.tflite", tensor_index_out_of_range),
        2,
        ["tensor.tflite", "operator 0", "input 1 refers to tensor 42, out of range"],
    ),
    "opcode_index_out_of_range": (
        _write("opcode.tflite", opcode_index_out_of_range),
        2,
        ["opcode.tflite", "operator 1", "opcode index 7 out of range (model has 2 opcodes)"],
    ),
    "shape_element_count_overflows": (
        _write("huge.tflite", shape_overflow),
        2,
        ["huge.tflite", "tensor 0 'x'", "absurdly large"],
    ),
    "control_characters_are_escaped": (
        _write("evil.tflite", control_characters_in_a_name),
        1,
        ["\\x1b[31mevil\\x00'", "read before any operator produces it"],
    ),
    "output_is_the_input": (
        lambda tmp: [_copy(tmp), "-o", tmp / "m.tflite"],
        2,
        ["m.tflite", "refusing to overwrite"],
    ),
    "output_directory_missing": (
        lambda tmp: [_copy(tmp), "-o", tmp / "absent" / "m.onnx"],
        2,
        ["absent", "output directory does not exist"],
    ),
}


@requires_corpus
@pytest.mark.parametrize("row", sorted(ROWS))
def test_bad_input(row, tmp_path, capsys):
    make, code, fragments = ROWS[row]
    argv = make(tmp_path)
    before = snapshot(tmp_path)
    err = assert_fails(capsys, argv, code, *fragments)
    assert "\x1b" not in err and "\x00" not in err
    assert snapshot(tmp_path) == before  # no output, no staging leftovers, input untouched


CUTS = {"8_bytes": lambda n: 8, "third": lambda n: n // 3, "two_thirds": lambda n: 2 * n // 3}


@requires_corpus
@pytest.mark.parametrize("cut", [*CUTS, "all_but_last_byte"])
@pytest.mark.parametrize("path", TFLITE, ids=lambda p: p.stem)
def test_truncated_corpus_model(path, cut, tmp_path, capsys):
    data = path.read_bytes()
    size = CUTS[cut](len(data)) if cut in CUTS else len(data) - 1
    source = tmp_path / f"cut_{path.name}"
    source.write_bytes(data[:size])
    if cut == "all_but_last_byte":
        # The last byte is damage only where something the converter reads lies there. Many
        # files end in bytes no offset reaches (alignment padding, an orphan table, metadata,
        # coral's zip of labels); those copies must convert to exactly the whole file's model.
        # Either way nothing is guessed: identical output, or a refusal naming the file.
        whole_code = main([str(path), "-o", str(tmp_path / "whole.onnx")])
        capsys.readouterr()
        before = snapshot(tmp_path)
        if main([str(source), "-o", str(tmp_path / "cut.onnx")]) == 0:
            capsys.readouterr()
            assert whole_code == 0
            cut_model, whole = onnx.load(tmp_path / "cut.onnx"), onnx.load(tmp_path / "whole.onnx")
            cut_model.graph.name = whole.graph.name  # the file name
            assert cut_model.graph == whole.graph
        else:
            err = capsys.readouterr().err
            assert err.startswith(f"{PROG}: error: ") and err.count("\n") == 1, err
            assert source.name in err and "Traceback" not in err
            assert snapshot(tmp_path) == before
        return
    before = snapshot(tmp_path)
    # 8 bytes: the root offset points past the end; later cuts: a field read past the end,
    # which says the file looks truncated and how far the model reaches
    expected = ("beyond the end",) if size == 8 else ("looks truncated", f"({size} bytes;")
    assert_fails(capsys, [source], 2, source.name, *expected)
    assert snapshot(tmp_path) == before


def test_output_directory_not_writable(tmp_path, capsys):
    if os.geteuid() == 0:
        pytest.skip(
            "root ignores the directory's mode bits in-process; test_tflite_cli.py::"
            "test_output_directory_not_writable_is_exit_2 runs this row without CAP_DAC_OVERRIDE"
        )
    source = tmp_path / "m.tflite"
    source.write_bytes(small_model())
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        assert_fails(capsys, [source, "-o", locked / "m.onnx"], 2, "locked", "not writable")
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o755)


def test_a_broken_index_through_the_real_command(tmp_path):
    """The subprocess row: the exit status the shell sees, and the same single line."""
    source = tmp_path / "opcode.tflite"
    source.write_bytes(opcode_index_out_of_range())
    before = snapshot(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", PROG, str(source)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"{PROG}: error: {source}: subgraph 0 operator 1: opcode")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("verbose", [False, True])
def test_native_writes_to_fd_2_stay_out_of_the_one_line(verbose, tmp_path, capfd, monkeypatch):
    """C++ libraries (onnxruntime while qonnx folds constants, TensorFlow) log straight to file
    descriptor 2; the CLI keeps them out of its one-line error unless --verbose."""
    import tflite2qonnx.api
    from qonnx_ingest.errors import ConversionError

    def noisy_convert(*args, **kwargs):
        os.write(2, b"[E:onnxruntime:, sequential_executor.cc] native noise\n")
        raise ConversionError("cannot convert", "operator 0 (ADD)")

    monkeypatch.setattr(tflite2qonnx.api, "convert", noisy_convert)
    source = tmp_path / "small.tflite"
    source.write_bytes(small_model())
    argv = [str(source), *(["--verbose"] if verbose else [])]
    assert main(argv) == 1
    err = capfd.readouterr().err
    assert err.splitlines()[-1].startswith(f"{PROG}: error: operator 0 (ADD): cannot convert")
    if verbose:
        assert "native noise" in err and "Traceback" in err
    else:
        assert err.count("\n") == 1, err
