"""Regressions found by ``scripts/sweep_qkeras.py`` (seeded QKeras models of both
generations, compared with QKeras's own predict).

Keras 3 models are built, run and converted under qkeras-v3 by
``sweep_regression_models.py`` in a subprocess; this process only compares files.
"""

import numpy as np
import onnx
import pytest
from qkeras3_support import assert_matches_reference, run_qkeras3

pytestmark = pytest.mark.keras


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep3")
    run_qkeras3("sweep_regression_models.py", root)
    return root


def converted(made, name):
    error = made / f"{name}.error.txt"
    assert not error.exists(), error.read_text()
    model = onnx.load(made / f"{name}.inmemory.onnx")
    onnx.checker.check_model(model)
    return model


@pytest.mark.parametrize("name", ["plain_qbatchnorm", "conv_plain_qbatchnorm"])
def test_keras3_qbatchnorm_without_quantizers_matches_qkeras3_predict(made, name):
    assert_matches_reference(converted(made, name), dict(np.load(made / f"{name}.npz")))
