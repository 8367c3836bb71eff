"""Many models per run: ``tflite2qonnx a.tflite dir/ -o out/`` converts each model in a process
of its own, prints one line per model and a summary table (or --json), and exits with the worst
code; one bad model never stops or damages the others."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import onnx
import pytest

from support import CORPUS, requires_corpus, run_module, snapshot

TFLITE = CORPUS / "tflite"
HELLO = TFLITE / "tflm__hello_world_int8.tflite"
CONV = TFLITE / "t2o__conv.uint8.tflite"
DEPTHWISE = TFLITE / "t2o__depthwise-conv.uint8.tflite"

pytestmark = requires_corpus


def run_cli(*args, cwd: Path) -> subprocess.CompletedProcess:
    return run_module("tflite2qonnx", *args, cwd=cwd)


@pytest.fixture
def models(tmp_path):
    """models/{hello,conv}.tflite, models/deep/{depthwise,bad}.tflite and a text file."""
    root = tmp_path / "models"
    (root / "deep").mkdir(parents=True)
    shutil.copy(HELLO, root / "hello.tflite")
    shutil.copy(CONV, root / "conv.tflite")
    shutil.copy(DEPTHWISE, root / "deep" / "depthwise.tflite")
    (root / "deep" / "bad.tflite").write_bytes(HELLO.read_bytes()[:400])  # truncated
    (root / "notes.txt").write_text("not a model")
    return root


def single(source: Path, tmp_path: Path) -> onnx.ModelProto:
    out = tmp_path / "single" / (source.stem + ".onnx")
    out.parent.mkdir(exist_ok=True)
    result = run_cli(source, "-o", out, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return onnx.load(out)


def test_a_directory_converts_each_model_into_the_output_directory(models, tmp_path):
    result = run_cli("models", "-o", "out/", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["conv.onnx", "hello.onnx"]  # not deep/
    lines = result.stdout.splitlines()
    converted = [ln for ln in lines if ln.startswith("tflite2qonnx: converted ")]
    assert len(converted) == 2
    assert any("models/hello.tflite -> out/hello.onnx (18 nodes" in ln for ln in converted)
    table = dict(ln.split(None, 1) for ln in lines if ln.split()[0] in ("converted", "total"))
    assert table["converted"].split()[0] == "2" and table["total"].split()[0] == "2"
    # the same model a single run writes (the source path is the same string)
    alone = single(Path("models/hello.tflite"), tmp_path)
    assert onnx.load(out / "hello.onnx").graph == alone.graph


def test_recursive_keeps_the_tree_and_a_bad_model_stops_nothing(models, tmp_path):
    before = snapshot(models)
    result = run_cli("models", "--recursive", "-o", "out/", cwd=tmp_path)
    assert result.returncode == 2, result.stdout  # the worst: the truncated file's exit code
    out = tmp_path / "out"
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*.onnx"))
    assert written == ["conv.onnx", "deep/depthwise.onnx", "hello.onnx"]
    for path in out.rglob("*"):
        assert path.is_dir() or path.suffix == ".onnx", path  # no staging leftovers
    # a model not converted is an error line: stderr (stdout: converted lines and the table)
    refused = [ln for ln in result.stderr.splitlines() if ln.startswith("tflite2qonnx: refused")]
    assert len(refused) == 1 and "deep/bad.tflite" in refused[0] and "truncated" in refused[0]
    assert "refused models/deep/bad.tflite" not in result.stdout
    assert result.stdout.count("tflite2qonnx: converted ") == 3
    assert snapshot(models) == before  # inputs untouched
    for name in ("conv", "deep/depthwise"):
        onnx.checker.check_model(onnx.load(out / f"{name}.onnx"))


def test_json_summary_is_machine_readable_and_lines_move_to_stderr(models, tmp_path):
    result = run_cli("models", "-r", "-o", "out/", "--json", "--jobs", "2", cwd=tmp_path)
    assert result.returncode == 2
    document = json.loads(result.stdout)  # stdout is the JSON document alone
    assert document["summary"] == {
        "converted": 3,
        "refused": 1,
        "failed verification": 0,
        "timed out": 0,
        "crashed": 0,
        "interrupted": 0,
        "not run": 0,
        "total": 4,
    }
    assert document["jobs"] == 2 and document["exit_code"] == 2
    by_input = {m["input"]: m for m in document["models"]}
    assert by_input["models/deep/bad.tflite"]["exit_code"] == 2
    # an output path only for a model that was written
    assert by_input["models/deep/bad.tflite"]["output"] is None
    assert not (tmp_path / "out" / "deep" / "bad.onnx").exists()
    assert by_input["models/hello.tflite"]["output"] == "out/hello.onnx"
    assert "tflite2qonnx: converted models/conv.tflite" in result.stderr


def test_parallel_jobs_write_the_same_models_as_one_job(models, tmp_path):
    one = run_cli("models", "-r", "-o", "one/", cwd=tmp_path)
    two = run_cli("models", "-r", "-o", "two/", "-j", "3", cwd=tmp_path)
    assert one.returncode == two.returncode == 2
    for path in (tmp_path / "one").rglob("*.onnx"):
        twin = tmp_path / "two" / path.relative_to(tmp_path / "one")
        assert onnx.load(path).graph == onnx.load(twin).graph
    assert "wall time" in two.stdout and "--jobs 3" in two.stdout


def test_options_reach_every_model(models, tmp_path):
    result = run_cli(
        "models/hello.tflite",
        "models/conv.tflite",
        "-o",
        "out/",
        "--int-quant",
        "--format",
        "qcdq",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    for name in ("hello", "conv"):
        ops = {n.op_type for n in onnx.load(tmp_path / "out" / f"{name}.onnx").graph.node}
        assert "QuantizeLinear" in ops and "Quant" not in ops and "IntQuant" not in ops


def test_two_models_with_one_output_name_never_overwrite_each_other(tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
    shutil.copy(HELLO, tmp_path / "a" / "m.tflite")
    shutil.copy(CONV, tmp_path / "b" / "m.tflite")
    result = run_cli("a/m.tflite", "b/m.tflite", "-o", "out/", cwd=tmp_path)
    assert result.returncode == 2
    assert "refused b/m.tflite: same output out/m.onnx as a/m.tflite" in result.stderr
    model = onnx.load(tmp_path / "out" / "m.onnx")
    assert model.graph.input[0].name == "serving_default_dense_input:0"  # a's, not b's


def test_beside_each_input_without_an_output_directory(models, tmp_path):
    result = run_cli("models/hello.tflite", "models/conv.tflite", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (models / "hello.onnx").is_file() and (models / "conv.onnx").is_file()


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["models", "-o", "out.onnx"], "-o names a directory"),
        (["models", "--report"], "--report works on one model at a time"),
        (["models", "--encodings", "e.json"], "--encodings works on one model at a time"),
        (["models", "-o", "-"], "-o - writes one model to stdout"),
        (
            ["empty"],
            "is a directory with no .tflite or .task file in it (--recursive looks below it)",
        ),
    ],
)
def test_usage_errors_of_a_batch_are_one_line_and_write_nothing(args, fragment, models, tmp_path):
    (tmp_path / "empty").mkdir()
    before = snapshot(tmp_path)
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and fragment in result.stderr, result.stderr
    assert snapshot(tmp_path) == before


def test_a_folder_converts_to_static_channels_last_models_in_one_command(models, tmp_path):
    """Issue 17's done-when: a folder of TFLite models, static batch and channels-last, one
    command; every model written has static NHWC I/O and qonnx's channels-last Conv, and
    computes what the interpreter computes (its own --verify)."""
    (models / "deep" / "bad.tflite").unlink()
    out = tmp_path / "cl"
    result = run_cli(
        models, "-r", "--channels-last", "--batch-size", "1", "--verify", "-o", f"{out}/",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.onnx"))
    assert written == ["conv.onnx", "deep/depthwise.onnx", "hello.onnx"]
    for name in ("conv.onnx", "deep/depthwise.onnx"):
        model = onnx.load(out / name)
        (x,) = model.graph.input
        assert [d.dim_value for d in x.type.tensor_type.shape.dim][0] == 1
        assert all(d.HasField("dim_value") for d in x.type.tensor_type.shape.dim)
        convs = [n for n in model.graph.node if n.op_type == "Conv"]
        assert convs and {n.domain for n in convs} == {"qonnx.custom_op.channels_last"}


def test_models_past_the_timeout_are_reported_timed_out_and_leave_nothing(models, tmp_path):
    # no conversion finishes in a millisecond: each child stops itself and exits 4
    result = run_cli("models", "-o", "out/", "--timeout", "0.001", cwd=tmp_path)
    assert result.returncode == 4, result.stderr
    timed_out = [ln for ln in result.stderr.splitlines() if " timed out " in ln]
    assert len(timed_out) == 2, result.stderr
    assert all("not converted within --timeout 0.001 s" in ln for ln in timed_out)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_single_model_past_the_timeout_exits_4_without_output(tmp_path):
    result = run_cli(HELLO, "-o", "hello.onnx", "--timeout", "0.001", cwd=tmp_path)
    assert result.returncode == 4
    assert result.stderr.strip().splitlines()[-1] == (
        f"tflite2qonnx: error: {HELLO}: not converted within --timeout 0.001 s"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_generous_timeout_changes_nothing(tmp_path):
    result = run_cli(HELLO, "-o", "hello.onnx", "--timeout", "600", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert onnx.load(tmp_path / "hello.onnx").graph.node
