"""What the consumers of our files meet, on every corpus TFLite model: a default onnxruntime
session loads the ``--format qcdq`` file."""

from __future__ import annotations

import warnings

import onnx
import onnxruntime as ort
import pytest

import tflite2qonnx
from qonnx_ingest.errors import ConversionWarning
from support import CORPUS, requires_corpus

pytestmark = requires_corpus
MODELS = sorted(p.stem for p in (CORPUS / "tflite").glob("*.tflite")) if CORPUS.is_dir() else []
# MoveNet's default conversion binds one Concat to int32 and float (its keypoint decoding):
# onnxruntime refuses it in any form until that is fixed (README corpus table, MoveNet row)
MIXED_DTYPES = "Concat) bound to different types"


@pytest.fixture(scope="module")
def default_conversions() -> dict[str, onnx.ModelProto]:
    """Each corpus model's default conversion, made once for the module."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConversionWarning)
        return {name: tflite2qonnx.convert(CORPUS / "tflite" / f"{name}.tflite") for name in MODELS}


@pytest.mark.parametrize("name", MODELS)
def test_qcdq_file_loads_in_a_default_onnxruntime_session(name, default_conversions):
    from qonnx_ingest.qcdq import to_qcdq

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConversionWarning)  # the tie-rounding warning
        qcdq = to_qcdq(default_conversions[name])
    try:
        ort.InferenceSession(qcdq.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as exc:  # only MoveNet's known dtype mix may stop it
        assert name == "coral__movenet_single_pose_lightning_ptq" and MIXED_DTYPES in str(exc), exc
