"""Small seeded QKeras 0.9 models for the hls4ml acceptance test: one per converted form the
corpus models do not have (composite activations, unrolled recurrent layers), and what
hls4ml 1.3.0 makes of each.

hls4ml's ONNX frontend parses a node only if one of its handlers registers the op type
(hls4ml/converters/onnx/*.py: MatMul, Conv, BatchNormalization, Quant/IntQuant, BipolarQuant,
the activations of core.py:20-32, the merges of merge.py:3, pooling, Transpose, Reshape,
Flatten, Resize, Pad); ``parse_onnx_model`` (hls4ml/converters/onnx_to_hls.py:237-239) raises
``Exception('ERROR: Unsupported operation type: ...')`` on the first node that has none.
The exact composite forms need Clip, Round, Abs, Sign, comparisons; the unrolled cells need
Gather (a time step), Slice (a gate) and ConstantOfShape (the zero initial state).
"""

from __future__ import annotations

from qkeras_helpers import keras, set_seeded_weights

HLS4ML_PARSER = "hls4ml/converters/onnx_to_hls.py:239 (parse_onnx_model)"


def _dense_then(q, activation):
    k = keras()
    return k.Sequential(
        [
            q.QDense(
                6,
                input_shape=(4,),
                kernel_quantizer=q.quantized_bits(6, 0, alpha=1),
                bias_quantizer=q.quantized_bits(6, 0, alpha=1),
                name="fc",
            ),
            q.QActivation(activation, name="act"),
        ]
    )


def _recurrent(q, layer, **kwargs):
    weights = {
        f"{role}_quantizer": q.quantized_bits(8, 0, alpha=1)
        for role in ("kernel", "recurrent", "bias", "state")
    }
    return keras().Sequential(
        [getattr(q, layer)(4, input_shape=(3, 2), **weights, **kwargs, name="rnn")]
    )


# name: (builder taking the qkeras module, the first op hls4ml 1.3.0 has no handler for)
BUILT = {
    "quantized_tanh": (lambda q: _dense_then(q, q.quantized_tanh(8)), "Clip"),
    "quantized_sigmoid": (lambda q: _dense_then(q, q.quantized_sigmoid(5)), "Clip"),
    "ternary": (lambda q: _dense_then(q, q.ternary(threshold=0.2)), "Abs"),
    "binary_tanh": (lambda q: _dense_then(q, "binary_tanh"), "Clip"),
    "relu_negative_slope": (
        lambda q: _dense_then(q, q.quantized_relu(8, 2, negative_slope=0.25)),
        "Round",
    ),
    "qsimplernn": (
        lambda q: _recurrent(q, "QSimpleRNN", activation=q.quantized_relu(8, 2)),
        "Gather",
    ),
    "qlstm": (
        lambda q: _recurrent(
            q, "QLSTM", activation="quantized_tanh(8)", recurrent_activation="hard_sigmoid"
        ),
        "Gather",
    ),
    "qgru": (
        lambda q: _recurrent(
            q,
            "QGRU",
            activation="quantized_tanh(8)",
            recurrent_activation="hard_sigmoid",
            reset_after=False,
        ),
        "Gather",
    ),
}


def build(name: str, seed: int = 3):
    """The seeded QKeras model ``name`` (QKeras's recurrent cells need the TF names restored)."""
    import qkeras

    from qkeras2qonnx.environment.backend import keras as backend_keras

    backend_keras()
    model = BUILT[name][0](qkeras)
    set_seeded_weights(model, seed)
    return model


def refusal(name: str) -> tuple[str, str]:
    """hls4ml's message for ``name`` and the reason to skip with."""
    op = BUILT[name][1]
    reason = (
        f"hls4ml 1.3.0's ONNX frontend has no handler for {op}, which the exact form of "
        f"{name} needs: {HLS4ML_PARSER} raises 'Unsupported operation type: {op}'"
    )
    return f"Unsupported operation type: {op}", reason
