"""Sequence-op test models: Keras LSTMs converted by TF's TFLite converter, and their variants.

TF's converter fuses a Keras LSTM into UNIDIRECTIONAL_SEQUENCE_LSTM without peepholes,
projection, layer norm or CIFG; those variants are made by editing the generated operator's
operands (seeded float constants in place of omitted ones), which the interpreter then runs.
"""

from __future__ import annotations

import flatbuffers
import numpy as np
from tf_models import OpCase, build_tflite

# UNIDIRECTIONAL_SEQUENCE_LSTM operand positions
INPUT_GATE = (1, 5, 12)  # input-to-input, recurrent-to-input weights, input gate bias
PEEPHOLES = (9, 10, 11)
PROJECTION = (16, 17)
OUTPUT_STATE = 18
LAYER_NORM = (20, 21, 22, 23)


def keras_lstm(units: int = 5, shape=(2, 6, 3), quantized: bool = False, seed: int = 0, **kw):
    """A one-layer Keras LSTM model converted to TFLite (``kw`` go to the layer)."""

    def build(tf, xs):
        tf.keras.utils.set_random_seed(7)
        return tf.keras.layers.LSTM(units, **kw)(xs[0])

    case = OpCase("UNIDIRECTIONAL_SEQUENCE_LSTM", build, (shape,))
    return build_tflite(case, quantized, seed=seed)


def lstm_variant(
    data: bytes,
    *,
    cifg: bool = False,
    peephole: bool = False,
    layer_norm: bool = False,
    projection: int = 0,
    options: dict | None = None,
    seed: int = 0,
) -> bytes:
    """The float model's LSTM with the given variant's operands (and builtin option fields)."""
    from ai_edge_litert import schema_py_generated as schema

    rng = np.random.default_rng(seed)
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(data, 0))
    sg = model.subgraphs[0]
    (op,) = (
        o
        for o in sg.operators
        if model.operatorCodes[o.opcodeIndex].builtinCode
        == schema.BuiltinOperator.UNIDIRECTIONAL_SEQUENCE_LSTM
    )
    inputs = list(op.inputs)
    n_cell = len(_value(model, sg, inputs[12]))

    def add(values: np.ndarray, name: str) -> int:
        buffer = schema.BufferT()
        buffer.data = np.frombuffer(values.astype(np.float32).tobytes(), np.uint8)
        model.buffers.append(buffer)
        t = schema.TensorT()
        t.shape = t.shapeSignature = list(values.shape)
        t.type, t.buffer, t.name = schema.TensorType.FLOAT32, len(model.buffers) - 1, name
        sg.tensors.append(t)
        return len(sg.tensors) - 1

    if peephole:
        for k in PEEPHOLES:
            inputs[k] = add(rng.uniform(-0.5, 0.5, n_cell), f"peephole{k}")
    if layer_norm:
        for k in LAYER_NORM:
            inputs[k] = add(rng.uniform(0.5, 1.5, n_cell), f"layer_norm{k}")
    if projection:
        inputs[16] = add(rng.uniform(-0.5, 0.5, (projection, n_cell)), "projection")
        inputs[17] = add(rng.uniform(-0.2, 0.2, projection), "projection_bias")
        for k in range(5, 9):  # recurrent weights read the projected output
            inputs[k] = add(rng.uniform(-0.5, 0.5, (n_cell, projection)), f"recurrent{k}")
        for idx in (inputs[OUTPUT_STATE], op.outputs[0]):
            shape = list(sg.tensors[idx].shape)
            sg.tensors[idx].shape = sg.tensors[idx].shapeSignature = shape[:-1] + [projection]
    if cifg:  # the kernel wants no input-gate operand at all then
        dropped = INPUT_GATE + ((PEEPHOLES[0],) if peephole else ())
        for k in dropped + ((LAYER_NORM[0],) if layer_norm else ()):
            inputs[k] = -1
    if (options or {}).get("timeMajor"):  # the input [batch, time, ...] read as [time, batch]
        batch = sg.tensors[inputs[0]].shape[1]
        for k in (OUTPUT_STATE, OUTPUT_STATE + 1):
            t = sg.tensors[inputs[k]]
            t.shape = t.shapeSignature = [batch, *list(t.shape)[1:]]
    op.inputs = inputs
    for field, value in (options or {}).items():
        setattr(op.builtinOptions, field, value)
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _value(model, sg, idx: int) -> np.ndarray:
    return np.frombuffer(bytes(model.buffers[sg.tensors[idx].buffer].data), np.float32)


