"""QKeras 0.9's recurrent layers load and run on TensorFlow 2.19 (qkeras2qonnx restores the
``nest.is_sequence`` / ``array_ops.unstack`` names they call) and are refused by name: their
quantized recurrence is not converted."""

import numpy as np
import pytest
from qkeras_helpers import CORPUS, keras

from qonnx_ingest.errors import ConversionError
from support import requires_corpus

pytestmark = pytest.mark.keras


def _recurrent(layer_name: str):
    import qkeras

    from qkeras2qonnx.backend import keras as backend_keras

    backend_keras()  # restores the names before QKeras's layers are called
    k = keras()
    quantizer = qkeras.quantized_bits(6, 0, alpha=1)
    layer = getattr(qkeras, layer_name)(
        4, kernel_quantizer=quantizer, recurrent_quantizer=quantizer, name="rnn"
    )
    inp = k.Input((5, 3), name="x")
    return k.Model(inp, layer(inp))


@pytest.mark.parametrize("layer_name", ["QSimpleRNN", "QLSTM", "QGRU"])
def test_recurrent_layer_runs_and_is_refused_by_name(layer_name):
    import qkeras2qonnx

    model = _recurrent(layer_name)
    out = model.predict(np.zeros((2, 5, 3), np.float32), verbose=0)
    assert out.shape == (2, 4)
    with pytest.raises(ConversionError, match=f"rnn: recurrent QKeras layer {layer_name}"):
        qkeras2qonnx.convert(model)


@requires_corpus
def test_corpus_qlstm_loads_and_is_refused_naming_the_layer():
    import qkeras2qonnx
    from qkeras2qonnx.load import load_model

    path = CORPUS / "uwacme_btag_2int_qlstm_6frac.h5"
    model = load_model(path)
    assert any(type(layer).__name__ == "QLSTM" for layer in model.layers)
    with pytest.raises(ConversionError, match="recurrent QKeras layer QLSTM"):
        qkeras2qonnx.convert(path)
