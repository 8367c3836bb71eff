"""QSimpleRNN / QLSTM / QGRU: stripped to a placeholder, then unrolled in ONNX ops.

tf2onnx turns a plain Keras recurrent layer into one ONNX LSTM/GRU/RNN op, which has no place
for QKeras's quantizers inside the recurrence (the state quantizer, quantized activations on
every step). So the layer is stripped to a placeholder between two markers (the sequence going
in, a tensor of the output's shape coming out); ``recurrent_cells`` then replaces the
placeholder by the cell unrolled over the static sequence length, op for op in QKeras 0.9's
order (``qrecurrent.py``), with one Quant node per weight quantizer and one per application of
the state / activation quantizers on every step.
"""

from __future__ import annotations

import functools
import inspect
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qkeras2qonnx.emit.composite import Builder
from qkeras2qonnx.emit.spec import LOST, QuantSpec
from qkeras2qonnx.environment.backend import is_qkeras_object
from qkeras2qonnx.environment.flavour import KERAS3, model_flavour
from qkeras2qonnx.qkeras_layers import quantizer_proof
from qkeras2qonnx.qkeras_layers.quantizers import describe, rule_for
from qkeras2qonnx.qkeras_layers.stripped import Stripped, config_of
from qonnx_ingest.errors import ConversionError

MESSAGE = "qkeras2qonnx marker rnn {} {}"  # tf2onnx_handler turns it into a Clip marker
NAME = "qkeras2qonnx_rnn_{}_{}"
_markers = itertools.count()

# Quantizer applications per step, by cell kind and role.
PER_STEP = {
    "SimpleRNN": {"state_quantizer": 1, "activation": 1},
    "LSTM": {"state_quantizer": 2, "recurrent_activation": 3, "activation": 2},
    "GRU": {"state_quantizer": 1, "recurrent_activation": 2, "activation": 1},
}


@dataclass
class Weight:
    """A cell weight (Keras layout) and the Quant node on it (None: used as it is)."""

    values: np.ndarray
    spec: QuantSpec | None = None
    quantizer: str | None = None


@dataclass
class CellFunction:
    """An activation or state quantizer applied inside the cell.

    ``plain`` emits the float part (a plain activation, or a quantizer's exact composite);
    ``spec`` is the Quant that follows it (None for a plain activation such as tanh).
    """

    role: str
    plain: Callable[[Builder, str], str]
    spec: QuantSpec | None = None
    quantizer: str | None = None


@dataclass
class Recurrent:
    """One recurrent layer to unroll in place of placeholder ``marker``."""

    path: str
    kind: str
    units: int
    steps: int
    return_sequences: bool
    implementation: int
    kernel: Weight
    recurrent: Weight
    bias: Weight | None
    activation: CellFunction
    recurrent_activation: CellFunction | None
    state: CellFunction | None
    marker: int
    reset_after: bool = False
    go_backwards: bool = False  # steps run over the input from its last time step
    nodes: dict[str, str] = field(default_factory=dict)  # Quant node name -> quantizer
    composite: dict[str, str] = field(default_factory=dict)  # node name -> composite form

    def functions(self) -> list[CellFunction]:
        return [f for f in (self.state, self.recurrent_activation, self.activation) if f]


def quant_name(path: str, role: str, step: int | None = None, k: int = 0) -> str:
    role = role if role.endswith("quantizer") else f"{role}_quantizer"
    return f"{path}/{role}" if step is None else f"{path}/{role}/t{step}/{k}"


def strip_recurrent(layer: Any, where: str) -> Stripped:
    """QSimpleRNN / QLSTM / QGRU -> a placeholder and its ``Recurrent`` plan."""
    plan = recurrent_plan(layer, where, input_shape(layer), next(_markers))
    full = config_of(layer)
    config = {k: full[k] for k in ("name", "trainable", "dtype") if k in full}
    config.update(units=plan.units, return_sequences=plan.return_sequences, marker=plan.marker)
    return Stripped(placeholder_class(), config, [], [], recurrent=plan)


def input_shape(layer: Any) -> tuple:
    """The input shape of a connected layer (tf_keras ``input_shape``, Keras 3 ``input``)."""
    try:
        return tuple(layer.input_shape)
    except AttributeError:
        return tuple(layer.input.shape)