def _replace_lstm(data: bytes, new_op: str, build) -> bytes:
    """The float model's LSTM replaced by ``new_op`` whose operands, options and output
    shapes ``build(schema, model, sg, op, add)`` sets (``add`` makes a seeded constant or,
    with ``variable=True``, a zero state tensor)."""
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(data, 0))
    sg = model.subgraphs[0]
    codes = model.operatorCodes
    (op,) = (
        o
        for o in sg.operators
        if codes[o.opcodeIndex].builtinCode == schema.BuiltinOperator.UNIDIRECTIONAL_SEQUENCE_LSTM
    )
    code = schema.OperatorCodeT()
    code.builtinCode = getattr(schema.BuiltinOperator, new_op)
    code.deprecatedBuiltinCode = min(code.builtinCode, 127)
    code.version = 1
    codes[op.opcodeIndex] = code

    def add(values=None, name: str = "", variable_shape=None) -> int:
        t = schema.TensorT()
        t.type, t.name = schema.TensorType.FLOAT32, name
        if variable_shape is not None:
            t.shape = t.shapeSignature = list(variable_shape)
            t.isVariable, t.buffer = True, 0
        else:
            buffer = schema.BufferT()
            buffer.data = np.frombuffer(np.asarray(values, np.float32).tobytes(), np.uint8)
            model.buffers.append(buffer)
            t.shape = t.shapeSignature = list(np.shape(values))
            t.buffer = len(model.buffers) - 1
        sg.tensors.append(t)
        return len(sg.tensors) - 1

    build(schema, model, sg, op, add)
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def bidirectional_lstm(data: bytes, *, merge_outputs: bool = True, seed: int = 0) -> bytes:
    """A BIDIRECTIONAL_SEQUENCE_LSTM: the generated LSTM forward, a seeded one backward."""
    rng = np.random.default_rng(seed)

    def build(schema, model, sg, op, add):
        fw = list(op.inputs)
        batch, _, n_in = sg.tensors[fw[0]].shape
        units = sg.tensors[fw[5]].shape[0]
        bw = [add(rng.uniform(-0.6, 0.6, (units, n_in)), f"bw_x{k}") for k in range(4)]
        bw += [add(rng.uniform(-0.6, 0.6, (units, units)), f"bw_h{k}") for k in range(4)]
        bw += [-1, -1, -1] + [add(rng.uniform(-0.3, 0.3, units), f"bw_b{k}") for k in range(4)]
        states = [add(variable_shape=(batch, units), name=f"state{k}") for k in range(2)]
        op.inputs = [*fw[:18], *bw, -1, -1, fw[18], fw[19], *states] + [-1] * 9
        options = schema.BidirectionalSequenceLSTMOptionsT()
        options.fusedActivationFunction, options.cellClip = 4, 10.0
        options.mergeOutputs, options.timeMajor = merge_outputs, False
        op.builtinOptionsType = schema.BuiltinOptions.BidirectionalSequenceLSTMOptions
        op.builtinOptions = options
        out = sg.tensors[op.outputs[0]]
        if merge_outputs:
            out.shape = out.shapeSignature = [*list(out.shape)[:-1], 2 * units]
        else:
            second = add(variable_shape=list(out.shape), name="bw_output")
            sg.tensors[second].isVariable = False
            op.outputs = [op.outputs[0], second]
            sg.outputs = [*sg.outputs, second]

    return _replace_lstm(data, "BIDIRECTIONAL_SEQUENCE_LSTM", build)


def sequence_rnn(data: bytes, *, activation: int = 4, time_major: bool = False, seed: int = 0):
    """A UNIDIRECTIONAL_SEQUENCE_RNN with seeded weights in place of the generated LSTM."""
    rng = np.random.default_rng(seed)

    def build(schema, model, sg, op, add):
        x = op.inputs[0]
        d0, d1, n_in = sg.tensors[x].shape
        units = sg.tensors[op.inputs[5]].shape[0]
        w = add(rng.uniform(-0.6, 0.6, (units, n_in)), "rnn_w")
        r = add(rng.uniform(-0.6, 0.6, (units, units)), "rnn_r")
        bias = add(rng.uniform(-0.3, 0.3, units), "rnn_b")
        state = add(variable_shape=(d1 if time_major else d0, units), name="rnn_state")
        op.inputs = [x, w, r, bias, state]
        options = schema.SequenceRNNOptionsT()
        options.timeMajor, options.fusedActivationFunction = time_major, activation
        op.builtinOptionsType = schema.BuiltinOptions.SequenceRNNOptions
        op.builtinOptions = options
        op.intermediates = []

    return _replace_lstm(data, "UNIDIRECTIONAL_SEQUENCE_RNN", build)
