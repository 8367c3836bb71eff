"""Hybrid (dynamic-range) LSTM: float activations, int8 weights, the float step otherwise.

What TF's converter makes of a Keras LSTM with ``Optimize.DEFAULT`` and no representative
data (each gate's weights int8 once they reach 1024 elements). TFLite's kernel (lstm_eval.cc
LstmStepHybrid / CalculateLstmGateHybrid) starts each gate from its bias (zero with layer
norm), quantizes the step's input rows and the previous output state's rows on the fly and
adds each int8 product scaled back to float (``ops.hybrid.quant``), input part first; the
rest (layer norm, activations, cell update and clip, hidden state) is the float step
(``ops.recurrent.lstm.FloatLstm``). The kernel reads each weight tensor's one scale: per-channel
weights, and the peephole and projection variants (whose int8 weights TF's converter does not
produce from Keras), are refused by name.
"""

from __future__ import annotations

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.hybrid.quant import HybridMatrix, hybrid_matrix, hybrid_product
from tflite2qonnx.ops.recurrent.lstm import FloatLstm
from tflite2qonnx.ops.recurrent.lstm_operands import Direction


def is_hybrid_lstm(b: GraphBuilder, op: Operator, d: Direction) -> bool:
    """Float input with int8 weights (the kernel dispatches on input-to-output's type)."""
    return b.tensor(op.inputs[0]).dtype == "float32" and b.tensor(d.x_weights[3]).dtype == "int8"


class HybridLstm(FloatLstm):
    """The hybrid kernel's arithmetic for ``ops.recurrent.lstm.run_sequence``."""

    hybrid = True

    def __init__(self, b: GraphBuilder, op: Operator, d: Direction):
        super().__init__(b, op, d)
        self.asymmetric = bool(op.options.get("asymmetric_quantize_inputs", False))
        for what, present in (("peepholes", d.peephole), ("projection", d.projection[0] >= 0)):
            if present:
                raise ConversionError(f"hybrid {op.name} with {what} is not supported", op.where)
        for g in d.gates:
            if b.tensor(d.biases[g]).dtype != "float32":
                raise ConversionError(f"hybrid {op.name} needs float gate biases", op.where)
        self._matrices: dict[str, HybridMatrix] = {}

    def stacked(self, indices: tuple[int, ...], gates: tuple[int, ...]) -> str:
        """The gates' int8 weights side by side (each through its Quant), each column with
        its gate's scale."""
        chosen = [indices[g] for g in gates]
        m = hybrid_matrix(self.b, chosen, self.asymmetric, "lstm_hybrid", self.op.where)
        self._matrices[m.weights] = m
        return m.weights

    def x_part(self, x: str, wx: str, gates: tuple[int, ...]) -> str:
        """bias + the input product for all steps at once (the product alone with layer norm,
        which adds the bias after normalizing)."""
        b, d = self.b, self.d
        y = hybrid_product(b, x, self._matrices[wx])
        if d.normalized:
            return y
        bias = b.emit("Concat", [b.input(d.biases[g]) for g in gates], axis=0)[0]
        return b.emit("Add", [bias, y])[0]

    def recurrent(self, h: str, wh: str) -> str:
        """The output state's product; a zero state (the first step's) adds exactly 0, as the
        kernel's skipping it does."""
        return hybrid_product(self.b, h, self._matrices[wh])
