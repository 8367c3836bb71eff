"""Every saved form of a QKeras model converts to the same QONNX computation; Lambda layers
(stored code) are refused unless allowed; unusable inputs are InputErrors (exit code 2)."""

import shutil

import pytest
from qkeras_helpers import assert_matches_qkeras, count_quantizers, keras, set_seeded_weights

from qonnx_ingest.errors import ConversionError, InputError

pytestmark = pytest.mark.keras


@pytest.fixture(scope="module")
def model():
    from qkeras import QActivation, QDense, quantized_bits

    k = keras()
    inp = k.Input((5,), name="x")
    h = QDense(6, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="fc1")(inp)
    h = QActivation("quantized_relu(6,1)", name="relu1")(h)
    h = QDense(3, kernel_quantizer=quantized_bits(6, 0, alpha="auto"), name="fc2")(h)
    # A quantizer *object* in QActivation does not survive the JSON/.keras formats in QKeras
    # itself (it comes back as a dict), so saved models use the string form.
    h = QActivation("quantized_relu(4,1)", name="relu2")(h)
    model = k.Model(inp, h)
    set_seeded_weights(model, 31)
    return model


@pytest.fixture(scope="module")
def saved(model, tmp_path_factory):
    """The model in each format; the JSON weights in legacy HDF5 layout but named *.weights.h5."""
    root = tmp_path_factory.mktemp("saved")
    model.save(root / "model.h5")
    model.save(root / "model.keras")
    (root / "arch.json").write_text(model.to_json())
    model.save_weights(root / "legacy.h5")
    shutil.move(root / "legacy.h5", root / "legacy.weights.h5")
    return root


@pytest.mark.parametrize(
    "source, weights",
    [("model.h5", None), ("model.keras", None), ("arch.json", "legacy.weights.h5")],
)
def test_each_format_converts_exactly(model, saved, source, weights):
    import qkeras2qonnx

    onnx_model = qkeras2qonnx.convert(saved / source, weights=saved / weights if weights else None)
    assert_matches_qkeras(model, onnx_model, batch=8)
    assert sum(n.op_type == "Quant" for n in onnx_model.graph.node) == count_quantizers(model)


def test_saved_model_directory(model, tmp_path):
    import qkeras2qonnx

    model.save(tmp_path / "sm", save_format="tf")
    onnx_model = qkeras2qonnx.convert(tmp_path / "sm")
    assert_matches_qkeras(model, onnx_model, batch=8)


@pytest.mark.parametrize(
    "name, message",
    [
        ("missing.h5", "no such file"),
        ("arch.json", "--weights"),
        ("legacy.weights.h5", "holds only weights"),
    ],
)
def test_unusable_inputs(saved, name, message):
    import qkeras2qonnx

    with pytest.raises(InputError, match=message) as info:
        qkeras2qonnx.convert(saved / name)
    assert info.value.exit_code == 2


def test_not_a_model(tmp_path):
    import qkeras2qonnx

    path = tmp_path / "notes.txt"
    path.write_text("hello")
    with pytest.raises(InputError, match="unrecognized model file"):
        qkeras2qonnx.convert(path)


@pytest.fixture(scope="module")
def lambda_files(tmp_path_factory):
    from qkeras import QDense, quantized_bits

    k = keras()
    inp = k.Input((4,), name="x")
    h = QDense(3, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="fc")(inp)
    h = k.layers.Lambda(lambda t: t * 2.0, name="double")(h)
    model = k.Model(inp, h)
    set_seeded_weights(model, 32)
    root = tmp_path_factory.mktemp("lambda")
    model.save(root / "lambda.h5")
    (root / "lambda.json").write_text(model.to_json())
    model.save_weights(root / "lambda_weights.h5")
    return model, root


@pytest.mark.parametrize("source", ["lambda.h5", "lambda.json"])
def test_lambda_is_refused_before_loading(lambda_files, source):
    import qkeras2qonnx

    _, root = lambda_files
    with pytest.raises(ConversionError, match="Lambda layer 'double'.*allow_lambda"):
        qkeras2qonnx.convert(root / source, weights=root / "lambda_weights.h5")


def test_lambda_converts_when_allowed(lambda_files):
    import qkeras2qonnx

    model, root = lambda_files
    onnx_model = qkeras2qonnx.convert(root / "lambda.h5", allow_lambda=True)
    assert_matches_qkeras(model, onnx_model, batch=8)


