"""hls4ml's own QKeras frontend in this venv, against our QONNX of the same QKeras model.

hls4ml 1.3.0's ``convert_from_keras_model`` picks its parser with ``import keras;
keras.__version__ >= '3.0'``: beside tf_keras (QKeras 0.9's Keras) the pinned Keras 3.15.1 is
importable, so it parses a tf_keras model as Keras 3 and fails. With ``keras`` pointed at
tf_keras for the call, its QKeras (Keras 2) frontend runs, and our QONNX through hls4ml's QONNX
frontend (the recipe of docs/hls4ml.md) predicts the same numbers bit for bit, and QKeras's.
One seeded model (QConv2D, QActivation, QDense): two g++ builds, about 40 s on 2 cores.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import numpy as np
import pytest
from qkeras_helpers import keras

pytestmark = [pytest.mark.keras, pytest.mark.hls4ml]

PRECISION = "fixed<32,16>"  # wide enough for every intermediate of the model: exact


def _model():
    import qkeras as q

    k = keras()
    k.utils.set_random_seed(3)
    q4 = "quantized_bits(4, 0, alpha=1)"
    return k.Sequential(
        [
            q.QConv2D(
                3, 3, input_shape=(6, 6, 2), kernel_quantizer=q4, bias_quantizer=q4, name="conv"
            ),  # fmt: skip
            q.QActivation("quantized_relu(4, 0)", name="act"),
            k.layers.Flatten(name="flat"),
            q.QDense(3, kernel_quantizer=q4, bias_quantizer=q4, name="out"),
        ]
    )


@pytest.fixture(scope="module")
def model():
    return _model()


@pytest.fixture(scope="module")
def inputs():
    """On a 1/16 grid: exact in hls4ml's fixed<32,16> input type and in float32."""
    return (np.random.default_rng(1).integers(-96, 97, (32, 6, 6, 2)) / 16).astype(np.float32)


def test_hls4ml_qkeras_frontend_parses_a_qkeras09_model_as_keras3_and_fails(model, tmp_path):
    import hls4ml

    with pytest.raises(AttributeError) as raised:
        hls4ml.converters.convert_from_keras_model(
            model, output_dir=str(tmp_path / "hls"), backend="Vivado"
        )
    frame = traceback.extract_tb(raised.value.__traceback__)[-1]
    assert str(raised.value) == "'Node' object has no attribute 'arguments'"
    assert (Path(frame.filename).name, frame.lineno) == ("keras_v3_to_hls.py", 49)


def _qkeras_frontend(model, out: Path):
    """hls4ml's Keras 2 (QKeras) frontend, ``keras`` pointed at tf_keras during the call."""
    import hls4ml

    saved = sys.modules["keras"]
    sys.modules["keras"] = keras()
    try:
        config = hls4ml.utils.config_from_keras_model(
            model, granularity="name", default_precision=PRECISION
        )
        hls = hls4ml.converters.convert_from_keras_model(
            model, output_dir=str(out), io_type="io_parallel", backend="Vivado", hls_config=config
        )
    finally:
        sys.modules["keras"] = saved
    hls.compile()
    return hls


def _our_qonnx(model, out: Path):
    import hls4ml
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean
    from qonnx.transformation.gemm_to_matmul import GemmToMatMul
    from qonnx.util.cleanup import cleanup_model

    import qkeras2qonnx

    wrapper = cleanup_model(ModelWrapper(qkeras2qonnx.convert(model, channels_last=True)))
    wrapper = cleanup_model(
        wrapper.transform(ConvertToChannelsLastAndClean()).transform(GemmToMatMul())
    )
    config = hls4ml.utils.config_from_onnx_model(
        wrapper, granularity="name", backend="Vivado", default_precision=PRECISION
    )
    hls = hls4ml.converters.convert_from_onnx_model(
        wrapper, output_dir=str(out), io_type="io_parallel", backend="Vivado", hls_config=config
    )
    hls.compile()
    return hls


def test_our_qonnx_in_hls4ml_equals_hls4ml_qkeras_frontend_bit_for_bit(model, inputs, tmp_path):
    want = model.predict(inputs, verbose=0)
    assert len(np.unique(want)) > 10  # not a degenerate output
    theirs = np.asarray(_qkeras_frontend(model, tmp_path / "keras").predict(inputs))
    ours = np.asarray(_our_qonnx(model, tmp_path / "qonnx").predict(inputs))
    np.testing.assert_array_equal(ours.reshape(want.shape), theirs.reshape(want.shape))
    np.testing.assert_array_equal(ours.reshape(want.shape), want)
