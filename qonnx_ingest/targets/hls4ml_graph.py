"""The graph view the hls4ml form's rounding rules share: producers, consumers, constant values
and the Quant attributes they read and set."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

QUANTS = ("Quant", "IntQuant")
GRID_OPS = ("MaxPool", "Reshape", "Flatten", "Transpose", "Relu", "Squeeze", "Unsqueeze")


def rounding_of(node: onnx.NodeProto) -> str:
    for attr in node.attribute:
        if attr.name == "rounding_mode":
            mode = helper.get_attribute_value(attr)
            return mode.decode() if isinstance(mode, bytes) else mode
    return "ROUND"


def set_rounding(node: onnx.NodeProto, mode: str) -> None:
    for attr in node.attribute:
        if attr.name == "rounding_mode":
            attr.s = mode.encode()
            return
    node.attribute.append(helper.make_attribute("rounding_mode", mode))


class RoundingGraph:
    """Producers, consumers and constant values of a graph. Edits keep them valid: they change
    a node's attributes or its first input in place, or queue a node in ``in_front``."""

    def __init__(self, model: onnx.ModelProto, constant: Callable[[onnx.NodeProto, list], object]):
        self.model = model
        self.graph = model.graph
        self._quantized = constant
        self.inits = {i.name: i for i in self.graph.initializer}
        self.producer = {o: n for n in self.graph.node for o in n.output}
        self.consumers: dict[str, list[onnx.NodeProto]] = {}
        for node in self.graph.node:
            for name in node.input:
                self.consumers.setdefault(name, []).append(node)
        self.outputs = {o.name for o in self.graph.output}
        # nodes to insert in front of the node producing a name (inserting into the repeated
        # field while iterating over it would shift the nodes under their references)
        self.in_front: dict[str, onnx.NodeProto] = {}

    def value(self, name: str) -> np.ndarray | None:
        """A constant's value: an initializer, or a Quant of constants (qonnx's function)."""
        if name in self.inits:
            return numpy_helper.to_array(self.inits[name])
        node = self.producer.get(name)
        if node is None or node.op_type not in (*QUANTS, "BipolarQuant"):
            return None
        inputs = [self.value(n) for n in node.input]
        if any(v is None for v in inputs):
            return None
        return np.asarray(self._quantized(node, inputs))

    def scalar(self, name: str) -> float | None:
        v = self.value(name)
        return float(v.reshape(-1)[0]) if v is not None and v.size == 1 else None

    def only_consumer(self, name: str) -> onnx.NodeProto | None:
        users = self.consumers.get(name, [])
        return users[0] if len(users) == 1 and name not in self.outputs else None

    def is_activation_quant(self, node: onnx.NodeProto) -> bool:
        return node.op_type in QUANTS and self.value(node.input[0]) is None

    def levels(self, node: onnx.NodeProto) -> tuple[float, int, int] | None:
        """An activation Quant's scalar zero point and its lowest and highest level."""
        z, bits = self.scalar(node.input[2]), self.scalar(node.input[3])
        if z is None or bits is None or z != round(z) or bits != round(bits):
            return None
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        signed, narrow, b = int(attrs.get("signed", 1)), int(attrs.get("narrow", 0)), int(bits)
        low = -(2 ** (b - 1)) + narrow if signed else 0
        high = 2 ** (b - 1) - 1 if signed else 2**b - 1 - narrow
        return z, low, high

    def integer_valued(self, name: str) -> bool:
        """Produced by a Quant of scale 1 and an integer zero point: integers only."""
        node = self.producer.get(name)
        if node is None or node.op_type not in QUANTS:
            return False
        return self.scalar(node.input[1]) == 1.0 and self.levels(node) is not None


def node_label(node: onnx.NodeProto) -> str:
    return node.name or node.output[0]


def power_of_two(value: float | None) -> int | None:
    """``r`` with value == 2**r, else None."""
    if value is None or value <= 0:
        return None
    mantissa, exponent = np.frexp(value)
    return int(exponent) - 1 if mantissa == 0.5 else None
