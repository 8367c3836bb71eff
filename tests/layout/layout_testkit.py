"""Helpers for the layout tests: building source-layout graphs, running the converted model on
source-layout data, and numpy references computed directly in NHWC (never by the pass)."""

from __future__ import annotations

import json

import numpy as np
import onnx
from numpy.lib.stride_tricks import sliding_window_view
from onnx import TensorProto, helper, numpy_helper

from layout import LAYOUT_KEY, to_channels_first
from qonnx_ingest.quant import QONNX_DOMAIN

F32 = TensorProto.FLOAT


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def model(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, list],
    outputs: dict[str, list | None],
    inits: dict[str, np.ndarray] | None = None,
    *,
    opset: int = 13,
    value_info: dict[str, list] | None = None,
    elem: dict[str, int] | None = None,
) -> onnx.ModelProto:
    """A graph in source layout; shapes are NHWC-style lists (None: unknown shape)."""
    elem = elem or {}

    def vi(name: str, shape: list | None) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, elem.get(name, F32), shape)

    graph = helper.make_graph(
        nodes,
        "g",
        [vi(n, s) for n, s in inputs.items()],
        [vi(n, s) for n, s in outputs.items()],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in (inits or {}).items()],
        value_info=[vi(n, s) for n, s in (value_info or {}).items()],
    )
    opsets = [helper.make_opsetid("", opset), helper.make_opsetid(QONNX_DOMAIN, 1)]
    return helper.make_model(graph, opset_imports=opsets)


def layout_record(m: onnx.ModelProto) -> dict:
    for p in m.metadata_props:
        if p.key == LAYOUT_KEY:
            return json.loads(p.value)
    return {}


def count(m: onnx.ModelProto, op_type: str) -> int:
    return sum(n.op_type == op_type for n in m.graph.node)


def initializer_shapes(m: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    return {t.name: tuple(t.dims) for t in m.graph.initializer}


def run(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run a converted model on source-layout feeds; outputs come back in source layout.

    The recorded per-tensor permutation is applied to inputs and undone on outputs, as a user
    of the converted model would do. Graphs with QONNX quantizers run on qonnx's executor.
    """
    record = layout_record(m)
    stored = {k: (v.transpose(record[k]["perm"]) if k in record else v) for k, v in feeds.items()}
    if any(n.domain == QONNX_DOMAIN for n in m.graph.node):
        from qonnx_ingest.execute import execute_qonnx

        results = execute_qonnx(m, stored)
    else:
        import onnxruntime as ort

        session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        names = [o.name for o in m.graph.output]
        results = dict(zip(names, session.run(names, stored), strict=True))
    return {
        k: (v.transpose(np.argsort(record[k]["perm"])) if k in record else v)
        for k, v in results.items()
    }


def check(m: onnx.ModelProto, shapes: dict | None = None, **kwargs) -> onnx.ModelProto:
    """to_channels_first plus onnx.checker; strict shape inference for standard-only graphs,
    which also proves every value_info shape the pass wrote is consistent.

    ``shapes`` gives graph outputs their (source-layout) shapes first: the checker wants them,
    and tests take them from the numpy reference.
    """
    for vi in m.graph.output:
        if shapes and vi.name in shapes:
            vi.CopyFrom(
                helper.make_tensor_value_info(
                    vi.name, vi.type.tensor_type.elem_type, list(shapes[vi.name])
                )
            )
    out = to_channels_first(m, **kwargs)
    quantized = any(n.domain == QONNX_DOMAIN for n in out.graph.node)
    onnx.checker.check_model(out, full_check=not quantized)
    return out


# ---------------------------------------------------------------------- numpy references (NHWC)
def conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, pad: int = 0) -> np.ndarray:
    """Channels-last convolution (stride 1, symmetric pad) of x [N, *S, C] with w [O, C, *K]."""
    nsp = x.ndim - 2
    if pad:
        x = np.pad(x, [(0, 0)] + [(pad, pad)] * nsp + [(0, 0)])
    windows = sliding_window_view(x, w.shape[2:], axis=tuple(range(1, 1 + nsp)))
    sp, k = "ijk"[:nsp], "IJK"[:nsp]
    y = np.einsum(f"n{sp}c{k},oc{k}->n{sp}o", windows, w)
    return y if b is None else y + b


def maxpool(x: np.ndarray, k: int) -> np.ndarray:
    """Channels-last max pool, kernel k, stride 1, no padding."""
    nsp = x.ndim - 2
    windows = sliding_window_view(x, (k,) * nsp, axis=tuple(range(1, 1 + nsp)))
    return windows.max(axis=tuple(range(x.ndim, x.ndim + nsp)))


def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


def quant(x, scale, zero_point=0.0, bits=8, signed=True):
    """QONNX Quant (Eq. 1-4), ROUND = half to even."""
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    q = np.clip(np.round(x / scale + zero_point), lo, hi)
    return ((q - zero_point) * scale).astype(np.float32)


def f32(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float32)
