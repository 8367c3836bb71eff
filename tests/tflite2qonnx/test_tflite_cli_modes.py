"""Modes that keep the user's work: --verify that cannot run the interpreter writes the model
(exit 5), a Keras file names qkeras2qonnx, -o - refuses a terminal, --help lists exit codes,
examples and option groups, Ctrl-C in folder mode prints what finished, and the Python API's
format="qcdq" and convert_and_verify."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import onnx
import pytest

from qonnx_ingest.errors import InputError, ReferenceUnavailable
from support import (
    CORPUS,
    ROOT,
    assert_cli_fails,
    ctrl_c_after_first_line,
    requires_corpus,
    run_module,
    snapshot,
)
from tflite2qonnx.cli import main

TFLITE = CORPUS / "tflite"
HELLO = TFLITE / "tflm__hello_world_int8.tflite"
PERSON = TFLITE / "tflm__person_detect.tflite"  # the interpreter refuses its bias axes
H5 = ROOT / "examples" / "qkeras_jet_dnn.h5"
REFUSAL = "the TFLite interpreter cannot run this model: quantized_dimension must be in range"

pytestmark = [requires_corpus, pytest.mark.filterwarnings("ignore::UserWarning")]


def test_verify_that_cannot_run_the_interpreter_writes_the_model_and_exits_5(tmp_path, capsys):
    out = tmp_path / "person.onnx"
    assert main([str(PERSON), "-o", str(out), "--verify", "-q"]) == 5
    captured = capsys.readouterr()
    assert f"wrote {out}" in captured.out
    last = captured.err.splitlines()[-1]
    assert last.startswith(f"tflite2qonnx: verification skipped: {REFUSAL}"), captured.err
    assert "error:" not in captured.err
    onnx.checker.check_model(onnx.load(out))  # the conversion was kept


def test_verify_without_the_interpreter_writes_the_model_and_says_what_to_install(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCK_LITERT)
    result = run_module("tflite2qonnx", HELLO, "-o", "m.onnx", "--verify", cwd=tmp_path,
                        path_first=[site])  # fmt: skip
    assert result.returncode == 5, result.stderr
    hint = f'pip install -c constraints.txt ".[verify]" (run in {ROOT})'
    assert result.stderr.strip() == (
        f"tflite2qonnx: verification skipped: --verify needs the TFLite interpreter: {hint}"
    )
    onnx.checker.check_model(onnx.load(tmp_path / "m.onnx"))


BLOCK_LITERT = """
import importlib.abc
import sys


