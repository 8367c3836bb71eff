"""Regressions found by ``scripts/sweep/sweep_qkeras.py`` (seeded QKeras models of both
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


def test_keras3_float_activation_functions_match_qkeras3_predict(made):
    model = converted(made, "float_functions")
    assert {"Clip", "Min", "Max"} & {n.op_type for n in model.graph.node}  # the functions' clip
    assert_matches_reference(model, dict(np.load(made / "float_functions.npz")))


FLOAT_FUNCTIONS = ("hard_sigmoid", "hard_tanh", "smooth_sigmoid", "smooth_tanh")


@pytest.fixture(scope="module")
def keras2_float_functions():
    import qkeras as q
    from qkeras_helpers import keras, set_seeded_weights

    k = keras()
    inp = k.Input((6,), name="x")
    h = q.QDense(6, kernel_quantizer=q.quantized_bits(6, 0, alpha=1), name="fc0")(inp)
    for i, name in enumerate(FLOAT_FUNCTIONS):
        h = q.QActivation(name, name=name)(h)
        h = q.QDense(6, kernel_quantizer=q.quantized_bits(6, 0, alpha=1), name=f"fc{i + 1}")(h)
    model = k.Model(inp, h)
    set_seeded_weights(model, 7)
    return model


@pytest.mark.parametrize("batch", [1, 8])
def test_qactivation_float_functions_match_qkeras(keras2_float_functions, batch):
    from qkeras_helpers import assert_matches_qkeras, quant_nodes

    import qkeras2qonnx

    converted = qkeras2qonnx.convert(keras2_float_functions)
    onnx.checker.check_model(converted)
    assert len(quant_nodes(converted)) == 5  # the kernels only: the functions have no grid
    assert_matches_qkeras(keras2_float_functions, converted, batch=batch, samples=8, step=1 / 16)


def test_bernoulli_activation_is_refused_as_random():
    import qkeras as q
    from qkeras_helpers import keras

    import qkeras2qonnx
    from qonnx_ingest.errors import ConversionError

    k = keras()
    inp = k.Input((4,), name="x")
    model = k.Model(inp, q.QActivation(q.bernoulli(), name="bern")(inp))
    with pytest.raises(ConversionError, match=r"bern activation: bernoulli\(\).*random"):
        qkeras2qonnx.convert(model)