def recurrent_plan(layer: Any, where: str, shape: tuple, marker: int) -> Recurrent:
    """The ``Recurrent`` plan of QSimpleRNN / QLSTM / QGRU ``layer`` on inputs of ``shape``."""
    kind = type(layer).__name__[1:]
    cell = layer.cell
    for flag in ("stateful", "return_state", "time_major"):
        if getattr(layer, flag, False):
            raise ConversionError(
                f"{type(layer).__name__} with {flag}=True is not supported", where
            )
    if len(shape) != 3 or shape[1] is None or shape[2] is None:
        raise ConversionError(
            f"{type(layer).__name__} needs a static sequence length to unroll (input {shape})",
            where,
        )
    reset_after = bool(getattr(cell, "reset_after", False))
    keras3 = model_flavour(layer) == KERAS3
    if kind == "GRU" and not keras3 and not cell.recurrent_quantizer:
        # QKeras 0.9's QGRUCell then multiplies the state by the *input* kernel (a bug).
        raise ConversionError("QGRU without recurrent_quantizer is not supported", where)
    if kind == "GRU" and keras3 and not reset_after and getattr(cell, "implementation", 1) == 2:
        # qkeras-v3 1.2.1 splits the 2*units recurrent product into three (it fails to run).
        raise ConversionError(
            "QGRU with implementation=2 and reset_after=False does not run in qkeras-v3 1.2.1",
            where,
        )
    values = [np.asarray(w, dtype=np.float32) for w in layer.get_weights()]
    use_bias = bool(cell.use_bias)
    plan = Recurrent(
        path=where,
        kind=kind,
        units=int(cell.units),
        steps=int(shape[1]),
        return_sequences=bool(layer.return_sequences),
        implementation=int(getattr(cell, "implementation", 1)),
        kernel=_weight(cell, "kernel_quantizer", values[0], where),
        recurrent=_weight(cell, "recurrent_quantizer", values[1], where),
        bias=_weight(cell, "bias_quantizer", values[2], where) if use_bias else None,
        activation=_function(cell.activation, "activation", where),
        recurrent_activation=(
            _function(cell.recurrent_activation, "recurrent_activation", where)
            if kind != "SimpleRNN"
            else None
        ),
        state=(
            _function(cell.state_quantizer_internal, "state_quantizer", where)
            if cell.state_quantizer
            else None
        ),
        marker=marker,
        go_backwards=bool(getattr(layer, "go_backwards", False)),
        reset_after=reset_after,
    )
    for role, w in (("kernel", plan.kernel), ("recurrent", plan.recurrent), ("bias", plan.bias)):
        if w is not None and w.spec is not None:
            plan.nodes[quant_name(where, f"{role}_quantizer")] = w.quantizer
    for f in plan.functions():
        if f.spec is not None:
            for step in range(plan.steps):
                for k in range(PER_STEP[kind][f.role]):
                    plan.nodes[quant_name(where, f.role, step, k)] = f.quantizer
                    if f.spec.composite is not None:
                        plan.composite[quant_name(where, f.role, step, k)] = f.spec.composite.form
    return plan


def next_marker() -> int:
    return next(_markers)


def _weight(cell: Any, role: str, value: np.ndarray, where: str) -> Weight:
    if not getattr(cell, role, None):  # QKeras quantizes only when the argument is truthy
        return Weight(value)
    q = getattr(cell, f"{role}_internal")
    at = f"{where} {role}"
    spec = rule_for(q, at).resolve(q, value, at)
    if spec.kind == LOST:
        raise ConversionError(
            f"{describe(q)}: non-uniform weight quantizers of recurrent layers are not supported",
            at,
        )
    values = quantizer_proof.weight_values(q, spec, value, at)
    return Weight(np.asarray(values, dtype=np.float32), spec, describe(q))


def _hard_sigmoid(slope: float) -> Callable[[Builder, str], str]:
    def emit(b: Builder, x: str) -> str:
        return b.op("Clip", b.op("Add", b.op("Mul", x, slope), 0.5), 0.0, 1.0)

    return emit


