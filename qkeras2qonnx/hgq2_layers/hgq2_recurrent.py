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

from qkeras2qonnx.compat import hgq2 as compat_hgq2
from qkeras2qonnx.hgq2_layers.hgq2_quantizer import Fixed, read_quantizer, reference
from qonnx_ingest.errors import ConversionError

# As hgq2_layers.EXACT_ACTIVATIONS: activations exact in float32 on every runtime.
_EXACT = frozenset({"linear", "relu", "relu6", "leaky_relu"})


@dataclass
class RecurrentPlan:
    """``hgq2_registry.Plan`` plus ``inner``: the quantizers applied inside the unrolled layer,
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
    _check_layer(layer, "QSimpleRNN", where)
    _check_activation(cell.activation, where)
    activation = _name(cell.activation)
    steps = _steps(layer, "QSimpleRNN", where)
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
        "go_backwards": bool(layer.go_backwards),
    }
    return RecurrentPlan(
        unrolled_simple_rnn_class(), config, weights, weight_quantizers, [iq], None, False, inner
    )


def gru(layer: Any, where: str) -> RecurrentPlan:
    """The plan of a QGRU (reset_after True or False): unrolled (``unrolled_gru_class``)."""
    from keras import ops

    cell = layer.cell
    _check_layer(layer, "QGRU", where)
    for role in ("activation", "recurrent_activation"):
        _check_activation(getattr(cell, role), where)
    steps = _steps(layer, "QGRU", where)
    weights = [cell.qkernel, cell.qrecurrent_kernel] + ([cell.qbias] if cell.use_bias else [])
    weights = [np.asarray(ops.convert_to_numpy(w), dtype=np.float32) for w in weights]
    roles = [("kernel", cell.kq), ("recurrent_kernel", cell.rkq)]
    roles += [("bias", cell.bq)] if cell.use_bias else []  # QGRUCell has no _bq without
    weight_quantizers = [(role, read_quantizer(q, f"{where} {role}")) for role, q in roles]
    iq = read_quantizer(cell.iq, f"{where} input") if cell.enable_iq else None
    step_quantizers = (
        ("state_quantizer", read_quantizer(cell.sq, f"{where} state")),
        ("gate_quantizer", read_quantizer(cell.praq, f"{where} gates", affine_ok=True)),
        ("reset_state_quantizer", read_quantizer(cell.rhq, f"{where} reset state")),
        ("candidate_quantizer", read_quantizer(cell.paq, f"{where} candidate")),
    )
    inner = [(f"t{t}_{role}", q) for t in range(steps) for role, q in step_quantizers]
    config = {
        "name": layer.name,
        "units": int(cell.units),
        "steps": steps,
        "activation": _name(cell.activation),
        "recurrent_activation": _name(cell.recurrent_activation),
        "use_bias": bool(cell.use_bias),
        "reset_after": bool(cell.reset_after),
        "return_sequences": bool(layer.return_sequences),
        "go_backwards": bool(layer.go_backwards),
    }
    return RecurrentPlan(
        unrolled_gru_class(), config, weights, weight_quantizers, [iq], None, False, inner
    )


def _name(activation: Any) -> str:
    return getattr(activation, "__name__", str(activation))


def _check_layer(layer: Any, kind: str, where: str) -> None:
    for flag in ("return_state", "stateful"):
        if getattr(layer, flag, False):
            raise ConversionError(f"{kind} with {flag}=True is not supported", where)
    if compat_hgq2.cell_enables_oq(layer.cell):
        raise ConversionError(f"{kind} with enable_oq is not supported", where)


def _check_activation(activation: Any, where: str) -> None:
    if _name(activation) not in _EXACT:
        raise ConversionError(
            f"activation {_name(activation)!r} is a float function whose last bits differ "
            "between TensorFlow and ONNX runtimes before the next step's quantizers: not "
            "supported",
            where,
        )


def _steps(layer: Any, kind: str, where: str) -> int:
    shape = tuple(layer.input.shape)
    if len(shape) != 3 or shape[1] is None:
        raise ConversionError(f"{kind} needs a static sequence length, input {shape}", where)
    return int(shape[1])


def _order(steps: int, backwards: bool) -> range:
    """The time indices in processing order (Keras: go_backwards reads the sequence from its
    end and returns the outputs in that order)."""
    return range(steps - 1, -1, -1) if backwards else range(steps)


def _apply(x: Any, step: tuple[Fixed | None, int | None]) -> Any:
    """One recorded quantizer step (``hgq2_strip``): its TF ops, then its marker."""
    from qkeras2qonnx.emit.markers import mark
    from qkeras2qonnx.hgq2_layers.hgq2_quantizer import tf_apply

    computed, marker = step
    if computed is not None:
        x = tf_apply(computed, x)
    return x if marker is None else mark(x, marker)


@functools.cache
def _unrolled_base_class() -> type:
    """What both unrolled layers hold: the recurrence's size and direction, its activation,
    the recorded quantizer steps (``inner_steps``, in order) and its output shape."""
    import keras

    class HGQ2Unrolled(keras.layers.Layer):
        def __init__(
            self,
            units: int,
            steps: int,
            activation: str = "linear",
            use_bias: bool = True,
            return_sequences: bool = False,
            go_backwards: bool = False,
            **kwargs: Any,
        ):
            super().__init__(**kwargs)
            self.go_backwards = go_backwards
            self.units, self.steps, self.use_bias = units, steps, use_bias
            self.activation = keras.activations.get(activation)
            self.return_sequences = return_sequences
            self.inner_steps: list = []

        def compute_output_shape(self, input_shape: Any) -> Any:
            if self.return_sequences:
                return (input_shape[0], self.steps, self.units)
            return (input_shape[0], self.units)

    return HGQ2Unrolled


@functools.cache
def unrolled_simple_rnn_class() -> type:
    """The Keras 3 layer computing a QSimpleRNN's steps one by one (built lazily: Keras)."""

    class HGQ2UnrolledSimpleRNN(_unrolled_base_class()):
        """kernel, recurrent_kernel, bias: HGQ2's quantized values (set by ``hgq2_strip``);
        ``inner_steps``: the recorded state / pre-activation quantizer steps, in order."""

        def __init__(self, *args: Any, state_quantized: bool = False, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self.state_quantized = state_quantized

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
            for t in _order(self.steps, self.go_backwards):
                h = tf.matmul(inputs[:, t, :], self.kernel)
                if self.use_bias:
                    h = h + self.bias
                if state is not None:
                    qstate = _apply(state, next(pending)) if self.state_quantized else state
                    h = h + tf.matmul(qstate, self.recurrent_kernel)
                state = self.activation(_apply(h, next(pending)))
                outputs.append(state)
            return tf.stack(outputs, axis=1) if self.return_sequences else state

    return HGQ2UnrolledSimpleRNN


@functools.cache
def unrolled_gru_class() -> type:
    """The Keras 3 layer computing a QGRU's steps one by one, as hgq2 0.2.0's
    ``QGRUCell.call`` does (built lazily: Keras)."""
    import keras

    class HGQ2UnrolledGRU(_unrolled_base_class()):
        """kernel (F, 3U), recurrent_kernel (U, 3U), bias ((2, 3U) with reset_after, else
        (3U,)): HGQ2's quantized values; ``inner_steps``: per step the state, gate, reset
        state and candidate quantizer steps."""

        def __init__(
            self,
            *args: Any,
            recurrent_activation: str = "linear",
            reset_after: bool = True,
            **kwargs: Any,
        ):
            super().__init__(*args, **kwargs)
            self.recurrent_activation = keras.activations.get(recurrent_activation)
            self.reset_after = reset_after

        def build(self, input_shape: Any) -> None:
            features, n = int(input_shape[-1]), 3 * self.units
            self.kernel = self.add_weight(name="kernel", shape=(features, n))
            self.recurrent_kernel = self.add_weight(name="recurrent_kernel", shape=(self.units, n))
            if self.use_bias:
                shape = (2, n) if self.reset_after else (n,)
                self.bias = self.add_weight(name="bias", shape=shape)

        def call(self, inputs: Any) -> Any:
            import tensorflow as tf

            u, pending = self.units, iter(self.inner_steps)
            h = None
            outputs = []
            for t in _order(self.steps, self.go_backwards):
                x_t = inputs[:, t, :]
                matrix_x = tf.matmul(x_t, self.kernel)
                if h is None:  # HGQ2's zero initial state (ZerosLike: shapeless in ONNX)
                    h = matrix_x[:, :u] * 0.0
                qh = _apply(h, next(pending))
                if self.reset_after:
                    inner = tf.matmul(qh, self.recurrent_kernel)
                    if self.use_bias:  # both biases in one Add: tf2onnx folds a sliced weight
                        both = tf.stack([matrix_x, inner], axis=1) + self.bias
                        matrix_x, inner = both[:, 0], both[:, 1]
                else:
                    if self.use_bias:
                        matrix_x = matrix_x + self.bias
                    # all of qh @ recurrent_kernel, its first 2U columns used: the same sums
                    # as HGQ2's qh @ recurrent_kernel[:, :2U], and no sliced weight
                    inner = tf.matmul(qh, self.recurrent_kernel)
                gates = self.recurrent_activation(matrix_x[:, : 2 * u] + inner[:, : 2 * u])
                gates = _apply(gates, next(pending))
                qz, qr = gates[:, :u], gates[:, u:]
                reset_step = next(pending)
                if self.reset_after:
                    recurrent_h = qr * _apply(inner[:, 2 * u :], reset_step)
                else:
                    recurrent_h = tf.matmul(_apply(qr * qh, reset_step), self.recurrent_kernel)
                    recurrent_h = recurrent_h[:, 2 * u :]
                candidate = _apply(
                    self.activation(matrix_x[:, 2 * u :] + recurrent_h), next(pending)
                )
                h = qz * qh + (1 - qz) * candidate
                outputs.append(h)
            return tf.stack(outputs, axis=1) if self.return_sequences else h

    return HGQ2UnrolledGRU
