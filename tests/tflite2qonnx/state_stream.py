"""A stream of calls with --state-io: the TFLite interpreter invoked call after call keeping its
state (never reset in between) against the converted model fed its own state outputs back.
Every call's outputs and every state after it are compared, in real values, quantized ones on
their integer grids.

The interpreter's state after a call: a variable tensor (LSTM / RNN / SVDF) is read as it is;
a resource variable (VAR_HANDLE, Keras ``stateful=True``) is the value the main subgraph's
last ASSIGN_VARIABLE of it wrote (read with all tensors preserved), compared on the int8 grid
of the DEQUANTIZE that computed it, if one did (a full-integer body around a float variable).
"""

from __future__ import annotations

import numpy as np
from litert_compare import random_input, real_value, reference_interpreter

import tflite2qonnx
from layout import stored_perms
from tflite2qonnx.reader import read_model
from tflite2qonnx.state import initial_state, read_pairs

CALLS = 8


def grid(detail: dict) -> tuple[float, int] | None:
    scale, zero_point = detail["quantization"]
    return (scale, zero_point) if np.issubdtype(detail["dtype"], np.integer) and scale else None


def stream(
    data,
    calls: int = CALLS,
    seed: int = 0,
    low: float = -1.0,
    xnnpack: bool = False,
    read_states: bool = True,
    **options,
):
    """Per call and per compared tensor (outputs, then each state after the call): the
    interpreter's real value (the builtin kernels', or ``xnnpack``'s), ours, and the grid; the
    state carried over on both sides. ``read_states`` False: outputs only (a variable assigned
    inside an IF branch has no main-graph tensor to read it from)."""
    model = tflite2qonnx.convert(data, state_io=True, **options)
    records = read_pairs(model)
    assigned = _assigned_tensors(data) if read_states else {}
    # preserving all tensors makes the interpreter drop its default delegate (XNNPACK)
    assert not (assigned and xnnpack), "XNNPACK's resource-variable states are not readable"
    it = reference_interpreter(data, preserve_all=bool(assigned), xnnpack=xnnpack)
    it.reset_all_variables()
    (inp,) = it.get_input_details()
    outs = it.get_output_details()
    tensors = {d["index"]: d for d in it.get_tensor_details()}
    names = {i.name for i in model.graph.input} - {r["input"] for r in records}
    (in_name,) = names
    state = {r["input"]: initial_state(r) for r in records}
    perms = stored_perms(model)  # the layout pass's, on the other inputs and outputs
    assert not any(perms.get(r[k]) for r in records for k in ("input", "output")), perms
    run = session(model)
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(calls):
        x = random_input(inp, rng, low=low)
        it.set_tensor(inp["index"], x)
        it.invoke()
        ours = run({in_name: _stored(real_value(x, grid(inp)), perms.get(in_name)), **state})
        row = []
        for d, o in zip(outs, model.graph.output, strict=False):
            mine = _stored(ours[o.name], perms.get(o.name), back=True)
            row.append((d["name"], real_value(it.get_tensor(d["index"]), grid(d)),
                        mine, grid(d)))  # fmt: skip
        for r in records if read_states else ():
            index, on = (r["index"], None) if "index" in r else assigned[r["tensor"]]
            d = tensors[index]
            ref = real_value(it.get_tensor(index), grid(d))
            row.append((r["input"], ref, ours[r["output"]], on or grid(d)))
        state = {r["input"]: ours[r["output"]] for r in records}
        rows.append(row)
    return model, rows


def _assigned_tensors(data) -> dict[str, tuple[int, tuple[float, int] | None]]:
    """shared_name -> the main subgraph's tensor its last ASSIGN_VARIABLE writes, and the
    grid of the DEQUANTIZE input it comes from (None if none)."""
    main = read_model(data).subgraphs[0]
    handles = {
        op.outputs[0]: str(op.options.get("shared_name", ""))
        for op in main.operators
        if op.name == "VAR_HANDLE"
    }
    dequantized = {
        op.outputs[0]: main.tensors[op.inputs[0]].quantization
        for op in main.operators
        if op.name == "DEQUANTIZE"
    }
    found = {}
    for op in main.operators:
        if op.name == "ASSIGN_VARIABLE":
            q = dequantized.get(op.inputs[1])
            on = (float(q.scale[0]), int(q.zero_point[0])) if q is not None else None
            found[handles[op.inputs[0]]] = (op.inputs[1], on)
    return found


def _stored(x: np.ndarray, perm, back: bool = False) -> np.ndarray:
    """``x`` in the converted graph's stored layout (``back``: from it to TFLite's)."""
    if not perm:
        return x
    return np.ascontiguousarray(x.transpose(np.argsort(perm) if back else perm))


def session(model):
    """One onnxruntime session for the whole stream (Quant nodes as standard ops, graph
    optimizations off); qonnx's executor for a graph with qonnx's channels-last ops, which
    onnxruntime does not have (as --verify runs them)."""
    import onnxruntime as ort

    from qonnx_ingest.execute import execute_qonnx
    from qonnx_ingest.quant_lowering import lower_quants

    if any(n.domain not in ("", "ai.onnx") for n in lower_quants(model).graph.node):
        return lambda feeds: execute_qonnx(model, feeds)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    lowered = lower_quants(model).SerializeToString()
    sess = ort.InferenceSession(lowered, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in model.graph.output]
    return lambda feeds: dict(zip(names, sess.run(names, feeds), strict=True))


def steps(ref, ours, grid) -> float:
    return float(np.max(np.abs(np.round(ours / grid[0]) - np.round(ref / grid[0]))))


def assert_stream_agrees(rows, exact: bool, rtol: float = 1e-4) -> None:
    """Quantized tensors (``exact``) equal on their grid, every call; the others within
    ``rtol`` of the largest reference magnitude (at least 1)."""
    for call, row in enumerate(rows):
        for name, ref, ours, grid in row:
            assert ours.shape == ref.shape, (call, name)
            if grid is not None and exact:
                off = steps(ref, ours, grid)
                assert off == 0, f"call {call}, {name}: {off} steps"
            else:
                err = float(np.max(np.abs(ours - ref)))
                assert err <= rtol * max(1.0, float(np.max(np.abs(ref)))), (call, name, err)
