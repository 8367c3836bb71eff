"""The ``tflite2qonnx`` command end to end, in a subprocess, on bad inputs and one good one.

tests/qonnx_ingest/cli/test_command.py pins the shared plumbing in-process with a stand-in
converter; here the real entry point (``python -m tflite2qonnx``) meets real files: every
failure must exit 1 (the model cannot be converted) or 2 (unusable input or usage), print one
line naming the problem and the file, show no traceback unless ``--verbose``, and write
nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import tflite

from support import CORPUS, ROOT, requires_corpus
from tflite2qonnx.reader import read_model

MODEL = CORPUS / "tflite" / "tflm__hello_world_int8.tflite"  # 2.7 kB: FULLY_CONNECTED x 3
PROG = "tflite2qonnx"

pytestmark = [
    requires_corpus,
    pytest.mark.skipif(not MODEL.exists(), reason=f"{MODEL.name} not in the corpus"),
]


def run_cli(*args, cwd: Path, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*prefix, sys.executable, "-m", PROG, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout, not an installed copy
    )


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (None for directories)."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def assert_one_line_failure(result, code: int, *fragments: str) -> str:
    assert result.returncode == code, result.stderr
    assert result.stdout == ""
    err = result.stderr
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith(f"{PROG}: error: ")
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    return err


# ----------------------------------------------------------------------------- bad inputs


def with_opcode(data: bytes, builtin_code: int) -> bytes:
    """``data`` with its first operator code rewritten in place (both code fields)."""
    out = bytearray(data)
    opcode = tflite.Model.GetRootAsModel(data, 0).OperatorCodes(0)
    deprecated, current = opcode._tab.Offset(4), opcode._tab.Offset(10)  # vtable slots 0 and 3
    assert deprecated, "hello_world stores deprecated_builtin_code"
    out[opcode._tab.Pos + deprecated] = builtin_code
    if current:
        struct.pack_into("<i", out, opcode._tab.Pos + current, builtin_code)
    return bytes(out)


def _missing(tmp):
    return [tmp / "nope.tflite"], ("nope.tflite", "no such file")


def _directory(tmp):
    (tmp / "folder.tflite").mkdir()
    return [tmp / "folder.tflite"], (
        "folder.tflite",
        "is a directory with no .tflite or .task file",
    )


def _empty(tmp):
    (tmp / "empty.tflite").write_bytes(b"")
    return [tmp / "empty.tflite"], ("empty.tflite", "not a TFLite flatbuffer", "0 bytes")


def _random_bytes(tmp):
    data = np.random.default_rng(99).integers(0, 256, 4096, dtype=np.uint8).tobytes()
    (tmp / "noise.tflite").write_bytes(data)
    return [tmp / "noise.tflite"], ("noise.tflite", "not a TFLite flatbuffer", "identifier")


def _random_bytes_behind_identifier(tmp):
    data = bytearray(np.random.default_rng(5).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    data[4:8] = b"TFL3"
    (tmp / "noise3.tflite").write_bytes(bytes(data))
    return [tmp / "noise3.tflite"], ("noise3.tflite", "beyond the end of the file")


def _truncated(fraction):
    def make(tmp):
        data = MODEL.read_bytes()
        size = int(len(data) * fraction)
        (tmp / "cut.tflite").write_bytes(data[:size])
        return [tmp / "cut.tflite"], ("cut.tflite", f"looks truncated ({size} bytes; the model")

    return make


def _wrong_identifier(tmp):
    data = bytearray(MODEL.read_bytes())
    data[4:8] = b"XXXX"
    (tmp / "other.tflite").write_bytes(bytes(data))
    return [tmp / "other.tflite"], ("other.tflite", "file identifier is b'XXXX'")


def _unsupported_operator(tmp):
    lsh = tflite.BuiltinOperator.LSH_PROJECTION  # hashing: no converter row covers it
    (tmp / "lsh.tflite").write_bytes(with_opcode(MODEL.read_bytes(), lsh))
    return [tmp / "lsh.tflite"], ("lsh.tflite", "unsupported operator LSH_PROJECTION", "--verbose")


def _output_is_the_input(tmp):
    shutil.copy(MODEL, tmp / "m.tflite")
    return [tmp / "m.tflite", "-o", tmp / "m.tflite"], ("m.tflite", "refusing to overwrite")


def _output_directory_missing(tmp):
    shutil.copy(MODEL, tmp / "m.tflite")
    out = tmp / "absent" / "m.onnx"
    return [tmp / "m.tflite", "-o", out], ("absent", "output directory does not exist")


def _malformed_layout_option(tmp):
    shutil.copy(MODEL, tmp / "m.tflite")
    return [tmp / "m.tflite", "--layout", "NCHW"], ("--layout", "'NCHW'")


def _unknown_layout_value(tmp):
    shutil.copy(MODEL, tmp / "m.tflite")
    sg = read_model(MODEL).subgraphs[0]
    name = sg.tensors[sg.inputs[0]].name
    return [tmp / "m.tflite", "--layout", f"{name}=XYZ"], (name, "'XYZ'")


def _layout_of_a_missing_tensor(tmp):
    shutil.copy(MODEL, tmp / "m.tflite")
    return [tmp / "m.tflite", "--layout", "nope=NCHW"], ("nope", "does not have")


def _opset_out_of_range(tmp):
    shutil.copy(MODEL, tmp / "m.tflite")
    return [tmp / "m.tflite", "--opset", "99"], ("opset 99", "not supported")


BAD = {
    "missing_path": (_missing, 2),
    "directory": (_directory, 2),
    "empty_file": (_empty, 2),
    "random_bytes": (_random_bytes, 2),
    "random_bytes_behind_TFL3": (_random_bytes_behind_identifier, 2),
    "truncated_10pct": (_truncated(0.1), 2),
    "truncated_50pct": (_truncated(0.5), 2),
    "truncated_99pct": (_truncated(0.99), 2),
    "wrong_identifier": (_wrong_identifier, 2),
    "unsupported_operator": (_unsupported_operator, 1),
    "output_is_the_input": (_output_is_the_input, 2),
    "output_directory_missing": (_output_directory_missing, 2),
    "malformed_layout_option": (_malformed_layout_option, 2),
    "unknown_layout_value": (_unknown_layout_value, 2),
    "layout_of_a_missing_tensor": (_layout_of_a_missing_tensor, 2),
    "opset_out_of_range": (_opset_out_of_range, 2),
}


@pytest.mark.parametrize("spelling", ["out", "out/"])
def test_output_into_an_existing_directory(spelling, tmp_path):
    shutil.copy(MODEL, tmp_path / "m.tflite")
    (tmp_path / "out").mkdir()
    result = run_cli(tmp_path / "m.tflite", "-o", spelling, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["m.onnx"]
    onnx.checker.check_model(onnx.load(tmp_path / "out" / "m.onnx"))


def test_output_into_a_new_directory_named_with_a_slash(tmp_path):
    shutil.copy(MODEL, tmp_path / "m.tflite")
    result = run_cli(tmp_path / "m.tflite", "-o", "new/", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "new" / "m.onnx").is_file() and not (tmp_path / "new.onnx").exists()


def test_a_new_output_directory_needs_an_existing_parent(tmp_path):
    shutil.copy(MODEL, tmp_path / "m.tflite")
    before = snapshot(tmp_path)
    result = run_cli(tmp_path / "m.tflite", "-o", "absent/new/", cwd=tmp_path)
    assert_one_line_failure(result, 2, "absent", "output directory does not exist")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_exits_with_one_line_and_writes_nothing(case, tmp_path):
    make, code = BAD[case]
    args, fragments = make(tmp_path)
    before = snapshot(tmp_path)
    result = run_cli(*args, cwd=tmp_path)
    assert_one_line_failure(result, code, *fragments)
    assert snapshot(tmp_path) == before  # no output, no staging leftovers, input untouched


def test_verbose_adds_the_traceback_of_an_unsupported_operator(tmp_path):
    """The counterpart of "no traceback": --verbose does show one, and still writes nothing."""
    args, _ = _unsupported_operator(tmp_path)
    before = snapshot(tmp_path)
    result = run_cli(*args, "--verbose", cwd=tmp_path)
    assert result.returncode == 1
    assert "Traceback" in result.stderr
    assert result.stderr.splitlines()[-1].startswith(f"{PROG}: error: ")
    assert "unsupported operator LSH_PROJECTION" in result.stderr.splitlines()[-1]
    assert snapshot(tmp_path) == before


def test_output_directory_not_writable_is_exit_2(tmp_path):
    """Root ignores mode bits, so as root the CLI runs without the DAC override capabilities."""
    prefix: tuple[str, ...] = ()
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root and setpriv is missing: cannot drop CAP_DAC_OVERRIDE")
        prefix = (setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner")
    shutil.copy(MODEL, tmp_path / "m.tflite")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        result = run_cli(
            tmp_path / "m.tflite", "-o", locked / "m.onnx", cwd=tmp_path, prefix=prefix
        )
        assert_one_line_failure(result, 2, "locked", "not writable")
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o755)


# ----------------------------------------------------------------------------- happy path

SUMMARY = re.compile(
    rf"^{PROG}: wrote (?P<path>.+) \((?P<nodes>\d+) nodes, (?P<quant>\d+) quantizers\) "
    r"in \d+\.\d\d s$"
)


def test_converts_beside_the_input_and_prints_the_summary(tmp_path):
    source = tmp_path / "hello.tflite"
    shutil.copy(MODEL, source)
    result = run_cli(source.name, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert len(lines) == 1
    match = SUMMARY.match(lines[0])
    assert match, lines[0]
    assert match["path"] == "hello.onnx"
    model = onnx.load(tmp_path / "hello.onnx")
    onnx.checker.check_model(model)
    assert int(match["nodes"]) == len(model.graph.node)
    assert int(match["quant"]) == sum(n.op_type == "Quant" for n in model.graph.node)
    assert source.read_bytes() == MODEL.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hello.onnx", "hello.tflite"]


def test_explicit_output_path_is_written_and_the_corpus_untouched(tmp_path):
    out = tmp_path / "sub" / "x.onnx"
    out.parent.mkdir()
    before = MODEL.read_bytes()
    result = run_cli(MODEL, "-o", out, "--int-quant", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert SUMMARY.match(result.stdout.strip())
    assert "IntQuant" in {n.op_type for n in onnx.load(out).graph.node}
    assert MODEL.read_bytes() == before


def test_report_and_encodings_files_get_the_models_mode(tmp_path):
    """All three files the command writes are created under the caller's umask (0666 less it),
    not the 0600 of a private temporary file."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            PROG,
            MODEL,
            "-o",
            "m.onnx",
            "--report-json",
            "r.json",
            "--encodings",
            "e.json",
        ],  # fmt: skip
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        umask=0o027,
    )
    assert done.returncode == 0, done.stderr
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes == {"m.onnx": 0o640, "r.json": 0o640, "e.json": 0o640}
