"""qkeras2qonnx folder mode with reused workers: each worker process imports TensorFlow once
and converts many models, writing the same bytes as a process of its own; a .json with its
weights file is one model; a crash or a hang still costs only its own model."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from qonnx_ingest.cli.batch import expand
from qonnx_ingest.cli.options import ModelScan
from support import CORPUS, requires_corpus, run_module

QKERAS = CORPUS / "qkeras"
JET = QKERAS / "part4_jettagger_KERAS_check_best_model.h5"
PAIRS = {".json": ("_weights.h5", ".weights.h5")}

# in a batch worker only (not the batch itself, which reads files to route them): a model
# whose name says "crash" segfaults the worker, one that says "hang" blocks it in a way the
# in-process --timeout cannot interrupt, so the batch must kill it
FAULTS = """
import os, signal, sys, time

def _hook(event, args):
    if event != "open" or not isinstance(args[0], str):
        return
    if not sys.argv[0].endswith("batch_worker.py"):
        return
    name = os.path.basename(args[0])
    if "crash" in name:
        os.kill(os.getpid(), signal.SIGSEGV)
    if "hang" in name:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGINT})
        time.sleep(600)

sys.addaudithook(_hook)
"""


def test_a_json_with_its_weights_file_is_one_model_and_a_lone_json_none(tmp_path):
    for name in ("a.json", "a_weights.h5", "b.json", "b.weights.h5", "lone.json", "c.h5"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "orphan_weights.h5").write_text("")
    scan = ModelScan((".h5", ".keras"), pairs=PAIRS, pair_option="--weights")
    found = [relative for _, relative in expand([str(tmp_path)], scan, False)]
    assert found == ["a.json", "b.json", "c.h5", "orphan_weights.h5"]
    assert scan.companion_args(tmp_path / "b.json") == ["--weights", str(tmp_path / "b.weights.h5")]
    assert scan.companion_args(tmp_path / "lone.json") == []


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory):
    """The corpus QKeras folder, --jobs 2, --json: (exit code, document, output folder)."""
    out = tmp_path_factory.mktemp("workers") / "out"
    done = run_module(
        "qkeras2qonnx", QKERAS, "-o", f"{out}/", "--jobs", "2", "--json", cwd=out.parent
    )
    return done.returncode, json.loads(done.stdout), out


@requires_corpus
@pytest.mark.keras
def test_the_corpus_folder_converts_with_each_worker_reused_for_several_models(corpus_run):
    code, document, out = corpus_run
    assert code == 0, document
    models = document["models"]
    names = [Path(m["input"]).name for m in models]
    # 10 full models, a SavedModel, and two .json architectures with their weights files
    assert len(models) == 13 and document["summary"]["converted"] == 13
    assert "qkeras_3layer.json" in names and "qkeras_mnist_cnn.json" in names
    assert not any(name.endswith("_weights.h5") for name in names)
    per_worker: dict[int, int] = {}
    for m in models:
        per_worker[m["pid"]] = per_worker.get(m["pid"], 0) + 1
    assert len(per_worker) <= 2 and all(n > 1 for n in per_worker.values()), per_worker
    assert sorted(p.name for p in out.iterdir()) == sorted(Path(n).stem + ".onnx" for n in names)


@requires_corpus
@pytest.mark.keras
@pytest.mark.parametrize(
    "model,extra",
    [
        ("quantized_cnn.h5", ()),
        ("qkeras_mnist_cnn.json", ("--weights", QKERAS / "qkeras_mnist_cnn_weights.h5")),
    ],
)
def test_a_reused_worker_writes_the_bytes_a_process_of_its_own_writes(
    corpus_run, model, extra, tmp_path
):
    _, document, out = corpus_run
    by_name = {Path(m["input"]).name: m for m in document["models"]}
    # the first two models in the folder start the two workers: these two came to a worker
    # after another model, so whatever it kept from that one would show here
    assert sum(m["pid"] == by_name[model]["pid"] for m in document["models"]) > 1
    single = tmp_path / "single.onnx"
    done = run_module("qkeras2qonnx", QKERAS / model, *extra, "-o", single, "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (out / (Path(model).stem + ".onnx")).read_bytes() == single.read_bytes()


@requires_corpus
@pytest.mark.keras
def test_a_crash_and_a_hang_cost_their_own_model_and_fresh_workers_go_on(tmp_path):
    site, models, out = tmp_path / "site", tmp_path / "models", tmp_path / "out"
    site.mkdir()
    models.mkdir()
    (site / "sitecustomize.py").write_text(FAULTS)
    for name in ("a.h5", "b.h5", "c_crash.h5", "d_hang.h5", "e.h5"):
        shutil.copyfile(JET, models / name)
    args = (models, "-o", f"{out}/", "--jobs", "1", "--timeout", "5", "--json")
    done = run_module("qkeras2qonnx", *args, cwd=tmp_path, path_first=[site])
    document = json.loads(done.stdout)
    got = {Path(m["input"]).name: m for m in document["models"]}
    assert done.returncode == 4  # the worst: timed out
    assert [got[n]["status"] for n in sorted(got)] == [
        *("converted", "converted", "crashed", "timed out", "converted")
    ]
    assert "signal 11" in got["c_crash.h5"]["message"]
    assert "killed" in got["d_hang.h5"]["message"]
    first = got["a.h5"]["pid"]
    assert got["b.h5"]["pid"] == first == got["c_crash.h5"]["pid"]  # one worker, reused
    # the crashed worker was replaced, and the killed one too
    assert len({first, got["d_hang.h5"]["pid"], got["e.h5"]["pid"]}) == 3
    assert sorted(p.name for p in out.iterdir()) == ["a.onnx", "b.onnx", "e.onnx"]
    # b, second in a reused worker, is e, first in a fresh one (but for the graph's name)
    assert _unnamed(out / "b.onnx") == _unnamed(out / "e.onnx")


def _unnamed(path: Path) -> bytes:
    """The model's bytes with its graph name (the input file's stem) left out."""
    import onnx

    model = onnx.load(str(path))
    assert model.graph.name == path.stem
    model.graph.name = ""
    return model.SerializeToString()


KERAS3_MODEL = """
import sys
from qkeras2qonnx.environment import flavour
flavour.enter(flavour.KERAS3)
import keras
from qkeras import QActivation, QDense, quantized_bits
x = keras.Input((6,), name="x")
h = QDense(4, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="qfc")(x)
keras.Model(x, QActivation("quantized_relu(4,1)", name="act")(h)).save(sys.argv[1])
"""


@requires_corpus
@pytest.mark.keras
def test_models_of_both_qkeras_generations_go_to_workers_of_their_own(tmp_path):
    import subprocess
    import sys

    from qkeras2qonnx.environment import flavour

    # the README's test command installs qkeras-v3 (scripts/setup.sh): missing, this fails
    assert flavour.qkeras3_dir() is not None, "qkeras-v3 is missing: run scripts/setup.sh"
    models, out = tmp_path / "models", tmp_path / "out"
    models.mkdir()
    env = flavour.qkeras3_environment()
    made = subprocess.run(
        [sys.executable, "-c", KERAS3_MODEL, str(models / "b3.keras")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0, made.stderr[-2000:]
    shutil.copyfile(JET, models / "a.h5")
    shutil.copyfile(JET, models / "c.h5")
    args = (models, "-o", f"{out}/", "--jobs", "1", "--json")
    done = run_module("qkeras2qonnx", *args, cwd=tmp_path)
    got = {Path(m["input"]).name: m for m in json.loads(done.stdout)["models"]}
    assert done.returncode == 0, got
    assert [got[n]["status"] for n in ("a.h5", "b3.keras", "c.h5")] == ["converted"] * 3
    # one worker at a time (--jobs 1): the Keras 3 model ends the first, needs one of its own
    assert len({got[n]["pid"] for n in got}) == 3
    assert _unnamed(out / "a.onnx") == _unnamed(out / "c.onnx")
    single = tmp_path / "single.onnx"
    done = run_module("qkeras2qonnx", models / "b3.keras", "-o", single, "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (out / "b3.onnx").read_bytes() == single.read_bytes()


@pytest.mark.keras
def test_ctrl_c_stops_the_reused_workers_and_prints_what_finished_and_what_did_not(tmp_path):
    """As for processes of their own (tflite2qonnx's test): the models a reused worker had not
    reached are "not run", the one it was converting "interrupted", and nothing "crashed"."""

    from support import EXAMPLES, ctrl_c_after_first_line

    models = tmp_path / "models"
    models.mkdir()
    for k in range(4):
        shutil.copyfile(EXAMPLES / "qkeras_jet_dnn.h5", models / f"m{k}.h5")
    first, rest, err, code = ctrl_c_after_first_line(
        "qkeras2qonnx", ["models", "-o", "out/"], tmp_path, timeout=300
    )
    assert first.startswith("qkeras2qonnx: converted models/m0.h5"), (first, err)
    assert code == 130, err
    assert "crashed" not in rest + err and "Traceback" not in err
    table = {m[1]: int(m[2]) for m in re.finditer(r"^(\w[\w ]*?) +(\d+) ", rest, re.M)}
    unfinished = table.get("interrupted", 0) + table.get("not run", 0)
    assert table["converted"] + unfinished == table["total"] == 4 and unfinished >= 1
    assert f"qkeras2qonnx: interrupted: {unfinished} of 4 models not converted" in err
    assert len(list((tmp_path / "out").iterdir())) == table["converted"]
