"""Status lines: each slow phase says what it is doing on stderr (on a terminal after a second;
elsewhere only when QONNX_INGEST_STATUS_AFTER asks, after that many seconds), never on stdout,
never with --quiet; a model written to stdout (-o -, -o /dev/stdout) is the only thing there."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time

import onnx
import pytest
from onnx import TensorProto, helper

from qonnx_ingest.cli.command import make_parser, run
from support import EXAMPLES, ROOT
from tflite2qonnx.cli import main as tflite_main

MODEL = EXAMPLES / "int8_dense.tflite"


def slow_model(args):
    time.sleep(getattr(args, "sleep", 0.6))
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    return helper.make_model(graph)


def test_a_phase_longer_than_the_delay_is_announced_a_short_one_is_not(
    tmp_path, monkeypatch, capsys
):
    (tmp_path / "m.h5").write_bytes(b"x")
    parser = make_parser("tool", "test tool", "the model")
    monkeypatch.setenv("QONNX_INGEST_STATUS_AFTER", "0.2")
    assert run(parser, slow_model, [str(tmp_path / "m.h5")]) == 0
    out, err = capsys.readouterr()
    assert err == f"tool: converting {tmp_path / 'm.h5'} ...\n"
    assert "converting" not in out
    monkeypatch.setenv("QONNX_INGEST_STATUS_AFTER", "5")
    assert run(make_parser("tool", "t", "m"), slow_model, [str(tmp_path / "m.h5")]) == 0
    assert capsys.readouterr().err == ""


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("stream, shown", [(Terminal, True), (io.StringIO, False)])
def test_by_default_a_terminal_sees_slow_phases_and_a_pipe_does_not(
    stream, shown, tmp_path, monkeypatch
):
    """A script reading stderr keeps its one-line errors; a person at a terminal is told."""
    monkeypatch.delenv("QONNX_INGEST_STATUS_AFTER", raising=False)
    (tmp_path / "m.h5").write_bytes(b"x")
    err = stream()
    monkeypatch.setattr(sys, "stderr", err)

    def slower(args):
        args.sleep = 1.4  # past the one-second default
        return slow_model(args)

    assert run(make_parser("tool", "t", "m"), slower, [str(tmp_path / "m.h5")]) == 0
    assert err.getvalue() == (f"tool: converting {tmp_path / 'm.h5'} ...\n" if shown else "")


def test_every_phase_of_a_tflite_run_has_its_line_and_quiet_has_none(tmp_path, monkeypatch, capsys):
    pytest.importorskip(
        "ai_edge_litert", reason="--verify needs the TFLite interpreter: pip install '.[verify]'"
    )
    monkeypatch.setenv("QONNX_INGEST_STATUS_AFTER", "0")
    argv = [str(MODEL), "-o", str(tmp_path / "m.onnx"), "--format", "qcdq", "--verify", "--report"]
    assert tflite_main(argv) == 0
    out, err = capsys.readouterr()
    phases = [line.split(": ", 1)[1] for line in err.splitlines() if line.endswith(" ...")]
    assert phases == [
        f"converting {MODEL} ...",
        "lowering to QuantizeLinear/DequantizeLinear ...",
        "verifying against the source model ...",
        "computing the report ...",
        f"writing {tmp_path / 'm.onnx'} ...",
    ]
    assert " ..." not in out
    assert tflite_main([*argv, "--quiet"]) == 0
    err = capsys.readouterr().err
    assert " ..." not in err and "warning: 4 activation quantizers" in err  # warnings stay


def test_report_json_on_stdout_stays_pure_json(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("QONNX_INGEST_STATUS_AFTER", "0")
    assert tflite_main([str(MODEL), "-o", str(tmp_path / "m.onnx"), "--report-json", "-"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["quantized_tensors"]  # nothing else on stdout
    assert "converting" in err and "wrote" in err


def run_cli(*args, cwd, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QONNX_INGEST_STATUS_AFTER": "0"}
    return subprocess.run(
        [sys.executable, "-m", "tflite2qonnx", *map(str, args)],
        cwd=cwd,
        stdout=stdout,
        stderr=subprocess.PIPE,
        timeout=120,
        env=env,
    )


@pytest.mark.parametrize("target", ["-", "/proc/self/fd/1"])
def test_a_model_on_stdout_is_alone_there(target, tmp_path):
    result = run_cli(MODEL, "-o", target, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    model = onnx.load_from_string(result.stdout)  # the bytes are the model and nothing else
    onnx.checker.check_model(model)
    err = result.stderr.decode()
    assert "converting" in err and "tflite2qonnx: wrote" in err
    assert list(tmp_path.iterdir()) == []


def test_a_name_of_stdout_redirected_to_a_file_holds_only_the_model(tmp_path):
    """/dev/stdout is a symlink to /proc/self/fd/1; a link of our own stands in for it, so that
    a regression (the link replaced by a file) can never replace the system's /dev/stdout."""
    (tmp_path / "work").mkdir()
    link = tmp_path / "work" / "stdout"
    link.symlink_to("/proc/self/fd/1")
    with open(tmp_path / "captured.onnx", "wb") as sink:
        result = run_cli(MODEL, "-o", link, cwd=tmp_path / "work", stdout=sink)
    assert result.returncode == 0, result.stderr
    onnx.checker.check_model(onnx.load(tmp_path / "captured.onnx"))
    assert b"wrote the model to stdout" in result.stderr
    assert link.is_symlink() and os.readlink(link) == "/proc/self/fd/1"


def test_model_and_json_cannot_share_stdout(tmp_path):
    result = run_cli(MODEL, "-o", "-", "--report-json", "-", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == b""
    assert b"-o - writes the model to stdout" in result.stderr