class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "ai_edge_litert":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Blocker())
"""


def test_a_folder_reports_a_skipped_verification_as_converted_and_json_has_the_figures(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    shutil.copy(PERSON, models / "person.tflite")
    shutil.copy(HELLO, models / "hello.tflite")
    (models / "bad.tflite").write_bytes(HELLO.read_bytes()[:400])  # truncated: refused
    result = run_module("tflite2qonnx", "models", "-o", "out/", "--verify", "--json", cwd=tmp_path)
    assert result.returncode == 2, result.stderr  # the refusal outranks the skipped check
    document = json.loads(result.stdout)
    by_name = {m["input"]: m for m in document["models"]}
    person, hello, bad = (by_name[f"models/{n}.tflite"] for n in ("person", "hello", "bad"))
    assert person["status"] == "converted" and person["exit_code"] == 5
    assert person["output"] == "out/person.onnx" and (tmp_path / "out/person.onnx").is_file()
    assert person["verification_skipped"].startswith(REFUSAL)
    assert person["verification"] is None
    # the warnings the run printed, per model
    assert any("out-of-range quantized_dimension" in w for w in person["warnings"])
    assert hello["warnings"] == []
    # the figures --verify printed, per model
    figures = hello["verification"]
    assert figures["passed"] is True and figures["inputs"] == 16
    (output,) = figures["outputs"]
    assert output["name"] == "StatefulPartitionedCall:0" and output["max_steps"] <= 1
    assert bad["status"] == "refused" and bad["output"] is None
    assert document["summary"]["converted"] == 2 and document["summary"]["refused"] == 1
    line = next(ln for ln in result.stderr.splitlines() if "person.tflite ->" in ln)
    assert line.startswith("tflite2qonnx: converted ") and "; verification skipped: " in line


def test_a_folder_where_only_verification_was_skipped_exits_5(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    shutil.copy(PERSON, models / "person.tflite")
    shutil.copy(HELLO, models / "hello.tflite")
    result = run_module("tflite2qonnx", "models", "--verify", cwd=tmp_path)
    assert result.returncode == 5, result.stderr
    table = dict(ln.split(None, 1) for ln in result.stdout.splitlines() if ln.startswith("conv"))
    assert table["converted"].split()[0] == "2"
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith("tflite2qonnx: ")]
    assert len(lines) == 2 and all(ln.startswith("tflite2qonnx: converted ") for ln in lines)


def keras_zip(path):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("metadata.json", '{"keras_version": "3.5.0"}')
        archive.writestr("config.json", "{}")


@pytest.mark.parametrize(
    "make, kind",
    [
        (lambda p: shutil.copy(H5, p), "an HDF5 file (a Keras .h5 model?)"),
        (keras_zip, "a zip archive (a Keras .keras model?)"),
        (lambda p: p.write_text('{"class_name": "Sequential"}'), "a JSON file"),
    ],
    ids=["h5", "keras", "json"],
)
def test_a_keras_file_is_sent_to_qkeras2qonnx(tmp_path, capsys, make, kind):
    source = tmp_path / "model.tflite"  # the suffix does not matter: the bytes say Keras
    make(source)
    before = snapshot(tmp_path)
    argv = [source, "-q"]
    assert_cli_fails(capsys, main, "tflite2qonnx", argv, 2, "model.tflite", kind, ELSEWHERE)
    assert snapshot(tmp_path) == before


ELSEWHERE = (
    "not TFLite: for a QKeras or HGQ2 model use qkeras2qonnx; convert any other to .tflite "
    "first (tf.lite.TFLiteConverter)"
)


def test_a_savedmodel_directory_is_sent_to_qkeras2qonnx_or_the_tflite_converter(tmp_path, capsys):
    """Was: "is a directory with no .tflite file in it (--recursive looks below it)"."""
    saved = tmp_path / "exported"
    (saved / "variables").mkdir(parents=True)
    (saved / "saved_model.pb").write_bytes(b"\x08\x01")  # what tf.saved_model.save writes
    before = snapshot(tmp_path)
    for argv in ([saved, "-q"], [saved, "-o", tmp_path / "out/", "--json"]):
        err = assert_cli_fails(capsys, main, "tflite2qonnx", argv, 2, ELSEWHERE)
        assert err.startswith(f"tflite2qonnx: error: {saved}: this is a TensorFlow SavedModel ")
    assert snapshot(tmp_path) == before


def test_json_with_one_model_writes_the_file_o_names_with_its_verify_verdict(tmp_path):
    """--json takes one model as the command does without it (was: "with several models, -o
    names a directory"), and its figures are the verdict's numbers."""
    result = run_module("tflite2qonnx", HELLO, "-o", "hello.onnx", "--verify", "--json",
                        cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    (model,) = json.loads(result.stdout)["models"]
    assert model["output"] == "hello.onnx" and (tmp_path / "hello.onnx").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hello.onnx"]
    (output,) = model["verification"]["outputs"]
    assert output["reference"] == "TFLite's builtin kernels" and output["passed"] is True
    assert output["equal_fraction"] == 1.0 and output["max_steps"] == 0
    assert output["baseline"] == {"equal_fraction": 1.0, "max_steps": 0}
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"tflite2qonnx: converted {HELLO} -> hello.onnx (") and line.endswith(
        "; verify: ok"
    )


@pytest.mark.parametrize("target", ["-", "/dev/stdout"])
def test_a_model_is_not_written_to_a_terminal(tmp_path, target):
    leader, follower = pty.openpty()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "tflite2qonnx", str(HELLO), "-o", target],
            stdout=follower,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        os.set_blocking(leader, False)
        try:
            shown = os.read(leader, 1 << 16)
        except BlockingIOError:
            shown = b""
    finally:
        os.close(follower)
        os.close(leader)
    assert result.returncode == 2
    assert shown == b""  # not a byte of the model on the terminal
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"tflite2qonnx: error: -o {target}: ")
    assert "terminal" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("tool", ["tflite2qonnx", "qkeras2qonnx"])
