"""MediaPipe .task bundles (a zip of .tflite models, nested bundles and non-model files):
``tflite2qonnx BUNDLE.task -o DIR/`` converts each model into DIR/BUNDLE/, ``--member NAME``
one of them, a folder's bundles are found too, and ``convert`` names the member option.

No real .task file can be fetched here: the bundle is built from small models (the example
int8 MLP, hand-built float ones), with a metadata file, a label file, a truncated model and
a nested bundle, as MediaPipe's face landmarker and gesture recognizer bundles are laid out.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hand_built import broadcast_to, relu_0_to_1
from litert_compare import compare, reference_interpreter

import tflite2qonnx
from qonnx_ingest.errors import InputError
from support import ROOT, run_module, snapshot
from tflite2qonnx.bundle import members, output_name
from tflite2qonnx.reader import read_model

MODELS = [
    "face_detector.tflite",
    "face_landmarks_detector.tflite",
    "broken.tflite",
    "hand_landmarker.task/hand_detector.tflite",
]
GOOD = [m for m in MODELS if m != "broken.tflite"]


def _zip(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def contents() -> dict[str, bytes]:
    """Each model member's bytes, as the zip holds them (read back with zipfile alone)."""
    return {
        "face_detector.tflite": (ROOT / "examples" / "int8_dense.tflite").read_bytes(),
        "face_landmarks_detector.tflite": relu_0_to_1(),
        "broken.tflite": relu_0_to_1()[:200],  # truncated
        "hand_landmarker.task/hand_detector.tflite": broadcast_to(),
    }


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, contents) -> Path:
    nested = _zip({"hand_detector.tflite": contents["hand_landmarker.task/hand_detector.tflite"]})
    path = tmp_path_factory.mktemp("bundle") / "face.task"
    path.write_bytes(
        _zip(
            {
                "face_detector.tflite": contents["face_detector.tflite"],
                "face_landmarks_detector.tflite": contents["face_landmarks_detector.tflite"],
                "geometry_pipeline_metadata.binarypb": b"\x0a\x03abc",
                "labels.txt": b"left\nright\n",
                "broken.tflite": contents["broken.tflite"],
                "hand_landmarker.task": nested,
            }
        )
    )
    return path


def test_members_are_the_models_only(bundle: Path) -> None:
    assert members(bundle) == MODELS


@pytest.mark.parametrize("member", GOOD)
def test_each_member_converts_and_agrees_with_the_interpreter(bundle, contents, member) -> None:
    model = tflite2qonnx.convert(bundle, member=member)
    assert model.graph.name == Path(member).stem
    pairs = compare(model, reference_interpreter(contents[member]), n_inputs=3)
    assert pairs
    for pair in pairs:
        if pair.grid is not None:  # the int8 MLP: within a step of the interpreter's grid
            assert pair.steps().max() <= 1
        else:
            assert pair.float_error_ok()


def test_convert_without_member_names_the_option_in_one_line(bundle: Path) -> None:
    with pytest.raises(InputError) as caught:
        tflite2qonnx.convert(bundle)
    message = str(caught.value)
    assert "\n" not in message and "member=NAME" in message and "--member" in message
    assert all(m in message for m in MODELS)


def test_a_member_that_is_no_model_is_refused_listing_the_models(bundle: Path) -> None:
    with pytest.raises(InputError, match="no model member 'labels.txt'; its models: face_det"):
        tflite2qonnx.convert(bundle, member="labels.txt")


def test_the_broken_member_is_refused_naming_bundle_and_member(bundle: Path) -> None:
    with pytest.raises(InputError, match=r"face\.task:broken\.tflite.*looks truncated"):
        tflite2qonnx.convert(bundle, member="broken.tflite")


def test_reader_says_a_bundle_is_not_one_model(bundle: Path) -> None:
    with pytest.raises(InputError, match="is a MediaPipe .task bundle"):
        read_model(bundle)


