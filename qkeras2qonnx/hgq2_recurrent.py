"""HGQ2's QSimpleRNN, unrolled over its static sequence length in the stripped model.

hgq2 0.2.0's ``QSimpleRNNCell.call`` per step t (inference): ``qstate = sq(h[t-1])`` (when
``enable_sq``), ``qx = iq(x[t])``, ``h = qx @ qkernel + qbias + qstate @ qrecurrent_kernel``,
``h[t] = activation(paq(h))``, from a zero state. A plain Keras SimpleRNN (one ONNX RNN op)
has no place for the quantizers inside the recurrence, so the stripped model computes the
steps with TensorFlow ops (tf2onnx writes MatMul / Add): HGQ2's quantized kernel, recurrent
kernel and bias behind their covering Quants (weight markers, as for QDense), ``iq`` once on
the whole sequence (elementwise, the same widths on every step), and on every step the state
and pre-activation quantizers in standard ops with a covering Quant (or one plain Quant) of
their own, named ``<layer>/t<step>_state_quantizer`` / ``t<step>_pre_activation_quantizer``.
The state quantizer of step 0 reads the zero state: it is left out once checked to output 0.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qkeras2qonnx.hgq2_quantizer import Fixed, read_quantizer, reference
from qonnx_ingest.errors import ConversionError

# As hgq2_layers.EXACT_ACTIVATIONS: activations exact in float32 on every runtime.
_EXACT = frozenset({"linear", "relu", "relu6", "leaky_relu"})


@dataclass
class RecurrentPlan:
    """``hgq2_layers.Plan`` plus ``inner``: the quantizers applied inside the unrolled layer,
    (role, quantizer) in the order ``hgq2_strip`` hands their steps to the layer."""

    layer_class: type
    config: dict
    weights: list[np.ndarray] = field(default_factory=list)
    weight_quantizers: list[tuple[str, Any]] = field(default_factory=list)
    inputs: list[Any] = field(default_factory=list)
    output: Any = None
    output_in_layer: bool = False
    inner: list[tuple[str, Any]] = field(default_factory=list)


def simple_rnn(layer: Any, where: str) -> RecurrentPlan:
    """The plan of a QSimpleRNN: unrolled (``unrolled_simple_rnn_class``)."""
    from keras import ops

    cell = layer.cell
    for flag in ("return_state", "stateful", "go_backwards"):
        if getattr(layer, flag, False):
            raise ConversionError(f"QSimpleRNN with {flag}=True is not supported", where)
    if getattr(cell, "_enable_oq", False):
        raise ConversionError("QSimpleRNN with enable_oq is not supported", where)
    activation = getattr(cell.activation, "__name__", str(cell.activation))
    if activation not in _EXACT:
        raise ConversionError(
            f"activation {activation!r} is a float function whose last bits differ between "
            "TensorFlow and ONNX runtimes before the next step's quantizers: not supported",
            where,
        )
    shape = tuple(layer.input.shape)
    if len(shape) != 3 or shape[1] is None:
        raise ConversionError(f"QSimpleRNN needs a static sequence length, input {shape}", where)
    steps = int(shape[1])
    weights = [cell.qkernel, cell.qrecurrent_kernel] + ([cell.qbias] if cell.use_bias else [])
    weights = [np.asarray(ops.convert_to_numpy(w), dtype=np.float32) for w in weights]
    roles = [("kernel", cell.kq), ("recurrent_kernel", cell.rkq), ("bias", cell.bq)]
    weight_quantizers = [
        (role, read_quantizer(q, f"{where} {role}")) for role, q in roles[: len(weights)]
    ]
    iq = read_quantizer(cell.iq, f"{where} input") if cell.enable_iq else None
    sq = read_quantizer(cell.sq, f"{where} state") if cell.enable_sq else None
    paq = read_quantizer(cell.paq, f"{where} pre-activation")
    if sq is not None and np.any(reference(sq, np.zeros(sq.k.shape)) != 0):
        raise ConversionError("the state quantizer does not map the zero state to 0", where)
    inner = []
    for t in range(steps):
        if t and sq is not None:
            inner.append((f"t{t}_state_quantizer", sq))
        inner.append((f"t{t}_pre_activation_quantizer", paq))
    config = {
        "name": layer.name,
        "units": int(cell.units),
        "steps": steps,
        "activation": activation,
        "use_bias": bool(cell.use_bias),
        "state_quantized": sq is not None,
        "return_sequences": bool(layer.return_sequences),
    }
    return RecurrentPlan(
        unrolled_simple_rnn_class(), config, weights, weight_quantizers, [iq], None, False, inner
    )


def _apply(x: Any, step: tuple[Fixed | None, int | None]) -> Any:
    """One recorded quantizer step (``hgq2_strip``): its TF ops, then its marker."""
    from qkeras2qonnx.hgq2_quantizer import tf_apply
    from qkeras2qonnx.markers import mark

    computed, marker = step
    if computed is not None:
        x = tf_apply(computed, x)
    return x if marker is None else mark(x, marker)


@functools.cache
def unrolled_simple_rnn_class() -> type:
    """The Keras 3 layer computing a QSimpleRNN's steps one by one (built lazily: Keras)."""
    import keras

    class HGQ2UnrolledSimpleRNN(keras.layers.Layer):
        """kernel, recurrent_kernel, bias: HGQ2's quantized values (set by ``hgq2_strip``);
        ``inner_steps``: the recorded state / pre-activation quantizer steps, in order."""

        def __init__(
            self,
            units: int,
            steps: int,
            activation: str = "linear",
            use_bias: bool = True,
            state_quantized: bool = False,
            return_sequences: bool = False,
            **kwargs: Any,
        ):
            super().__init__(**kwargs)
            self.units, self.steps, self.use_bias = units, steps, use_bias
            self.activation = keras.activations.get(activation)
            self.state_quantized, self.return_sequences = state_quantized, return_sequences
            self.inner_steps: list = []

        def build(self, input_shape: Any) -> None:
            features = int(input_shape[-1])
            self.kernel = self.add_weight(name="kernel", shape=(features, self.units))
            self.recurrent_kernel = self.add_weight(
                name="recurrent_kernel", shape=(self.units, self.units)
            )
            if self.use_bias:
                self.bias = self.add_weight(name="bias", shape=(self.units,))

        def call(self, inputs: Any) -> Any:
            import tensorflow as tf

            pending = iter(self.inner_steps)
            state, outputs = None, []
            for t in range(self.steps):
                h = tf.matmul(inputs[:, t, :], self.kernel)
                if self.use_bias:
                    h = h + self.bias
                if state is not None:
                    qstate = _apply(state, next(pending)) if self.state_quantized else state
                    h = h + tf.matmul(qstate, self.recurrent_kernel)
                state = self.activation(_apply(h, next(pending)))
                outputs.append(state)
            return tf.stack(outputs, axis=1) if self.return_sequences else state

        def compute_output_shape(self, input_shape: Any) -> Any:
            if self.return_sequences:
                return (input_shape[0], self.steps, self.units)
            return (input_shape[0], self.units)

    return HGQ2UnrolledSimpleRNN
