"""Keras ``stateful=True`` recurrent layers through TF's TFLiteConverter: each layer's state is
a resource variable (VAR_HANDLE, set to zero by a CALL_ONCE subgraph, READ_VARIABLE before
the recurrence, ASSIGN_VARIABLE of the final state after it). Build in a fresh process
(``control_flow_models.in_fresh_process(..., module="stateful_models")``).

Float, each layer is a WHILE over the time steps. Full-integer, TF 2.19's calibrator crashes
(segmentation fault in ``calibrator._feed_tensors``) on any model holding both a WHILE and
a resource variable, so the int8 model unrolls the layers (``unroll=True``): the variables
stay float32, READ_VARIABLE -> QUANTIZE in front of the int8 cells and DEQUANTIZE ->
ASSIGN_VARIABLE behind them.

Also here, to be built in the same process: control_flow_models' tf.Variable models.
"""

from __future__ import annotations

import numpy as np
from control_flow_models import _tf, full_integer
from control_flow_models import conditional_assignment_model as conditional_assignment_model
from control_flow_models import variable_model as variable_model

SHAPE = (1, 3, 4)  # batch (a stateful layer's fixed batch), time steps, features


def keras_stateful(quantized: bool = False, seed: int = 3) -> bytes:
    """x [1, 3, 4] -> three outputs, each a stateful layer with return_sequences: GRU(5),
    SimpleRNN(4), LSTM(3) (random biases). ``quantized``: full integer, int8 I/O, calibrated
    on 16 seeded inputs in [-1, 1], layers unrolled (module docstring)."""
    tf = _tf()
    layers = tf.keras.layers
    tf.keras.backend.clear_session()  # layer (and so variable) names as in a fresh process
    tf.keras.utils.set_random_seed(seed)
    x = tf.keras.Input(SHAPE[1:], batch_size=SHAPE[0], name="x")
    kw = {"stateful": True, "return_sequences": True, "unroll": quantized}
    outs = [
        layers.GRU(5, bias_initializer="random_uniform", **kw)(x),
        layers.SimpleRNN(4, bias_initializer="random_uniform", **kw)(x),
        layers.LSTM(3, bias_initializer="random_uniform", **kw)(x),
    ]
    converter = tf.lite.TFLiteConverter.from_keras_model(tf.keras.Model(x, outs))
    if quantized:
        full_integer(converter, SHAPE, seed)
    return converter.convert()


def keras_stateful_dynamic(seed: int = 3) -> bytes:
    """Dynamic-range (Optimize.DEFAULT, no representative data): x [1, 4, 40] -> stateful
    GRU(32), SimpleRNN(32) and LSTM(64) with return_sequences, Keras' default initializers,
    each a WHILE whose body holds hybrid FULLY_CONNECTEDs (int8 weights, per-channel, inputs
    quantized on the fly, asymmetric). Seed 3: converted with onnxruntime's Sigmoid / Tanh the
    LSTM drifted to 1.4e-4 within 16 calls (an ulp moved a row's int8 value a step)."""
    tf = _tf()
    layers = tf.keras.layers
    tf.keras.backend.clear_session()
    tf.keras.utils.set_random_seed(seed)
    x = tf.keras.Input((4, 40), batch_size=1, name="x")
    kw = {"stateful": True, "return_sequences": True}
    outs = [layers.GRU(32, **kw)(x), layers.SimpleRNN(32, **kw)(x), layers.LSTM(64, **kw)(x)]
    converter = tf.lite.TFLiteConverter.from_keras_model(tf.keras.Model(x, outs))
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    return converter.convert()


def streaming_conv() -> bytes:
    """A streaming Conv2D as kws_streaming-style models write one: x [1, 1, 1, 3] (one frame)
    joins a float32 buffer variable [1, 2, 1, 3] of the last two frames, a 3x1 VALID
    convolution (4 filters, RELU, seed 0) reads the three, the buffer keeps the newest two;
    an int32 variable counts the calls and scales the output."""
    tf = _tf()
    kernel = tf.constant(np.random.default_rng(0).normal(size=(3, 1, 3, 4)).astype(np.float32))

    class Module(tf.Module):
        def __init__(self):
            super().__init__()
            self.buffer = tf.Variable(np.zeros((1, 2, 1, 3), np.float32))
            self.count = tf.Variable(np.int32(0))

        @tf.function(input_signature=[tf.TensorSpec([1, 1, 1, 3], tf.float32)])
        def __call__(self, x):
            frames = tf.concat([self.buffer, x], axis=1)
            y = tf.nn.relu(tf.nn.conv2d(frames, kernel, 1, "VALID"))
            self.buffer.assign(frames[:, 1:])
            self.count.assign_add(1)
            return y * tf.cast(self.count, tf.float32)

    module = Module()
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [module.__call__.get_concrete_function()], module
    )
    converter.experimental_enable_resource_variables = True
    return converter.convert()


def float_lstm(shape=(2, 3, 4), units: int = 5, seed: int = 0) -> bytes:
    """One float UNIDIRECTIONAL_SEQUENCE_LSTM (TANH, cell clip 10, no peepholes or
    projection) written with tflite_writer from seeded weights in [-0.6, 0.6]; its output and
    cell states are variable tensors ``state0``, ``state1``."""
    from lstm_hybrid_models import _Tensors
    from tflite_writer import build_model

    t = _Tensors(seed)
    x = t.add("x", shape)
    gates = ("input", "forget", "cell", "output")
    n_in = shape[-1]
    ops = [t.floats(f"x_{g}", (units, n_in), -0.6, 0.6) for g in gates]
    ops += [t.floats(f"h_{g}", (units, units), -0.6, 0.6) for g in gates]
    ops += [-1, -1, -1]  # no peepholes
    ops += [t.floats(f"b_{g}", (units,), -0.5, 0.5) for g in gates]
    ops += [-1, -1]  # no projection
    states = [t.add(f"state{k}", (shape[0], units), variable=True) for k in range(2)]
    y = t.add("y", (*shape[:2], units))
    options = {"FusedActivationFunction": 4, "CellClip": 10.0, "TimeMajor": False}
    op = {"op": "UNIDIRECTIONAL_SEQUENCE_LSTM", "inputs": [x, *ops, *states, -1, -1, -1, -1],
          "outputs": [y], "options": ("UnidirectionalSequenceLSTMOptions", options),
          "version": 3}  # fmt: skip
    return build_model(t.tensors, [op], [x], [y])


def with_computed_initial(data: bytes) -> bytes:
    """``data`` with its CALL_ONCE subgraph assigning NEG(constant) instead of the constant:
    an initial value computed at run time."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(data, 0))
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.NEG
    code.version = 1
    model.operatorCodes.append(code)
    init = model.subgraphs[1]
    (assign,) = [op for op in init.operators if len(op.inputs) == 2]
    value = init.tensors[assign.inputs[1]]
    negated = schema.TensorT()
    negated.name, negated.shape, negated.type = b"negated", list(value.shape), value.type
    negated.buffer = 0
    init.tensors.append(negated)
    neg = schema.OperatorT()
    neg.opcodeIndex, neg.inputs = len(model.operatorCodes) - 1, [assign.inputs[1]]
    neg.outputs = [len(init.tensors) - 1]
    assign.inputs = [assign.inputs[0], neg.outputs[0]]
    init.operators.insert(init.operators.index(assign), neg)
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())
