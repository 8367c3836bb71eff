"""compare.py's generated models: the TFLite ``Chain`` (made by TensorFlow's converter in a
worker, cached) and the QKeras QDense chain of the scaling section."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_common import progress, qkeras_imports, quiet_tensorflow

CHAIN_VERSION = 2  # cache key of the generated TFLite models (bump when the generator changes)
CELL_OPS = 5  # a generated cell: 2 FULLY_CONNECTED (one shared weight) + TANH + LOGISTIC + MUL
CHAIN_OUTPUTS = 4  # graph outputs of a generated model, tapped evenly along the chain
SCALING_WIDTH = 8  # the scaling chains: int8, 8 features
LARGE_WIDTH, LARGE_CELLS = 128, 500  # the large generated model: float32, 1,000 uses of 128x128


def qdense_chain(depth: int, traced: bool = False) -> Any:
    """The QKeras scaling chain: ``depth`` x QDense(8, quantized_bits(4, 0, alpha=1),
    activation=quantized_relu(4)), seeded, ``CHAIN_OUTPUTS`` outputs tapped along it.

    Calling a layer on a Keras tensor traces its ``call`` (autograph-converted QKeras
    quantizers, ~110 TensorFlow ops) into a scratch graph only to learn the output's shape:
    0.1 s per layer on a quiet machine, 0.6 s under load, half an hour for 2,000 layers. Unless
    ``traced``, each layer is built from its input's shape and told its output's (8 features)
    through Keras's static path for eager-only layers (``dynamic``), switched off again before
    the model is made: the same layers, names, config and weights (the seed draws them in the
    same order) without the tracing, so building is linear and ~25x faster.
    """
    import tensorflow as tf
    from qkeras import QDense, quantized_bits, quantized_relu

    k = qkeras_imports()[0]
    k.backend.clear_session()  # layer names from q_dense, as in a fresh process
    k.utils.set_random_seed(0)
    x = inputs = k.Input((8,))
    outputs, tapped, layers = [], taps(depth), []
    for index in range(depth):
        q = quantized_bits(4, 0, alpha=1)
        layer = QDense(8, kernel_quantizer=q, bias_quantizer=q, activation=quantized_relu(4))
        if not traced:
            with tf.name_scope(layer._name_scope()):  # weights named as a traced call names them
                layer._maybe_build(x)
            spec = tf.TensorSpec((*x.shape[:-1], 8), x.dtype)
            layer.compute_output_signature = lambda _, spec=spec: spec
            layer._dynamic = True
        x = layer(x)
        layers.append(layer)
        if index in tapped:
            outputs.append(x)
    for layer in layers:
        if not traced:
            layer._dynamic = False
            del layer.compute_output_signature
    return k.Model(inputs, outputs)


@dataclass(frozen=True)
class Chain:
    """A generated TFLite model shaped like real ones: ``cells`` x (h = FULLY_CONNECTED(x), all
    reading ONE weight tensor; x = tanh(h) * sigmoid(h + c_i)), with a distinct constant c_i
    per cell (TFLite folds it into a second FULLY_CONNECTED's bias: many small constants) and
    ``CHAIN_OUTPUTS`` graph outputs tapped along the chain; int8 (full-integer post-training
    quantization, seeded representative set) or float32. ``CELL_OPS`` operators per cell."""

    cells: int
    width: int
    int8: bool

    @classmethod
    def scaling(cls, ops: int) -> Chain:
        return cls(max(1, round(ops / CELL_OPS)), SCALING_WIDTH, True)

    @classmethod
    def parse(cls, text: str) -> Chain:
        cells, width, int8 = text.split(",")
        return cls(int(cells), int(width), int8 == "int8")

    def __str__(self) -> str:
        return f"{self.cells},{self.width},{'int8' if self.int8 else 'float32'}"

    def path(self, cache: Path) -> Path:
        dtype = "int8" if self.int8 else "f32"
        return cache / f"gated_shared_{dtype}_w{self.width}_x{self.cells}_v{CHAIN_VERSION}.tflite"


def worker_make_tflite(chains: list[str], cache: str) -> dict[str, Any]:
    """Generate the ``Chain`` models missing from the cache, from a tf.function (a Keras model
    this deep overflows Python's recursion limit)."""
    quiet_tensorflow()
    import numpy as np
    import tensorflow as tf

    made: dict[str, Any] = {}
    for chain in map(Chain.parse, chains):
        path = chain.path(Path(cache))
        if path.exists():
            continue
        progress(f"generating {path.name}")
        rng = np.random.default_rng(chain.cells)
        width = chain.width
        weight = rng.uniform(-1, 1, (width, width)) * (1.5 / math.sqrt(width))
        constants = [rng.uniform(-0.5, 0.5, width) for _ in range(chain.cells)]
        fn = dense_chain(
            tf,
            tf.constant(weight.astype(np.float32)),
            tf.constant(rng.uniform(-0.1, 0.1, width).astype(np.float32)),
            [tf.constant(c.astype(np.float32)) for c in constants],
        )
        converter = tf.lite.TFLiteConverter.from_concrete_functions(
            [fn.get_concrete_function()], fn
        )
        if chain.int8:
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
            samples = [rng.uniform(-1, 1, (1, width)).astype(np.float32) for _ in range(8)]
            converter.representative_dataset = lambda s=samples: ([x] for x in s)
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            converter.inference_input_type = converter.inference_output_type = tf.int8
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".part")
        tmp.write_bytes(converter.convert())
        tmp.replace(path)
        made[str(chain)] = str(path)
    return made


def taps(depth: int) -> set[int]:
    """The layers (or cells) of a chain of ``depth`` whose outputs are graph outputs."""
    return {round(depth * (k + 1) / CHAIN_OUTPUTS) - 1 for k in range(CHAIN_OUTPUTS)}


def dense_chain(tf: Any, weight: Any, bias: Any, constants: list) -> Any:
    """The traced function of ``Chain``: one cell per constant, every matmul on ``weight``."""
    width = weight.shape[0]
    outputs = taps(len(constants))

    @tf.function(input_signature=[tf.TensorSpec((1, width), tf.float32)])
    def chain(x: Any) -> Any:
        tapped = []
        for k, c in enumerate(constants):
            h = tf.matmul(x, weight) + bias
            x = tf.tanh(h) * tf.sigmoid(h + c)
            if k in outputs:
                tapped.append(x)
        return tapped

    return chain
