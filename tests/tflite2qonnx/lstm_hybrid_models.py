"""Hybrid (dynamic-range) LSTM test models: int8 weights on float activations.

``keras_hybrid_lstms`` is what TF's converter makes of Keras LSTMs with Optimize.DEFAULT and
no representative data (one conversion, several LSTM layers as outputs: the converter only
quantizes weights of 1024 elements or more, hence 32 units on 32 features).
``hybrid_lstm`` writes one UNIDIRECTIONAL or BIDIRECTIONAL_SEQUENCE_LSTM from seeded int8
weights with tflite_writer, for the variants the converter does not reach from Keras (the
bidirectional op itself, CIFG, layer norm, symmetric input quantization).
"""

from __future__ import annotations

import flatbuffers
import numpy as np
from tf_models import _tf
from tflite_writer import build_model

LSTM_OPS = ("UNIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM")


def keras_hybrid_lstms(seed: int = 7) -> bytes:
    """Input [2, 5, 32]; outputs: Bidirectional(LSTM) last step (two LSTMs, one on the
    reversed input) and a time-major LSTM's sequences (the input read as [time 2, batch 5])."""
    tf = _tf()
    tf.keras.utils.set_random_seed(seed)
    layers = tf.keras.layers
    x = tf.keras.Input(batch_size=2, shape=(5, 32))
    outputs = [
        layers.Bidirectional(layers.LSTM(32))(x),
        layers.LSTM(32, return_sequences=True, time_major=True)(x),
    ]
    converter = tf.lite.TFLiteConverter.from_keras_model(tf.keras.Model(x, outputs))
    converter.optimizations = [tf.lite.Optimize.DEFAULT]  # no representative data: hybrid
    return converter.convert()


def with_lstm_options(data: bytes, **fields) -> bytes:
    """Every LSTM operator's builtin option ``fields`` (schema object API names) set."""
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(data, 0))
    codes = {getattr(schema.BuiltinOperator, name) for name in LSTM_OPS}
    for op in model.subgraphs[0].operators:
        if model.operatorCodes[op.opcodeIndex].builtinCode in codes:
            for field, value in fields.items():
                setattr(op.builtinOptions, field, value)
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


class _Tensors:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.tensors: list[dict] = []

    def add(self, name: str, shape, **kw) -> int:
        self.tensors.append({"name": name, "shape": tuple(shape), **kw})
        return len(self.tensors) - 1

    def int8(self, name: str, shape, scale: float) -> int:
        data = self.rng.integers(-127, 128, shape).astype(np.int8)
        return self.add(name, shape, dtype="int8", quant=([scale], [0]), data=data)

    def floats(self, name: str, shape, low: float, high: float) -> int:
        data = self.rng.uniform(low, high, shape).astype(np.float32)
        return self.add(name, shape, data=data)

    def direction(self, tag: str, n_in: int, units: int, cifg: bool, layer_norm: bool):
        """Operands 1..17 of one direction, and its layer-norm operands."""
        gates = ("input", "forget", "cell", "output")
        ops = [-1 if cifg and g == "input" else self.int8(f"{tag}_x_{g}", (units, n_in), 0.02)
               for g in gates]  # fmt: skip
        ops += [-1 if cifg and g == "input" else self.int8(f"{tag}_h_{g}", (units, units), 0.01)
                for g in gates]  # fmt: skip
        ops += [-1, -1, -1]  # no peepholes
        ops += [-1 if cifg and g == "input" else self.floats(f"{tag}_b_{g}", (units,), -0.5, 0.5)
                for g in gates]  # fmt: skip
        ops += [-1, -1]  # no projection
        norm = [-1 if cifg and g == "input" or not layer_norm
                else self.floats(f"{tag}_ln_{g}", (units,), 0.5, 1.5) for g in gates]  # fmt: skip
        return ops, norm


def hybrid_lstm(
    *,
    bidirectional: bool = False,
    asymmetric: bool = True,
    time_major: bool = False,
    cifg: bool = False,
    layer_norm: bool = False,
    merge_outputs: bool = True,
    per_channel: bool = False,
    shape=(2, 4, 6),
    units: int = 5,
    seed: int = 0,
) -> bytes:
    """One hybrid LSTM operator on a float input of ``shape`` (TANH, cell clip 10);
    ``per_channel``: the input-to-forget weights with a scale per output row."""
    t = _Tensors(seed)
    x = t.add("x", shape)
    batch = shape[1] if time_major else shape[0]
    out_shape = (*shape[:2], units)
    fw, fw_norm = t.direction("fw", shape[-1], units, cifg, layer_norm)
    states = [t.add(f"state{k}", (batch, units), variable=True) for k in range(2)]
    if per_channel:
        t.tensors[fw[1]]["quant"] = ([0.02] * units, [0] * units)
    options = {
        "FusedActivationFunction": 4,
        "CellClip": 10.0,
        "TimeMajor": time_major,
        "AsymmetricQuantizeInputs": asymmetric,
    }
    if not bidirectional:
        y = t.add("y", out_shape)
        op = {"op": "UNIDIRECTIONAL_SEQUENCE_LSTM", "inputs": [x, *fw, *states, *fw_norm],
              "outputs": [y], "options": ("UnidirectionalSequenceLSTMOptions", options),
              "version": 3}  # fmt: skip
        return build_model(t.tensors, [op], [x], [y])
    bw, _ = t.direction("bw", shape[-1], units, cifg, False)
    states += [t.add(f"bw_state{k}", (batch, units), variable=True) for k in range(2)]
    if merge_outputs:
        outputs = [t.add("y", (*shape[:2], 2 * units))]
    else:
        outputs = [t.add("y_fw", out_shape), t.add("y_bw", out_shape)]
    options["MergeOutputs"] = merge_outputs
    op = {"op": "BIDIRECTIONAL_SEQUENCE_LSTM", "inputs": [x, *fw, *bw, *states] + [-1] * 9,
          "outputs": outputs, "options": ("BidirectionalSequenceLSTMOptions", options),
          "version": 3}  # fmt: skip
    return build_model(t.tensors, [op], [x], outputs)
