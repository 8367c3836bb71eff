"""Exact thresholds for the FINN form: the least float32 input that a monotone function maps to
each level, found by bisection over the float32 values in order.

The function is a Quant (qonnx's ``int_quant``, what qonnx's executor runs), or a chain in
front of one: scalar Mul / Div by a positive constant, Relu, Clip and constant-parameter
Quants, as the TFLite converter writes a requantization that rounds twice
(``kernel_rounding``: onto a finer grid at 32 bits, then onto the output's) and a fused
activation range (Clip). Each step is non-decreasing, so the chain is too, and ``x >= t_k``
on its thresholds is the chain on every float32 input; the chain is evaluated step by step in
float32, as the executor evaluates it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

CHAIN_OPS = {"Mul", "Div", "Relu", "Clip", "Quant"}
# steps FINN absorbs into thresholds exactly by itself; a chain of these alone is left to it
# (a Div it turns into a Mul by the reciprocal, inexact unless a power of two)
_ABSORBED = {"Mul", "Relu"}
LOWEST, HIGHEST = np.finfo(np.float32).min, np.finfo(np.float32).max


def ordered(values: np.ndarray) -> np.ndarray:
    """float32 -> int64 keys in the same order (negative floats' bit patterns run backwards)."""
    bits = values.astype(np.float32).view(np.int32).astype(np.int64)
    return np.where(bits >= 0, bits, -(bits & 0x7FFFFFFF))


def unordered(keys: np.ndarray) -> np.ndarray:
    bits = np.where(keys >= 0, keys, (-keys) | 0x80000000).astype(np.uint32)
    return bits.view(np.float32)


def least_reaching(
    level: Callable[[np.ndarray], np.ndarray],
    targets: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
) -> np.ndarray:
    """Per target, the least float32 in (low, high] (ordered keys) with ``level >= target``,
    given ``level(low) < target <= level(high)`` and ``level`` non-decreasing."""
    while np.any(high - low > 1):
        mid = (low + high) // 2
        up = level(unordered(mid)) >= targets
        high = np.where(up, mid, high)
        low = np.where(up, low, mid)
    return unordered(high)


def quant_chain(
    x: str,
    producers: dict[str, onnx.NodeProto],
    readers: dict[str, int],
    constants: dict[str, onnx.TensorProto],
) -> list[onnx.NodeProto]:
    """The non-decreasing scalar steps in front of tensor ``x`` (first step first), as far back
    as each tensor between has one reader; empty unless one step is a Quant, a Clip (TFLite's
    fused RELU6 / activation range) or a Div: a chain of Mul and Relu alone is FINN's."""
    chain: list[onnx.NodeProto] = []
    while x in producers and readers.get(x, 0) == 1:
        node = producers[x]
        if not _monotone_step(node, constants):
            break
        chain.insert(0, node)
        x = _dynamic_input(node, constants)
    return chain if any(n.op_type not in _ABSORBED for n in chain) else []


def chain_input(chain: list[onnx.NodeProto], constants: dict) -> str:
    return _dynamic_input(chain[0], constants)


def chain_function(
    chain: list[onnx.NodeProto], constants: dict
) -> Callable[[np.ndarray], np.ndarray]:
    """The chain as a float32 function, step by step as the executor computes it."""
    from qonnx.custom_op.general.intquant import int_quant

    steps: list[tuple[str, list[np.float32], dict]] = []
    for node in chain:
        c = [np.float32(numpy_helper.to_array(constants[n]).flat[0]) for n in node.input[1:]]
        if node.op_type == "Mul" and node.input[0] in constants:
            c = [np.float32(numpy_helper.to_array(constants[node.input[0]]).flat[0])]
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        rounding = attrs.get("rounding_mode", b"ROUND")
        attrs["rounding_mode"] = rounding.decode() if isinstance(rounding, bytes) else rounding
        steps.append((node.op_type, c, attrs))

    def step(v: np.ndarray, op: str, c: list[np.float32], attrs: dict) -> np.ndarray:
        if op == "Relu":
            return np.maximum(v, np.float32(0))
        if op == "Mul":
            return v * c[0]
        if op == "Div":
            return v / c[0]
        if op == "Clip":
            return np.clip(v, c[0], c[1])
        signed, narrow = bool(attrs.get("signed", 1)), bool(attrs.get("narrow", 0))
        return np.asarray(int_quant(v, *c, signed, narrow, attrs["rounding_mode"]), np.float32)

    def run(x: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for op, c, attrs in steps:
                x = step(x.astype(np.float32), op, c, attrs)
        return x

    return run


def _dynamic_input(node: onnx.NodeProto, constants: dict) -> str:
    if node.op_type == "Mul" and node.input[0] in constants:
        return node.input[1]
    return node.input[0]


def _monotone_step(node: onnx.NodeProto, constants: dict) -> bool:
    if node.op_type not in CHAIN_OPS or len(node.output) != 1:
        return False
    if node.op_type == "Relu":
        return True
    others = [n for n in node.input if n != _dynamic_input(node, constants)]
    if not all(n in constants for n in others):
        return False
    values = [numpy_helper.to_array(constants[n]) for n in others]
    if any(v.size != 1 for v in values):
        return False
    if node.op_type == "Quant":
        return float(values[0].flat[0]) > 0 and float(values[2].flat[0]) >= 2
    if node.op_type == "Clip":  # both bounds given (opset 11+), low <= high
        return len(values) == 2 and float(values[0].flat[0]) <= float(values[1].flat[0])
    return float(values[0].flat[0]) > 0 and np.isfinite(values[0]).all()
