"""Float LOGISTIC / TANH in models that quantize on the fly (a hybrid kernel anywhere): the
reference kernels' float32 arithmetic (``tflite2qonnx.ops.arith.float_kernels``), against the
interpreter on 60k values; a float model without a hybrid kernel keeps ONNX Sigmoid / Tanh.

Why it matters: onnxruntime's Sigmoid / Tanh are several ulps off on about half the values,
and a hybrid kernel rounds each input row to int8, so an ulp can move a value a whole step
(the dynamic-range stateful LSTM of test_stateful_family drifted to 1.4e-4).
"""

from __future__ import annotations

import ctypes
import ctypes.util

import numpy as np
import onnx
import pytest
from litert_compare import reference_interpreter, run_ours
from tflite_writer import build_model

import tflite2qonnx
from qonnx_ingest.quant_lowering import lower_quants

N = 60_000


def _activations_model(hybrid: bool) -> bytes:
    """x [N] -> TANH, LOGISTIC; ``hybrid``: beside them an unrelated FULLY_CONNECTED with int8
    weights on a float input (the model then quantizes on the fly)."""
    tensors = [{"name": "x", "shape": (N,)}, {"name": "tanh", "shape": (N,)},
               {"name": "logistic", "shape": (N,)}]  # fmt: skip
    ops = [{"op": "TANH", "inputs": [0], "outputs": [1]},
           {"op": "LOGISTIC", "inputs": [0], "outputs": [2]}]  # fmt: skip
    inputs, outputs = [0], [1, 2]
    if hybrid:
        w = np.arange(-8, 8, dtype=np.int8).reshape(2, 8)
        tensors += [{"name": "u", "shape": (1, 8)}, {"name": "y", "shape": (1, 2)},
                    {"name": "w", "shape": (2, 8), "dtype": "int8", "data": w,
                     "quant": ([0.01], [0])}]  # fmt: skip
        ops.append({"op": "FULLY_CONNECTED", "inputs": [3, 5, -1], "outputs": [4]})
        inputs, outputs = [0, 3], [1, 2, 4]
    return build_model(tensors, ops, inputs, outputs)


def _values() -> np.ndarray:
    rng = np.random.default_rng(0)
    special = [0.0, 1e-30, -1e-30, 1.0, -1.0, 22.0, -22.0, 16.619047, 16.62, -9.0, -9.0001,
               0.34657, -0.34657, 1.0397, -1.0397, 88.0, -88.0, 100.0, -100.0]  # fmt: skip
    parts = [rng.uniform(-12, 12, N // 2), rng.normal(0, 0.5, N // 4), rng.normal(0, 1e-3, N // 8)]
    parts.append(rng.uniform(-30, 30, N - sum(len(p) for p in parts) - len(special)))
    return np.concatenate([*parts, special]).astype(np.float32)


@pytest.fixture(scope="module")
def hybrid_pair():
    """(ours, the interpreter's) TANH and LOGISTIC of ``_values``, in the hybrid model."""
    data = _activations_model(hybrid=True)
    x = _values()
    u = np.linspace(-1, 1, 8, dtype=np.float32)[None]
    it = reference_interpreter(data)
    feeds = dict(zip((d["index"] for d in it.get_input_details()), (x, u), strict=True))
    for index, value in feeds.items():
        it.set_tensor(index, value)
    it.invoke()
    theirs = {d["name"]: it.get_tensor(d["index"]) for d in it.get_output_details()}
    model = tflite2qonnx.convert(data)
    names = [i.name for i in model.graph.input]
    ours = run_ours(lower_quants(model), dict(zip(names, (x, u), strict=True)))
    return {k: (ours[k], theirs[k]) for k in ("tanh", "logistic")}


def _ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))


def test_tanh_in_a_hybrid_model_equals_the_reference_kernel_bit_for_bit(hybrid_pair) -> None:
    ours, theirs = hybrid_pair["tanh"]
    np.testing.assert_array_equal(ours, theirs)


def test_logistic_in_a_hybrid_model_is_within_two_ulps_and_mostly_equal(hybrid_pair) -> None:
    """expf is rounded once from float64 where glibc's own rounds differently on rare values
    (measured: 0.03% unequal, two ulps at most)."""
    ours, theirs = hybrid_pair["logistic"]
    assert np.all(np.isfinite(ours))
    assert _ulps(ours, theirs).max() <= 2
    assert np.mean(ours != theirs) < 1e-3


def test_a_model_without_hybrid_kernels_keeps_onnx_sigmoid_and_tanh() -> None:
    model = tflite2qonnx.convert(_activations_model(hybrid=False))
    assert sorted(n.op_type for n in model.graph.node) == ["Sigmoid", "Tanh"]
    hybrid = tflite2qonnx.convert(_activations_model(hybrid=True))
    assert not {"Sigmoid", "Tanh"} & {n.op_type for n in hybrid.graph.node}
    onnx.checker.check_model(hybrid)


def _libm_expm1f():
    name = ctypes.util.find_library("m")
    if name is None or "libm.so.6" not in name:
        pytest.skip("glibc's libm is the reference of the expm1f emulation")
    fn = ctypes.CDLL(name).expm1f
    fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
    return fn


def test_expm1f_equals_glibc_on_every_branch() -> None:
    """The general expm1f (every k case: 0, +-1, 2..22, 23..56, beyond, tiny, -1), against
    the platform's own libm, which the interpreter's std::tanh calls."""
    from onnx import TensorProto, helper

    from tflite2qonnx.ops.arith.expm1f import expm1f

    libm = _libm_expm1f()
    rng = np.random.default_rng(1)
    parts = [rng.uniform(-60, 60, 4000), rng.uniform(-2, 2, 4000), rng.normal(0, 1e-4, 500)]
    x = np.concatenate([*parts, rng.normal(0, 1e-8, 100)]).astype(np.float32)
    b = _Builder()
    y = expm1f(b, "x")
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [len(x)]) for n in ("x", y)]
    graph = helper.make_graph(b.nodes, "expm1f", [io[0]], [io[1]], b.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    ours = run_ours(model, {"x": x})[y]
    theirs = np.array([libm(float(v)) for v in x], np.float32)
    np.testing.assert_array_equal(ours, theirs)


class _Builder:
    """The two GraphBuilder methods expm1f uses, on a bare node list."""

    def __init__(self):
        self.nodes, self.initializers = [], []

    def const(self, value: np.ndarray, hint: str) -> str:
        name = f"{hint}_{len(self.initializers)}"
        self.initializers.append(onnx.numpy_helper.from_array(np.asarray(value), name))
        return name

    def emit(self, op_type: str, inputs: list[str], **attrs) -> list[str]:
        name = f"{op_type}_{len(self.nodes)}"
        self.nodes.append(onnx.helper.make_node(op_type, inputs, [name], **attrs))
        return [name]
