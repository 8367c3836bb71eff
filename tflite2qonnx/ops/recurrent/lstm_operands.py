"""The operand layout of TFLite's LSTM kernels: which tensor is which weight, bias, state.

Its own module so that the float unrolling (``ops.recurrent.lstm``) and the integer one
(``ops.recurrent.lstm_int``) both read it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from tflite2qonnx.model import Operator

GATES = ("input", "forget", "cell", "output")


@dataclass(frozen=True)
class Direction:
    """The operand tensor indices of one LSTM direction (-1: omitted)."""

    x_weights: tuple[int, int, int, int]  # input-to-{input, forget, cell, output}
    h_weights: tuple[int, int, int, int]  # recurrent-to-...
    peepholes: tuple[int, int, int]  # cell-to-{input, forget, output}
    biases: tuple[int, int, int, int]
    projection: tuple[int, int]  # weights, bias
    states: tuple[int, int]  # output state, cell state
    layer_norm: tuple[int, int, int, int] = (-1, -1, -1, -1)

    @property
    def cifg(self) -> bool:
        return self.x_weights[0] < 0

    @property
    def peephole(self) -> bool:
        return self.peepholes[1] >= 0

    @property
    def normalized(self) -> bool:
        return self.layer_norm[1] >= 0

    @property
    def gates(self) -> tuple[int, ...]:
        """Positions (in GATES) of the gates this direction computes."""
        return (1, 2, 3) if self.cifg else (0, 1, 2, 3)


def operand(op: Operator, k: int) -> int:
    """Tensor index of operand ``k``; -1 when omitted or past the end."""
    return op.inputs[k] if k < len(op.inputs) else -1


def unidirectional_direction(op: Operator) -> Direction:
    """TFLite's operand layout of UNIDIRECTIONAL_SEQUENCE_LSTM (and LSTM)."""
    g = [operand(op, k) for k in range(24)]
    return Direction(
        tuple(g[1:5]), tuple(g[5:9]), tuple(g[9:12]), tuple(g[12:16]), (g[16], g[17]),
        (g[18], g[19]), tuple(g[20:24]),
    )  # fmt: skip