def test_cli_converts_each_member_and_refuses_the_broken_one_alone(bundle, tmp_path) -> None:
    before = snapshot(bundle.parent)
    result = run_module("tflite2qonnx", bundle, "-o", "out/", "--verify", cwd=tmp_path)
    assert result.returncode == 2, result.stderr  # the worst: the refused member
    lines = result.stdout.splitlines()
    converted = [ln for ln in lines if ln.startswith("tflite2qonnx: converted ")]
    assert len(converted) == 3 and all(ln.endswith("; verify: ok") for ln in converted)
    assert f"{bundle}:hand_landmarker.task/hand_detector.tflite -> out/face/hand_landmarker/" in (
        result.stdout
    )
    assert not [ln for ln in lines if ln.startswith("tflite2qonnx: refused ")]
    refused = [ln for ln in result.stderr.splitlines() if ln.startswith("tflite2qonnx: refused ")]
    assert refused == [
        f"tflite2qonnx: refused {bundle}:broken.tflite: the file looks truncated (200 bytes; "
        "the model refers to byte 207): copy or download it again"
    ]
    written = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "out").rglob("*.onnx"))
    assert written == [
        "out/face/face_detector.onnx",
        "out/face/face_landmarks_detector.onnx",
        "out/face/hand_landmarker/hand_detector.onnx",
    ]  # nothing for the broken member
    assert snapshot(bundle.parent) == before  # the bundle untouched


def test_cli_member_option_converts_that_member_alone(bundle, tmp_path) -> None:
    result = run_module(
        "tflite2qonnx", bundle, "--member", "face_landmarks_detector.tflite", "-o", "one/",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("tflite2qonnx: wrote one/face_landmarks_detector.onnx (")
    assert [p.name for p in (tmp_path / "one").iterdir()] == ["face_landmarks_detector.onnx"]


def test_folder_mode_finds_bundles_beside_models(bundle, tmp_path) -> None:
    """``DIR/ -r``: a bundle in a subdirectory expands into its models under out/sub/face/;
    --member is for one bundle and is refused with several models."""
    folder = tmp_path / "models"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "face.task").write_bytes(bundle.read_bytes())
    (folder / "mlp.tflite").write_bytes((ROOT / "examples" / "int8_dense.tflite").read_bytes())
    result = run_module(
        "tflite2qonnx", "models", "-r", "-o", "out/", "-j", "2", "--json", cwd=tmp_path
    )
    assert result.returncode == 2, result.stderr
    statuses = {m["input"]: m["status"] for m in json.loads(result.stdout)["models"]}
    bundled = "models/sub/face.task:"
    assert statuses == {"models/mlp.tflite": "converted"} | {
        bundled + m: "converted" if m in GOOD else "refused" for m in MODELS
    }
    written = sorted(
        str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*.onnx")
    )
    assert written == [
        "mlp.onnx",
        "sub/face/face_detector.onnx",
        "sub/face/face_landmarks_detector.onnx",
        "sub/face/hand_landmarker/hand_detector.onnx",
    ]
    refused = run_module("tflite2qonnx", "models", "--member", "x.tflite", cwd=tmp_path)
    assert refused.returncode == 2 and "--member works on one model at a time" in refused.stderr


def test_member_of_a_plain_model_is_refused() -> None:
    with pytest.raises(InputError, match="names a model inside a .task bundle; this is none"):
        tflite2qonnx.convert(ROOT / "examples" / "int8_dense.tflite", member="a.tflite")


def test_convert_and_verify_checks_the_member(bundle: Path) -> None:
    _, figures = tflite2qonnx.convert_and_verify(bundle, member="face_detector.tflite")
    assert figures.passed and np.isfinite(figures.as_dict()["outputs"][0]["max_abs_error"])


def test_member_output_names_stay_inside_the_bundle_directory() -> None:
    assert output_name("hand_landmarker.task/hand_detector.tflite") == (
        "hand_landmarker/hand_detector.tflite"
    )
    assert output_name("../../etc/evil.tflite") == "etc/evil.tflite"
    assert output_name("/abs/model.tflite") == "abs/model.tflite"


def test_a_bundle_without_models_is_refused_in_one_line(tmp_path) -> None:
    empty = tmp_path / "labels_only.task"
    empty.write_bytes(_zip({"labels.txt": b"a\n"}))
    with pytest.raises(InputError, match="is a .task bundle .zip. with no .tflite model in it"):
        tflite2qonnx.convert(empty)
    result = run_module("tflite2qonnx", empty, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "with no .tflite model in it" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labels_only.task"]
