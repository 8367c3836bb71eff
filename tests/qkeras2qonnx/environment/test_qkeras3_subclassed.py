"""Subclassed qkeras-v3 models (Keras 3): in memory, nested in Functional and Sequential models,
and from a .keras file, converted exactly or refused naming what is missing.

The models are built, run (qkeras-v3's own outputs) and converted under qkeras-v3 by
``qkeras3_subclassed_models.py``; this process compares the files.
"""

import numpy as np
import onnx
import pytest
from hgq2_support import onnxruntime_forms
from qkeras3_support import assert_matches_reference, run_qkeras3
from qkeras_helpers import quant_nodes

pytestmark = pytest.mark.keras


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("qkeras3_subclassed")
    run_qkeras3("qkeras3_subclassed_models.py", root)
    return root


@pytest.mark.parametrize(
    "name",
    [
        "net",  # a subclassed model holding a subclassed block, in memory
        "net_file",  # the same saved as .keras and converted where its class is registered
        "functional",  # a subclassed block and a custom layer holding QKeras layers
        "sequential",  # a subclassed block
    ],
)
def test_subclassed_keras3_model_matches_qkeras3_in_qonnx_and_onnxruntime(made, name):
    converted = onnx.load(made / f"{name}.onnx")
    onnx.checker.check_model(converted)
    reference = dict(np.load(made / f"{name}.npz"))
    assert len(quant_nodes(converted)) == int(reference["quantizers"])
    assert_matches_reference(converted, reference)
    sessions = onnxruntime_forms(converted)
    for batch in (1, 8):
        x, want = reference[f"x{batch}"], reference[f"y{batch}"]
        for form, session in sessions.items():
            got = session.run(None, {converted.graph.input[0].name: x})[0]
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=form)


def test_keras3_subclassed_layers_convert_under_their_block_name(made):
    names = {n.name for n in quant_nodes(onnx.load(made / "functional.onnx"))}
    assert {"block/conv/kernel_quantizer", "dense/fc/kernel_quantizer"} <= names


def test_keras3_subclassed_model_only_called_is_refused_asking_for_build(made):
    """Keras 3 records no input shape for a subclassed model without a build of its own."""
    assert not (made / "only_called.onnx").exists()
    error = (made / "only_called.error.txt").read_text()
    assert "only_called" in error and "model.build(input_shape)" in error


def test_keras3_file_whose_layers_keras_left_unrestored_is_refused_naming_them(made):
    """Keras 3 reloads a subclassed model whose class has no build with its QDense unbuilt:
    converting would write fresh initial weights, so the layer is named instead."""
    assert not (made / "unbuilt_file.onnx").exists()
    error = (made / "unbuilt_file.error.txt").read_text()
    assert "layer(s) fc had no weights" in error


def test_keras3_subclassed_file_without_its_class_is_refused_naming_the_class(made):
    """Where the model's Python class is not registered (the command line, or a QKeras 0.9
    process, which runs Keras 3 files in a subprocess), Keras cannot load the file."""
    assert not (made / "net_unregistered.onnx").exists()
    error = (made / "net_unregistered.error.txt").read_text()
    assert "Keras cannot load this model" in error and "Could not locate class 'Net'" in error
