"""tf.while_loop models for the quantized WHILE tests, built in a fresh process
(``control_flow_models.in_fresh_process(..., module="quantized_while_models")``).

TF's converter (2.x here) segfaulted calibrating full-integer WHILE loops whose body reads a
captured input, that carry a third loop variable, or Keras' SimpleRNN(unroll=False); these
loops carry an iteration count and one value only.
"""

from __future__ import annotations

import numpy as np
from control_flow_models import _convert, _tf


def counted_while_model() -> bytes:
    """v <- 0.75 v + 0.5 until max(v) >= 1.2 (at most 12 times), returning v and the count,
    on x of shape [3]; full integer. Calibrated on [-1, 1], v stays within [-1, 2] and the
    count depends on x (control_flow_models.while_model's doubling outgrows its int8 grid:
    quantized, every input runs to its cap). REDUCE_MAX, not SUM: the builtin reference
    kernel's int8 SUM over all axes is off by up to the whole range (it ran this loop to its
    cap where the sum had passed the bound after one step)."""
    tf = _tf()

    def fn(x):
        def cond(i, v):
            return tf.logical_and(i < 12, tf.reduce_max(v) < 1.2)

        i, v = tf.while_loop(cond, lambda i, v: (i + 1, v * 0.75 + 0.5), [tf.constant(0), x])
        return v, i

    return _convert(tf, fn, [tf.TensorSpec([3], tf.float32)], quantized=True)


def dense_tanh_while_model() -> bytes:
    """h <- tanh(h @ W + 0.5) five times from h = x, on x of shape [1, 8]; full integer (the
    body is QUANTIZE, ADD, FULLY_CONNECTED, TANH, DEQUANTIZE)."""
    tf = _tf()
    w = tf.constant(np.random.default_rng(5).normal(0, 0.4, (8, 8)).astype(np.float32))

    def fn(x):
        def body(i, h):
            return i + 1, tf.tanh(tf.matmul(h, w) + 0.5)

        _, h = tf.while_loop(lambda i, h: i < 5, body, [tf.constant(0), x])
        return h

    return _convert(tf, fn, [tf.TensorSpec([1, 8], tf.float32)], quantized=True)


def conv_then_while_model() -> bytes:
    """A float CONV_2D (so the layout pass permutes) and then a WHILE on its channel means:
    v <- 2 v + 0.5 until sum(v) >= 10 (at most 20 times), on x of shape [1, 4, 4, 2]."""
    tf = _tf()
    k = tf.constant(np.random.default_rng(6).normal(size=(3, 3, 2, 3)).astype(np.float32))

    def fn(x):
        s = tf.reduce_mean(tf.nn.conv2d(x, k, 1, "SAME"), axis=[1, 2])

        def cond(i, v):
            return tf.logical_and(i < 20, tf.reduce_sum(v) < 10.0)

        _, v = tf.while_loop(cond, lambda i, v: (i + 1, v * 2.0 + 0.5), [tf.constant(0), s])
        return v

    return _convert(tf, fn, [tf.TensorSpec([1, 4, 4, 2], tf.float32)])


def int8_carried_while_model(body_scale: float = 0.05) -> bytes:
    """A WHILE carrying an int8 loop variable (TF's converter keeps loop variables float):
    v <- v + v (ADD, saturating) four times, v on scale 0.05, zero point 3 in the main graph
    and the condition; the body's tensors on ``body_scale`` (0.05: one grid throughout).
    Built with the flatbuffer object API (``ai_edge_litert``'s schema), no TensorFlow."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as s

    def tensor(name, dtype, shape, scale=None, buffer=0):
        t = s.TensorT()
        t.name, t.type, t.shape, t.buffer = name.encode(), dtype, list(shape), buffer
        if scale is not None:
            t.quantization = s.QuantizationParametersT()
            t.quantization.scale, t.quantization.zeroPoint = [scale], [3]
        return t

    def operator(code, inputs, outputs, options_type=0, options=None):
        o = s.OperatorT()
        o.opcodeIndex, o.inputs, o.outputs = code, list(inputs), list(outputs)
        o.builtinOptionsType, o.builtinOptions = options_type, options
        return o

    def subgraph(name, tensors, inputs, outputs, operators):
        g = s.SubGraphT()
        g.name, g.tensors, g.inputs, g.outputs = name.encode(), tensors, inputs, outputs
        g.operators = operators
        return g

    int8, int32, boolean = s.TensorType.INT8, s.TensorType.INT32, s.TensorType.BOOL
    buffers = [s.BufferT() for _ in range(4)]
    for k, value in ((1, 0), (2, 4), (3, 1)):  # i0 = 0, the bound 4, the increment 1
        buffers[k].data = list(np.array([value], np.int32).tobytes())
    codes = []
    for builtin in (s.BuiltinOperator.WHILE, s.BuiltinOperator.LESS, s.BuiltinOperator.ADD):
        code = s.OperatorCodeT()
        code.builtinCode, code.deprecatedBuiltinCode, code.version = builtin, builtin, 1
        codes.append(code)
    options = s.WhileOptionsT()
    options.condSubgraphIndex, options.bodySubgraphIndex = 1, 2
    add = s.AddOptionsT()
    main = subgraph(
        "main",
        [tensor("x", int8, [3], 0.05), tensor("i0", int32, [], buffer=1),
         tensor("count", int32, []), tensor("y", int8, [3], 0.05)],
        [0], [3, 2], [operator(0, [1, 0], [2, 3], s.BuiltinOptions.WhileOptions, options)],
    )  # fmt: skip
    cond = subgraph(
        "cond",
        [tensor("ci", int32, []), tensor("cv", int8, [3], 0.05),
         tensor("bound", int32, [], buffer=2), tensor("go", boolean, [])],
        [0, 1], [3], [operator(1, [0, 2], [3])],
    )  # fmt: skip
    body = subgraph(
        "body",
        [tensor("bi", int32, []), tensor("bv", int8, [3], body_scale),
         tensor("one", int32, [], buffer=3), tensor("bi_next", int32, []),
         tensor("bv_next", int8, [3], body_scale)],
        [0, 1], [3, 4],
        [operator(2, [0, 2], [3], s.BuiltinOptions.AddOptions, add),
         operator(2, [1, 1], [4], s.BuiltinOptions.AddOptions, add)],
    )  # fmt: skip
    model = s.ModelT()
    model.version, model.operatorCodes, model.buffers = 3, codes, buffers
    model.subgraphs = [main, cond, body]
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())
