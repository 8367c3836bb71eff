"""Multi-subgraph TFLite models from TensorFlow's converter (keras extra): tf.cond (IF),
tf.while_loop (WHILE) and a resource variable initialized once (CALL_ONCE, VAR_HANDLE,
READ_VARIABLE, ASSIGN_VARIABLE)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def _tf():
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    return tf


def in_fresh_process(
    specs: dict[str, tuple[str, dict]], module: str = "control_flow_models"
) -> dict[str, bytes]:
    """Each ``name: (builder, kwargs)`` built by ``module.builder(**kwargs)`` in one Python
    process of its own: TensorFlow's control-flow conversion depends on process-wide state
    that earlier tests in the same process (Keras, QKeras, tf2onnx) leave behind; a fresh
    interpreter builds what TF builds on its own."""
    with tempfile.TemporaryDirectory() as folder:
        code = (
            f"import json, sys, pathlib, {module} as m\n"
            "for name, (builder, kwargs) in json.loads(sys.argv[1]).items():\n"
            "    data = getattr(m, builder)(**kwargs)\n"
            "    (pathlib.Path(sys.argv[2]) / (name + '.tflite')).write_bytes(data)\n"
        )
        env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}
        result = subprocess.run(
            [sys.executable, "-c", code, json.dumps(specs), folder],
            cwd=Path(__file__).parent,
            env=env,
            capture_output=True,
            timeout=900,
            check=False,
        )
        assert result.returncode == 0, result.stderr.decode(errors="replace")[-2000:]
        return {name: (Path(folder) / f"{name}.tflite").read_bytes() for name in specs}


def _convert(tf, fn, signature, quantized: bool = False) -> bytes:
    """TFLiteConverter on ``fn``; ``quantized``: full integer (int8 I/O), calibrated on 16
    seeded inputs in [-1, 1]."""
    concrete = tf.function(fn, input_signature=signature).get_concrete_function()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], None)
    if quantized:
        full_integer(converter, signature[0].shape)
    return converter.convert()


def full_integer(converter, shape, seed: int = 0, count: int = 16) -> None:
    """Set ``converter`` to full-integer int8 with int8 I/O, calibrated on ``count`` seeded
    uniform [-1, 1) inputs of ``shape`` (or of ``shape(i)`` for the i-th, where sizes vary)."""
    tf = _tf()
    rng = np.random.default_rng(seed)

    def representative():
        for i in range(count):
            yield [rng.uniform(-1, 1, shape(i) if callable(shape) else shape).astype(np.float32)]

    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8


def cond_model(quantized: bool = False) -> bytes:
    """y = x @ W + 1 if sum(x) > 0 else tanh(x) * 2 - x, on x of shape [2, 4]. Quantized, TF
    keeps the IF float and quantizes inside each branch."""
    tf = _tf()
    w = tf.constant(np.random.default_rng(3).normal(size=(4, 4)).astype(np.float32))

    def fn(x):
        return tf.cond(
            tf.reduce_sum(x) > 0.0, lambda: tf.matmul(x, w) + 1.0, lambda: tf.tanh(x) * 2.0 - x
        )

    return _convert(tf, fn, [tf.TensorSpec([2, 4], tf.float32)], quantized)


def cond_on_computed_model() -> bytes:
    """h = x * 3 - 1 computed before the IF, which both branches read (ONNX If branches read
    such an outer tensor by name): y = h + 1 if sum(x) > 0 else h * h, on x of shape [2, 4]."""
    tf = _tf()

    def fn(x):
        h = x * 3.0 - 1.0
        return tf.cond(tf.reduce_sum(x) > 0.0, lambda: h + 1.0, lambda: h * h)

    return _convert(tf, fn, [tf.TensorSpec([2, 4], tf.float32)])


def while_model(quantized: bool = False) -> bytes:
    """Doubles x and adds 0.5 until its sum exceeds 10 (at most 20 times); returns x and
    the number of steps, on x of shape [3]."""
    tf = _tf()

    def fn(x):
        def cond(i, v):
            return tf.logical_and(i < 20, tf.reduce_sum(v) < 10.0)

        def body(i, v):
            return i + 1, v * 2.0 + 0.5

        i, v = tf.while_loop(cond, body, [tf.constant(0), x])
        return v, i

    return _convert(tf, fn, [tf.TensorSpec([3], tf.float32)], quantized)


def variable_model() -> bytes:
    """A tf.Variable v (initialized by a CALL_ONCE subgraph) updated in place:
    v <- 0.5 * v + x; y = x * v + v, on x of shape [4]."""
    tf = _tf()

    class Module(tf.Module):
        def __init__(self):
            super().__init__()
            self.v = tf.Variable(np.arange(1, 5, dtype=np.float32) / 4)

        @tf.function(input_signature=[tf.TensorSpec([4], tf.float32)])
        def __call__(self, x):
            self.v.assign(self.v * 0.5 + x)
            return x * self.v + self.v

    module = Module()
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [module.__call__.get_concrete_function()], module
    )
    converter.experimental_enable_resource_variables = True
    return converter.convert()


def cond_4d_model() -> bytes:
    """tf.cond on an image-shaped [1, 4, 4, 2] input: its IF takes a rank-4 argument."""
    tf = _tf()

    def fn(x):
        return tf.cond(tf.reduce_sum(x) > 0.0, lambda: x * 2.0, lambda: x - 1.0)

    return _convert(tf, fn, [tf.TensorSpec([1, 4, 4, 2], tf.float32)])


def conv_then_cond_model() -> bytes:
    """A CONV_2D (stored channels-first by the layout pass) whose [1, 4, 4, 3] result both
    branches of a tf.cond read: c * 2 + 1 if sum(x) > 0 else c - 1, on x [1, 4, 4, 2]."""
    tf = _tf()
    k = tf.constant(np.random.default_rng(8).normal(size=(3, 3, 2, 3)).astype(np.float32))

    def fn(x):
        c = tf.nn.conv2d(x, k, 1, "SAME")
        return tf.cond(tf.reduce_sum(x) > 0.0, lambda: c * 2.0 + 1.0, lambda: c - 1.0)

    return _convert(tf, fn, [tf.TensorSpec([1, 4, 4, 2], tf.float32)])


def conditional_assignment_model() -> bytes:
    """v <- x if sum(x) > 0 else -x, then y = v, with v a tf.Variable: each IF branch
    receives the variable's handle and assigns it."""
    tf = _tf()

    class Module(tf.Module):
        def __init__(self):
            super().__init__()
            self.v = tf.Variable(np.arange(1, 5, dtype=np.float32) / 4)

        @tf.function(input_signature=[tf.TensorSpec([4], tf.float32)])
        def __call__(self, x):
            tf.cond(tf.reduce_sum(x) > 0, lambda: self.v.assign(x), lambda: self.v.assign(-x))
            return self.v * 1.0

    module = Module()
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [module.__call__.get_concrete_function()], module
    )
    converter.experimental_enable_resource_variables = True
    return converter.convert()


def with_if_branch(data: bytes, then_index: int) -> bytes:
    """``data`` with its first IF's then_subgraph_index set to ``then_index``."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(data, 0))
    codes = model.operatorCodes
    for sg in model.subgraphs:
        for op in sg.operators:
            if codes[op.opcodeIndex].builtinCode == schema.BuiltinOperator.IF:
                op.builtinOptions.thenSubgraphIndex = then_index
                builder = flatbuffers.Builder(1024)
                builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
                return bytes(builder.Output())
    raise ValueError("no IF")