def _op(op_type: str) -> Callable[[Builder, str], str]:
    return lambda b, x: b.op(op_type, x)


# Plain activation functions: (module prefix, name) -> the same float32 ops in ONNX.
# tanh / sigmoid are float approximations (last bits may differ between TF and onnxruntime).
_PLAIN: dict[tuple[str, str], Callable[[Builder, str], str]] = {
    ("qkeras", "hard_sigmoid"): _hard_sigmoid(0.5),  # K.clip(0.5 * x + 0.5, 0, 1)
    ("tf_keras", "hard_sigmoid"): _hard_sigmoid(0.2),  # x * 0.2 + 0.5, clipped
    ("tf_keras", "tanh"): _op("Tanh"),
    ("tf_keras", "sigmoid"): _op("Sigmoid"),
    ("tf_keras", "relu"): _op("Relu"),
    ("tf_keras", "linear"): lambda b, x: x,
    # Keras 3 (qkeras-v3): hard_sigmoid is relu6(x + 3) / 6 there.
    ("keras", "hard_sigmoid"): lambda b, x: b.op(
        "Div", b.op("Clip", b.op("Add", x, 3.0), 0.0, 6.0), 6.0
    ),
    ("keras", "tanh"): _op("Tanh"),
    ("keras", "sigmoid"): _op("Sigmoid"),
    ("keras", "relu"): _op("Relu"),
    ("keras", "linear"): lambda b, x: x,
}
_PRE = {"linear": lambda b, x: x, "relu": _op("Relu")}


def _function(fn: Any, role: str, where: str) -> CellFunction:
    at = f"{where} {role}"
    if fn is None:
        return CellFunction(role, lambda b, x: x)
    if inspect.isfunction(fn):
        plain = _PLAIN.get((fn.__module__.split(".")[0], fn.__name__))
        if plain is not None:
            return CellFunction(role, plain)
        if not is_qkeras_object(fn):
            raise ConversionError(f"unsupported activation {fn.__name__} in a recurrent cell", at)
    rule = rule_for(fn, at)
    spec = rule.resolve(fn, None, at)
    if spec.kind == LOST or spec.scale.size != 1:
        raise ConversionError(f"{describe(fn)} has no per-tensor QONNX form", at)
    activation = rule.activation_for(fn)
    pre = _PRE.get(activation.name)
    if pre is None:
        raise ConversionError(f"{describe(fn)}: activation {activation.name} in a cell", at)
    quantizer_proof.check_activation(fn, spec, activation, at)
    composite = spec.composite

    def plain(b: Builder, x: str) -> str:
        y = pre(b, x)
        return composite.emit(b, y) if composite is not None else y

    return CellFunction(role, plain, spec, describe(fn))


@functools.cache
def placeholder_class() -> type:
    """A layer with the recurrent layer's output shape between two markers (lazily: TF)."""
    import tensorflow as tf

    from qkeras2qonnx.environment.backend import keras

    class RecurrentPlaceholder(keras().layers.Layer):
        def __init__(self, units: int, return_sequences: bool, marker: int, **kwargs: Any):
            super().__init__(**kwargs)
            self.units, self.return_sequences, self.marker = units, return_sequences, marker

        def call(self, inputs: Any, mask: Any = None) -> Any:
            # ``mask``: Keras 3 passes the recorded call arguments of the recurrent layer
            m = self.marker
            x = tf.debugging.check_numerics(
                inputs, MESSAGE.format("in", m), name=NAME.format("in", m)
            )
            if self.return_sequences:
                y = tf.tile(x[:, :, :1], [1, 1, self.units])
            else:
                y = tf.tile(x[:, -1, :1], [1, self.units])
            return tf.debugging.check_numerics(
                y, MESSAGE.format("out", m), name=NAME.format("out", m)
            )

        def compute_output_shape(self, input_shape: Any) -> Any:
            shape = tuple(input_shape)
            if self.return_sequences:
                return (*shape[:2], self.units)
            return (shape[0], self.units)

        def get_config(self) -> dict:
            config = super().get_config()
            config.update(
                units=self.units, return_sequences=self.return_sequences, marker=self.marker
            )
            return config

    return RecurrentPlaceholder