def test_separable_and_transpose_layers_convert_from_h5(tmp_path):
    """Loading rebuilds QConv2DTranspose, whose QKeras code needs the alias that the converter's
    backend restores (``array_ops.stack``), and the separable layers' three quantizers."""
    from qkeras import (
        QConv2DTranspose,
        QSeparableConv1D,
        QSeparableConv2D,
        quantized_bits,
        quantized_relu,
    )

    import qkeras2qonnx
    from qkeras2qonnx.environment.backend import keras as converter_keras

    converter_keras()  # QKeras's QConv2DTranspose cannot even be built without the alias
    k = keras()
    inp = k.Input((6, 6, 2), name="x")
    h = QSeparableConv2D(
        4,
        3,
        padding="same",
        depthwise_quantizer=quantized_bits(6, 0, alpha="auto"),
        pointwise_quantizer=quantized_bits(6, 0, alpha="auto"),
        bias_quantizer=quantized_bits(8, 3, alpha=1),
        activation=quantized_relu(6, 2),
    )(inp)
    h = QConv2DTranspose(
        3,
        2,
        strides=2,
        kernel_quantizer=quantized_bits(6, 0, alpha="auto"),
        bias_quantizer=quantized_bits(8, 3, alpha=1),
        activation=quantized_relu(6, 2),
    )(h)
    h = k.layers.Reshape((144, 3))(h)
    h = QSeparableConv1D(
        2,
        3,
        strides=2,
        depthwise_quantizer=quantized_bits(6, 0, alpha="auto"),
        pointwise_quantizer=quantized_bits(6, 0, alpha="auto"),
        bias_quantizer=quantized_bits(8, 3, alpha=1),
        activation=quantized_relu(6, 2),
    )(h)
    model = k.Model(inp, h)
    set_seeded_weights(model, 33)
    model.save(tmp_path / "model.h5")
    onnx_model = qkeras2qonnx.convert(tmp_path / "model.h5")
    assert_matches_qkeras(model, onnx_model, batch=8)
    assert sum(n.op_type == "Quant" for n in onnx_model.graph.node) == count_quantizers(model)


@pytest.fixture
def archive_naming_a_module(model, tmp_path, monkeypatch):
    """A .keras archive whose config names a module that leaves a marker when imported."""
    import json
    import zipfile

    monkeypatch.syspath_prepend(str(tmp_path))
    marker = tmp_path / "imported"
    (tmp_path / "planted_module.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    model.save(tmp_path / "clean.keras")
    with zipfile.ZipFile(tmp_path / "clean.keras") as src:
        files = {name: src.read(name) for name in src.namelist()}
    config = json.loads(files["config.json"])  # the model object's own module is imported
    config.update(module="planted_module", class_name="Planted", registered_name="Planted")
    files["config.json"] = json.dumps(config).encode()
    with zipfile.ZipFile(tmp_path / "planted.keras", "w") as dst:
        for name, data in files.items():
            dst.writestr(name, data)
    return tmp_path / "planted.keras", marker


def test_keras_archive_naming_a_foreign_module_is_refused_before_import(archive_naming_a_module):
    """tf_keras imports a config's ``module`` even in safe mode: that module never loads."""
    import qkeras2qonnx

    path, marker = archive_naming_a_module
    with pytest.raises(InputError, match="module 'planted_module' .*'Planted'.*allow-lambda"):
        qkeras2qonnx.convert(path)
    assert not marker.exists()


def test_allow_lambda_lets_keras_import_the_named_module(archive_naming_a_module):
    """The opt-in is real: with it, tf_keras imports the module (then finds no such class)."""
    import qkeras2qonnx

    path, marker = archive_naming_a_module
    with pytest.raises(InputError, match="Keras cannot load"):
        qkeras2qonnx.convert(path, allow_lambda=True)
    assert marker.exists()


def test_load_failure_names_the_root_cause(tmp_path):
    """Keras summarizes a layer's error on its first line ("Exception encountered when calling
    layer ..."); the reason (here a quantizer's bits given as text) must be in the message."""
    import json

    from qkeras import QDense, quantized_bits

    from qkeras2qonnx.environment.load import load_model

    k = keras()
    inp = k.Input((4,))
    model = k.Model(inp, QDense(2, kernel_quantizer=quantized_bits(4, 0, alpha=1), name="qd")(inp))
    config = json.loads(model.to_json())
    for layer in config["config"]["layers"]:
        if layer["class_name"] == "QDense":
            layer["config"]["kernel_quantizer"]["config"]["bits"] = "eight"
    (tmp_path / "bad.json").write_text(json.dumps(config))
    model.save_weights(tmp_path / "bad_weights.h5")
    with pytest.raises(InputError) as info:
        load_model(tmp_path / "bad.json", weights=tmp_path / "bad_weights.h5")
    message = str(info.value)
    assert "\n" not in message
    assert "root cause: TypeError: unsupported operand type(s) for -: 'str' and 'bool'" in message
