"""--verify on models whose inputs are not float32: each input gets seeded values of its own
type (a bool mask holding both values, integer ids within the Embedding they index), fed to
QKeras predict and to the converted model alike. Feeding float32 to a bool input used to end
in onnxruntime's "expected: (tensor(bool))"."""

from __future__ import annotations

import numpy as np
import pytest
from qkeras_helpers import CORPUS, keras, set_seeded_weights

from support import requires_corpus

pytestmark = pytest.mark.keras

MASKED = CORPUS / "schaefes_TrainTagger_masking_bool_input.h5"


@pytest.fixture(scope="module")
def masked():
    import warnings

    from qkeras2qonnx.environment.load import load_model
    from qkeras2qonnx.pipeline import convert

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_model(MASKED), convert(MASKED)


@requires_corpus
def test_a_bool_mask_input_is_verified_exactly_against_qkeras(masked):
    from qkeras2qonnx.reference import verify

    keras_model, model = masked
    elem_types = {vi.name: vi.type.tensor_type.elem_type for vi in model.graph.input}
    assert elem_types == {"model_input": 1, "mask_input": 9}  # FLOAT, BOOL
    checked = verify(keras_model, model)
    assert checked.passed and checked.inputs == 16
    assert [a.name for a in checked.outputs] == ["jet_id_output", "pT_output"]
    assert all(a.max_abs_error <= 1e-6 for a in checked.outputs)


@requires_corpus
def test_the_mask_changes_what_qkeras_computes(masked):
    """So a verification that passes with mixed masks has compared the masked pooling."""
    from qonnx_ingest.verification import seeded_values

    keras_model, _ = masked
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (4, 16, 20)).astype(np.float32)
    mixed = np.stack([seeded_values(rng, np.bool_, (16,)) for _ in range(4)])
    full = np.ones((4, 16), bool)
    a = keras_model([x, mixed], training=False)[1]
    b = keras_model([x, full], training=False)[1]
    assert not np.allclose(np.asarray(a), np.asarray(b))


@requires_corpus
def test_user_inputs_for_a_bool_mask_stay_bool(masked, tmp_path):
    from qkeras2qonnx.reference import verify

    keras_model, model = masked
    rng = np.random.default_rng(5)
    path = tmp_path / "inputs.npz"
    features = rng.normal(0, 1, (3, 16, 20)).astype(np.float32)
    np.savez(path, model_input=features, mask_input=rng.integers(0, 2, (3, 16)).astype(bool))
    checked = verify(keras_model, model, inputs_path=path)
    assert checked.passed and checked.inputs == 3


@pytest.fixture(scope="module")
def with_ids():
    """Integer ids into a 10-row Embedding beside float features, then a QDense."""
    from qkeras import QDense, quantized_bits

    from qkeras2qonnx.pipeline import convert

    k = keras()
    ids = k.Input((6,), dtype="int32", name="ids")
    feat = k.Input((3,), name="feat")
    rows = k.layers.Flatten()(k.layers.Embedding(10, 4, name="emb")(ids))
    h = k.layers.Concatenate()([rows, feat])
    out = QDense(3, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="out")(h)
    model = k.Model([ids, feat], out)
    set_seeded_weights(model, 1)
    return model, convert(model), convert(model, batch_size=4)


def test_integer_ids_are_drawn_within_the_embedding(with_ids):
    from qkeras2qonnx.reference import _index_bounds

    keras_model, model, _ = with_ids
    assert model.graph.input[0].type.tensor_type.elem_type == 6  # INT32
    assert _index_bounds(keras_model, ["ids", "feat"]) == {"ids": (0, 9)}


@pytest.mark.parametrize("fixed", [False, True], ids=["dynamic_batch", "batch_4"])
def test_an_integer_input_is_verified_against_qkeras(with_ids, fixed):
    from qkeras2qonnx.reference import verify

    keras_model, dynamic, batch_4 = with_ids
    checked = verify(keras_model, batch_4 if fixed else dynamic, inputs=6)
    assert checked.passed and checked.inputs == 6
    assert checked.outputs[0].max_abs_error <= 1e-6


def test_user_inputs_an_integer_input_cannot_hold_are_refused(with_ids, tmp_path):
    """Ids of 2.5 would be cut to 2 by a cast: refused, naming the input, never rounded."""
    from qkeras2qonnx.reference import verify
    from qonnx_ingest.errors import InputError

    keras_model, model, _ = with_ids
    path = tmp_path / "inputs.npz"
    ids = np.full((2, 6), 2.5, np.float32)
    np.savez(path, ids=ids, feat=np.zeros((2, 3), np.float32))
    with pytest.raises(InputError, match=r"ids takes int32 values; its samples hold others"):
        verify(keras_model, model, inputs_path=path)
    np.savez(path, ids=ids - 0.5, feat=np.zeros((2, 3), np.float32))  # whole numbers: fine
    assert verify(keras_model, model, inputs_path=path).passed
