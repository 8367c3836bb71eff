"""Which QKeras generation a model is routed to (``qkeras2qonnx.environment.flavour``), decided
from the file's content or the model's class, and the in-memory route to a subprocess."""

import shutil

import h5py
import numpy as np
import pytest
from qkeras3_support import made_models
from qkeras_helpers import keras

from qkeras2qonnx.environment import flavour
from qonnx_ingest.execute import execute_qonnx

pytestmark = pytest.mark.keras


@pytest.fixture(scope="module")
def keras2_files(tmp_path_factory):
    from qkeras import QDense, quantized_bits

    k = keras()
    root = tmp_path_factory.mktemp("keras2")
    inp = k.Input((4,), name="x")
    model = k.Model(inp, QDense(3, kernel_quantizer=quantized_bits(6, 0, alpha=1))(inp))
    model.save(root / "model.h5")
    model.save(root / "model.keras")
    (root / "arch.json").write_text(model.to_json())
    return model, root


@pytest.mark.parametrize("name", ["model.h5", "model.keras", "arch.json"])
def test_files_written_by_tf_keras_need_qkeras09(keras2_files, name):
    _, root = keras2_files
    assert flavour.file_flavour(root / name) == flavour.KERAS2


def test_models_choose_by_their_keras_class(keras2_files):
    import keras as keras3

    model, _ = keras2_files
    assert flavour.model_flavour(model) == flavour.KERAS2
    inp = keras3.Input((2,))
    assert flavour.model_flavour(keras3.Model(inp, keras3.layers.Dense(1)(inp))) == flavour.KERAS3


@pytest.fixture(scope="module")
def keras3_files(tmp_path_factory):
    return made_models(tmp_path_factory)


def test_hdf5_naming_a_qkeras3_only_layer_needs_keras3(keras3_files, tmp_path):
    """As the QDenseBatchnorm .h5 files of older Keras-2 forks: the Keras version attribute
    says 2, the layer exists only in qkeras-v3."""
    import qkeras2qonnx

    path = tmp_path / "fork.h5"
    shutil.copy(keras3_files / "dense_bn.h5", path)
    with h5py.File(path, "r+") as f:
        f.attrs["keras_version"] = "2.13.1"
    assert flavour.file_flavour(path) == flavour.KERAS3
    converted = qkeras2qonnx.convert(path)
    ref = np.load(keras3_files / "dense_bn.npz")
    got = execute_qonnx(converted, {converted.graph.input[0].name: ref["x8"]})
    np.testing.assert_allclose(got[converted.graph.output[0].name], ref["y8"], rtol=1e-6)


def test_in_memory_keras3_model_converts_in_a_subprocess_from_a_qkeras09_process(tmp_path):
    import keras as keras3

    import qkeras2qonnx

    assert flavour.process_flavour() == flavour.KERAS2
    inp = keras3.Input((5,), name="x")
    model = keras3.Model(inp, keras3.layers.Dense(3, activation="relu", name="fc")(inp))
    rng = np.random.default_rng(5)
    model.set_weights([rng.normal(0, 0.5, w.shape) for w in model.get_weights()])
    converted = qkeras2qonnx.convert(model, tmp_path / "plain.onnx")
    x = np.random.default_rng(6).uniform(-1, 1, (8, 5)).astype(np.float32)
    got = execute_qonnx(converted, {converted.graph.input[0].name: x})
    expected = np.asarray(model(x))
    np.testing.assert_allclose(got[converted.graph.output[0].name], expected, rtol=1e-6, atol=1e-6)
    assert (tmp_path / "plain.onnx").exists()


def test_from_keras_refuses_a_keras3_model_in_a_qkeras09_process():
    """from_keras cannot hand a model to a subprocess (convert can): a clear error, not a
    failure deep inside the conversion."""
    import keras as keras3

    import qkeras2qonnx
    from qonnx_ingest.errors import ConversionError

    inp = keras3.Input((2,))
    model = keras3.Model(inp, keras3.layers.Dense(1)(inp))
    with pytest.raises(ConversionError, match="needs qkeras-v3 on Keras 3.*already imported"):
        qkeras2qonnx.from_keras(model)
