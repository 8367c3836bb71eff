"""Hostile inputs for ``qkeras2qonnx``: one table, run in-process through ``main(argv)``.

Every failing row asserts the exit code (2: unusable input or usage), one stderr line naming the
problem and the file or layer, no traceback (no ``--verbose``), and that nothing was written: no
output, no staging directory left behind, the inputs untouched. A Keras model without QKeras
layers is not bad input: it converts. The read-only output directory row runs the real command
in a subprocess (as root without CAP_DAC_OVERRIDE, which would ignore the mode bits).

Lambda layers carry Python bytecode that Keras runs while it rebuilds the model; the Lambda rows
use a function that creates a marker file, so "refused before loading" is checked by the marker's
absence, at the top level and inside a nested model, in .h5, .keras and .json.

Related rows elsewhere: tests/qkeras2qonnx/test_qkeras_cli.py (corrupt .h5, unsupported
quantizer and layer: exit 1), test_qkeras_load.py (the same refusals through the Python API).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import onnx
import pytest
from qkeras_helpers import assert_matches_qkeras, keras, set_seeded_weights

from qkeras2qonnx.cli import main
from support import assert_cli_fails, snapshot

pytestmark = pytest.mark.keras

PROG = "qkeras2qonnx"


def assert_fails(capsys, argv, code: int, *fragments: str) -> str:
    return assert_cli_fails(capsys, main, PROG, argv, code, *fragments)


def marking_lambda(marker: Path):
    """A Lambda function that creates ``marker`` when it runs (the path is a constant of its
    code object, which Keras marshals into the saved model)."""
    source = f"lambda t: t + 0.0 * float(__import__('pathlib').Path({str(marker)!r}).touch() or 0)"
    return eval(source)  # noqa: S307 (a literal built right here)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """(plain Keras model, directory of saved files). Calling a Lambda while building runs it,
    so the markers are removed once everything is saved."""
    k = keras()
    root = tmp_path_factory.mktemp("bad_input")
    inp = k.Input((5,), name="x")
    h = k.layers.Dense(4, activation="relu", name="fc1")(inp)
    plain = k.Model(inp, k.layers.Dense(3, name="fc2")(h))
    set_seeded_weights(plain, 7)
    plain.save(root / "plain.h5")
    (root / "plain.json").write_text(plain.to_json())

    inp = k.Input((5,), name="x")
    h = k.layers.Lambda(marking_lambda(root / "lambda.ran"), name="marker")(inp)
    top = k.Model(inp, k.layers.Dense(3, name="fc")(h))
    top.save(root / "lambda.h5")
    (root / "lambda.json").write_text(top.to_json())
    top.save_weights(root / "lambda_weights.h5")

    inner = k.Sequential(
        [k.layers.Dense(4, name="inner_fc"), k.layers.Lambda(marking_lambda(root / "nested.ran"))],
        name="inner",
    )
    inp = k.Input((5,), name="x")
    nested = k.Model(inp, k.layers.Dense(3, name="fc")(inner(inp)))
    nested.save(root / "nested_lambda.h5")
    nested.save(root / "nested_lambda.keras")

    from qkeras import QActivation, quantized_bits

    inp = k.Input((5,), name="x")
    refused = QActivation(quantized_bits(8, 0, alpha="auto"), name="auto_act")(inp)
    k.Model(inp, refused).save(root / "auto.h5")
    with h5py.File(root / "unknown_layer.h5", "w") as f:
        f.attrs["model_config"] = json.dumps({"class_name": "NoSuchLayer", "config": {}})
    for marker in root.glob("*.ran"):
        marker.unlink()
    return plain, root


def _empty(tmp, root):
    (tmp / "empty.h5").write_bytes(b"")
    return [tmp / "empty.h5"]


def _random(tmp, root):
    data = np.random.default_rng(3).integers(0, 256, 4096, dtype=np.uint8).tobytes()
    (tmp / "noise.h5").write_bytes(data)
    return [tmp / "noise.h5"]


def _hdf5_not_keras(tmp, root):
    with h5py.File(tmp / "data.h5", "w") as f:
        f["random"] = np.random.default_rng(4).normal(size=(8, 8))
    return [tmp / "data.h5"]


def _directory(tmp, root):
    """Not a SavedModel: a directory with a stray file in it."""
    (tmp / "folder").mkdir()
    (tmp / "folder" / "notes.txt").write_text("hello\n")
    return [tmp / "folder"]


def _copied(name: str):
    def make(tmp, root):
        shutil.copy(root / name, tmp / name)
        return tmp / name

    return make


def _output_is_the_input(tmp, root):
    source = _copied("plain.h5")(tmp, root)
    return [source, "-o", source]


def _output_directory_missing(tmp, root):
    return [_copied("plain.h5")(tmp, root), "-o", tmp / "absent" / "out.onnx"]


# name: (make(tmp, root) -> argv, exit code, fragments; marker that must not appear)
ROWS = {
    "missing_path": (lambda tmp, root: [tmp / "nope.h5"], 2, ["nope.h5", "no such file"]),
    "directory_not_a_saved_model": (_directory, 2, ["folder", "not a Keras SavedModel"]),
    "empty_file": (_empty, 2, ["empty.h5", "unrecognized model file"]),
    "random_bytes": (_random, 2, ["noise.h5", "unrecognized model file"]),
    "hdf5_without_a_keras_model": (_hdf5_not_keras, 2, ["data.h5", "HDF5 file without a Keras"]),
    "json_without_weights": (
        lambda tmp, root: [_copied("plain.json")(tmp, root)],
        2,
        ["plain.json", "--weights"],
    ),
    "output_is_the_input": (_output_is_the_input, 2, ["plain.h5", "refusing to overwrite"]),
    "output_directory_missing": (
        _output_directory_missing,
        2,
        ["absent", "output directory does not exist"],
    ),
    "lambda_h5": (
        lambda tmp, root: [_copied("lambda.h5")(tmp, root)],
        2,
        ["lambda.h5", "Lambda layer 'marker'", "--allow-lambda"],
    ),
    "lambda_json": (
        lambda tmp, root: [
            _copied("lambda.json")(tmp, root),
            "--weights",
            _copied("lambda_weights.h5")(tmp, root),
        ],
        2,
        ["lambda.json", "Lambda layer 'marker'", "--allow-lambda"],
    ),
    "lambda_in_a_nested_model_h5": (
        lambda tmp, root: [_copied("nested_lambda.h5")(tmp, root)],
        2,
        ["nested_lambda.h5", "Lambda layer", "--allow-lambda"],
    ),
    "lambda_in_a_nested_model_keras": (
        lambda tmp, root: [_copied("nested_lambda.keras")(tmp, root)],
        2,
        ["nested_lambda.keras", "Lambda layer", "--allow-lambda"],
    ),
}


@pytest.mark.parametrize("row", list(ROWS))
def test_bad_input(row, models, tmp_path, capsys):
    _, root = models
    make, code, fragments = ROWS[row]
    argv = make(tmp_path, root)
    before = snapshot(tmp_path)
    assert_fails(capsys, argv, code, *fragments)
    assert snapshot(tmp_path) == before  # no output, no staging leftovers, inputs untouched
    assert not list(root.glob("*.ran")), "a Lambda function ran"


def test_allow_lambda_loads_and_runs_the_stored_code(models, tmp_path, capsys):
    """The counterpart of the Lambda rows: with the flag the model loads (its code runs)."""
    _, root = models
    source = shutil.copy(root / "nested_lambda.h5", tmp_path / "nested_lambda.h5")
    try:
        assert main([str(source), "--allow-lambda"]) == 0
        assert (root / "nested.ran").exists()
    finally:
        (root / "nested.ran").unlink(missing_ok=True)
    assert "wrote" in capsys.readouterr().out
    onnx.checker.check_model(onnx.load(tmp_path / "nested_lambda.onnx"))


def test_keras_model_without_qkeras_layers_converts(models, tmp_path, capsys):
    """A float Keras model is a valid input: it converts, with no quantizers, computes what
    Keras computes, and one warning line says that nothing was quantized."""
    plain, root = models
    source = shutil.copy(root / "plain.h5", tmp_path / "plain.h5")
    assert main([str(source)]) == 0
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "no quantizer: the ONNX model is float" in err, err
    assert out.startswith(f"{PROG}: wrote {tmp_path / 'plain.onnx'} (") and "0 quantizers" in out
    converted = onnx.load(tmp_path / "plain.onnx")
    onnx.checker.check_model(converted)
    assert_matches_qkeras(plain, converted, batch=8)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.h5", "plain.onnx"]


def run_command(*args, prefix=()) -> subprocess.CompletedProcess:
    # TensorFlow's own defaults, not the test session's quieter ones
    env = {k: v for k, v in os.environ.items() if not k.startswith("TF_")}
    return subprocess.run(
        [*prefix, sys.executable, "-m", PROG, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def assert_one_line(result, code: int, start: str) -> None:
    assert result.returncode == code, result.stderr
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr  # TensorFlow's C++ start-up is quiet
    assert result.stderr.startswith(f"{PROG}: error: {start}"), result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "name, code, start",
    [
        ("unknown_layer.h5", 2, "{source}: Keras cannot load this model: ValueError: Unknown"),
        ("auto.h5", 1, "auto_act activation: quantized_bits(8,0"),
    ],
)
def test_failures_after_tensorflow_starts_through_the_real_command(
    models, tmp_path, name, code, start
):
    """Once TensorFlow is imported and the model loaded, the command's stderr is still one
    line: TensorFlow's C++ start-up notices do not reach it."""
    _, root = models
    source = shutil.copy(root / name, tmp_path / name)
    before = snapshot(tmp_path)
    assert_one_line(run_command(source), code, start.format(source=source))
    assert snapshot(tmp_path) == before


def test_output_directory_not_writable_through_the_real_command(models, tmp_path):
    """The subprocess row: the exit status the shell sees. Root ignores mode bits, so as root
    the command runs without the capabilities that override them."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: cannot drop CAP_DAC_OVERRIDE")
        prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner"]
    _, root = models
    source = shutil.copy(root / "plain.h5", tmp_path / "plain.h5")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        before = snapshot(tmp_path)
        result = run_command(source, "-o", locked / "out.onnx", prefix=prefix)
        assert_one_line(result, 2, f"{locked}: output directory is not writable")
        assert snapshot(tmp_path) == before
    finally:
        locked.chmod(0o755)