def test_help_lists_exit_codes_examples_and_option_groups(tool, capsys):
    import importlib

    with pytest.raises(SystemExit) as info:
        importlib.import_module(f"{tool}.cli").main(["--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    for group in ("output:", "verification:", "several models:", "messages:"):
        assert f"\n{group}\n" in text, group
    examples = text.split("\nexamples:\n")[1].split("\n\n")[0]
    assert examples.count(f"  {tool} ") >= 3
    codes = text.split("\nexit codes:\n")[1]
    listed = [line.split()[0] for line in codes.splitlines() if line.strip()]
    assert listed == ["0", "1", "2", "3", "4", "5", "130"]
    assert "result-file" not in text  # the batch's own plumbing is not an option for people


def test_ctrl_c_in_folder_mode_prints_what_finished_and_what_did_not(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    for k in range(6):
        shutil.copy(PERSON, models / f"m{k}.tflite")
    first, rest, err, code = ctrl_c_after_first_line(
        "tflite2qonnx", ["models", "-o", "out/"], tmp_path, timeout=120
    )
    assert first.startswith("tflite2qonnx: converted models/m0.tflite"), (first, err)
    assert code == 130, err
    assert "crashed" not in rest + err and "Traceback" not in err
    rows = (
        re.match(r"(converted|interrupted|not run|total) +(\d+) ", ln) for ln in rest.splitlines()
    )
    table = {m[1]: int(m[2]) for m in rows if m}
    converted = table["converted"]
    unfinished = table.get("interrupted", 0) + table.get("not run", 0)
    assert converted >= 1 and unfinished >= 1 and converted + unfinished == 6
    assert table["total"] == 6
    assert f"tflite2qonnx: interrupted: {unfinished} of 6 models not converted" in err
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert len(written) == converted and all(n.endswith(".onnx") for n in written)


def test_convert_format_qcdq_computes_what_the_interpreter_computes():
    from litert_compare import compare, reference_interpreter

    from tflite2qonnx import convert

    model = convert(HELLO, format="qcdq")
    kinds = {n.op_type for n in model.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= kinds and "Quant" not in kinds
    pairs = compare(model, reference_interpreter(HELLO), n_inputs=8)
    assert max(int(p.steps().max()) for p in pairs) <= 1  # one rounding per op, like XNNPACK
    with pytest.raises(
        InputError, match="format must be one of qonnx, qcdq, finn, hls4ml, got 'qdq'"
    ):
        convert(HELLO, format="qdq")


CONVERT_AND_VERIFY = """
import tflite2qonnx
model, figures = tflite2qonnx.convert_and_verify({path!r}, inputs=4)
print(type(model).__name__, figures.passed, figures.inputs, [a.name for a in figures.outputs])
print(figures.as_text().splitlines()[0])
"""


def test_convert_and_verify_returns_the_figures_and_the_interpreter_stays_quiet(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", CONVERT_AND_VERIFY.format(path=str(HELLO))],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "ModelProto True 4 ['StatefulPartitionedCall:0']"
    assert lines[1].startswith("verify: ok, 100.00% of output values equal to TFLite's builtin")
    # was "INFO: Created TensorFlow Lite XNNPACK delegate for CPU." (C++, on fd 2)
    assert "XNNPACK delegate" not in result.stderr and "INFO" not in result.stderr


def test_convert_and_verify_says_when_the_interpreter_cannot_run_the_model(tmp_path):
    from tflite2qonnx import convert_and_verify

    out = tmp_path / "person.onnx"
    with pytest.raises(ReferenceUnavailable, match="quantized_dimension must be in range"):
        convert_and_verify(PERSON, out, inputs=2)
    assert not out.exists()


def test_given_inputs_the_interpreter_refuses_are_the_users_to_fix_not_a_skip(tmp_path):
    """Random samples the interpreter refuses are the reference's failure (skipped); the
    user's own samples refused are a bad --verify-inputs (exit 2, nothing written)."""
    from tflite2qonnx import convert
    from tflite2qonnx.reference import verify

    source = TFLITE / "tfexamples__recommendation_history10_top100.tflite"
    path = tmp_path / "ids.npz"
    np.savez(path, context_input_placeholder=np.full((1, 10), 10**6, np.int32))
    with pytest.raises(InputError, match="interpreter failed") as info:
        verify(source, convert(source), inputs_path=path)
    assert not isinstance(info.value, ReferenceUnavailable)


@pytest.mark.parametrize(
    "extra, option",
    [(["--report"], "--report"), (["--report-json", "-"], "--report-json"), (["-o", "-"], "-o -")],
)
def test_json_with_one_model_refuses_what_would_print_beside_its_document(
    tmp_path, capsys, extra, option
):
    before = snapshot(tmp_path)
    output = [] if "-o" in extra else ["-o", tmp_path / "m.onnx"]
    argv = [HELLO, *output, "--json", *extra]
    assert_cli_fails(capsys, main, "tflite2qonnx", argv, 2, "--json keeps stdout", option)
    assert snapshot(tmp_path) == before
