"""Variable tensors (the LSTM / RNN / SVDF states) as graph inputs and outputs: --state-io.

TFLite keeps a variable tensor's value from one invocation to the next (streaming models feed
one frame per call). By default the converted graph starts every run from the variables'
initial value (zero), i.e. it is the first call after ``reset_all_variables``. With state I/O
each variable an operator reads becomes a graph input (its value before the call) and a graph
output (its value after it), so feeding the outputs back as inputs reproduces the interpreter
call after call. Both are real values like the other graph I/O; a quantized state's input
goes through a Quant on its grid and its output is the identity Quant on it, the grid recorded
in ``tflite2qonnx.io_quantization`` and the pairing in ``tflite2qonnx.state_io``. The tensors
keep their TFLite shape and layout (the layout pass and --channels-last leave rank-2 states
alone).

Operators ask ``state_before`` for a state operand and hand ``state_after`` its new value; a
variable that is read but never given a value after the call is a ConversionError, never an
output that silently repeats its input.

Resource variables (VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE, set once by CALL_ONCE: Keras
``stateful=True`` recurrent layers) are states too: under state I/O CALL_ONCE's initializer
is not converted, each variable it assigns holds a graph input named after its shared_name
instead, the constant it assigned is recorded as the state's ``initial`` value, and the value
the variable holds after the main graph's last ASSIGN_VARIABLE is the output (a variable never
assigned keeps its value, as in TFLite).

Kernel states (TFLM's Signal ops: a noise estimate, circular buffers) live in the kernel, not
in a tensor; their converters register them the same way (``resource_state`` with kind
``kernel_state``, ``resource_value`` for the value after the call) and, without state I/O,
name them in ``kernel_states`` for the stateful-model warning.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np
import onnx
from onnx import helper

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.names import name_list, short_name
from tflite2qonnx.element_types import tensor_value_info

# the builder is a tflite2qonnx.graph.GraphBuilder, typed Any: graph imports this module
GraphBuilder = Any

STATE_IO_KEY = "tflite2qonnx.state_io"


@dataclasses.dataclass
class StateIO:
    """The variable tensors of one conversion: shared by a builder and its inline children."""

    enabled: bool = False
    # tensor index -> graph input name (state I/O) / the value after the call
    inputs: dict[int, str] = dataclasses.field(default_factory=dict)
    after: dict[int, str] = dataclasses.field(default_factory=dict)
    # tensor index -> TFLite name of each variable read (the stateful-model warning)
    read: dict[int, str] = dataclasses.field(default_factory=dict)
    # tensor index -> graph output name, set by finish
    outputs: dict[int, str] = dataclasses.field(default_factory=dict)
    # resource variables (container, shared_name): reserved input names, states, and (without
    # state I/O) those the main graph assigns, which carry over (the stateful-model warning)
    resource_names: dict[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    resources: dict[tuple[str, str], ResourceState] = dataclasses.field(default_factory=dict)
    assigned: dict[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    # kernels' own states (TFLM's Signal ops) read without state I/O: the same warning
    kernel_states: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class ResourceState:
    """A resource variable made a state: its graph input and output and its initial value."""

    input: str
    initial: np.ndarray
    output: str = ""
    after: str = ""  # a kernel's own state (``resource_value``): its value after the call
    kind: str = "resource_variable"


def reserve_names(b: GraphBuilder) -> None:
    """The state inputs' names, taken before any node's: each variable tensor's, and each
    resource variable's shared_name (``variable`` when empty)."""
    b._taken.update(b.tensor_name(t.index) for t in b.subgraph.tensors if t.is_variable)
    for sub in b.subgraphs:
        for op in sub.operators:
            if op.name == "VAR_HANDLE":
                key = (str(op.options.get("container", "")), str(op.options.get("shared_name", "")))
                if key not in b.states.resource_names:
                    b.states.resource_names[key] = b.fresh(key[1] or "variable")


def resource_state(
    b: GraphBuilder, key: tuple[str, str], initial: np.ndarray, kind: str = "resource_variable"
) -> str:
    """Resource variable ``key`` as a state starting from ``initial``: its graph input. A
    kernel that keeps state outside the tensors (TFLM's Signal ops) names it the same way,
    with its own ``kind``, and hands ``resource_value`` its value after the call."""
    states = b.states
    if key not in states.resources:
        name = states.resource_names.get(key) or b.fresh(key[1] or "variable")
        states.resources[key] = ResourceState(name, np.asarray(initial), kind=kind)
    return states.resources[key].input


def resource_value(b: GraphBuilder, key: tuple[str, str], value: str) -> None:
    """A kernel's state ``key`` (``resource_state``) holds ``value`` after the call."""
    b.states.resources[key].after = value


def resource_assigned(b: GraphBuilder, key: tuple[str, str]) -> None:
    """Without state I/O, a variable the graph assigns carries over: the model is stateful."""
    b.states.assigned[key] = key[1] or "variable"


def state_before(b: GraphBuilder, idx: int) -> str | None:
    """State operand ``idx`` at the start of the call: a graph input under state I/O (or the
    value an earlier operator gave it), None for a variable's initial value (zero) otherwise;
    a state that is not a variable (a graph input, a constant) as it is."""
    t = b.tensor(idx)
    if not t.is_variable:
        return b.input(idx) if t.data is not None or idx in b._values else None
    states = b.states
    states.read[idx] = t.name
    if not states.enabled:
        return None
    if b.nested:
        raise ConversionError(
            f"variable tensor {idx} '{t.name}' inside an IF or WHILE subgraph: its state cannot "
            "be a graph input and output (--state-io)",
            b.current.where if b.current is not None else "subgraph",
        )
    if idx in states.after:
        return states.after[idx]
    if idx not in states.inputs:
        b._add_graph_input(idx)
        states.inputs[idx] = b.tensor_name(idx)
    return b._values[idx]


def state_after(b: GraphBuilder, idx: int, value: str) -> None:
    """Variable ``idx`` holds ``value`` after the call (a quantized one on its grid)."""
    t = b.tensor(idx)
    if not t.is_variable or not b.states.enabled:
        return
    if t.quant is not None:  # the identity on the value's grid: the output's Quant
        out = b.fresh(f"{b.tensor_name(idx)}_after")
        b._add_quant(value, out, t.shape, t.name, t.quant.as_kwargs())
        value = out
    b.states.after[idx] = value


def finish(b: GraphBuilder) -> tuple[list[onnx.ValueInfoProto], list[onnx.ValueInfoProto]]:
    """The state graph inputs and outputs (each output an Identity named ``<input>_next``)."""
    states = b.states
    inputs, outputs = [], []
    for idx, name in states.inputs.items():
        if idx not in states.after:
            t = b.tensor(idx)
            raise ConversionError(
                f"variable tensor {idx} '{t.name}' is read, but the converter does not know "
                "its value after the call (--state-io)",
                "subgraph",
            )
        out = states.outputs[idx] = _next(b, states.after[idx], name)
        inputs.append(tensor_value_info(name, b.tensor(idx)))
        outputs.append(tensor_value_info(out, b.tensor(idx)))
    values = getattr(b.calls, "values", {})  # ops/control_flow's variables: the latest values
    for key, state in states.resources.items():
        after = values.get(key, state.after or state.input)  # never assigned: it keeps its value
        state.output = _next(b, after, state.input)
        elem = helper.np_dtype_to_tensor_dtype(state.initial.dtype)
        shape = list(state.initial.shape)
        inputs.append(helper.make_tensor_value_info(state.input, elem, shape))
        outputs.append(helper.make_tensor_value_info(state.output, elem, shape))
    return inputs, outputs


def state_names(b: GraphBuilder) -> list[str]:
    """The state graph inputs and outputs (after ``finish``): the layout pass keeps them in
    TFLite's layout, so that a stream feeds them back and starts from ``initial`` as is."""
    names = [*b.states.inputs.values(), *b.states.outputs.values()]
    return names + [n for s in b.states.resources.values() for n in (s.input, s.output)]


def _next(b: GraphBuilder, value: str, name: str) -> str:
    """The state output ``<name>_next``: an Identity of ``value``."""
    out = b.fresh(f"{name}_next")
    b.nodes.append(helper.make_node("Identity", [value], [out], name=b.fresh(short_name(out))))
    return out


def metadata(b: GraphBuilder) -> str | None:
    """JSON for ``STATE_IO_KEY``: one record per state, in graph-input order."""
    records = []
    for idx, name in b.states.inputs.items():
        t = b.tensor(idx)
        record = {
            "tensor": t.name,
            "kind": "variable_tensor",
            "index": idx,
            "input": name,
            "output": b.states.outputs[idx],
            "dtype": t.dtype,
            "shape": [int(d) for d in t.shape],
        }
        if t.quant is not None:
            q = t.quantization
            record["scale"] = [float(s) for s in q.scale]
            record["zero_point"] = [int(z) for z in q.zero_point]
        records.append(record)
    for key, state in b.states.resources.items():
        records.append({
            "tensor": key[1],
            "kind": state.kind,
            "container": key[0],
            "input": state.input,
            "output": state.output,
            "dtype": str(state.initial.dtype),
            "shape": list(state.initial.shape),
            "initial": state.initial.ravel().tolist(),
        })  # fmt: skip
    return json.dumps(records) if records else None


def stateful_names(b: GraphBuilder) -> str | None:
    """What carries over between invocations without state I/O, for the warning; None if
    nothing does."""
    parts = []
    if b.states.read:
        parts.append(f"variable tensors {name_list([b.tensor_name(i) for i in b.states.read])}")
    if b.states.assigned:
        parts.append(f"resource variables {name_list(list(b.states.assigned.values()))}")
    if b.states.kernel_states:
        parts.append(f"the operator states {name_list(b.states.kernel_states)}")
    return " and ".join(parts) or None


def initial_state(record: dict) -> np.ndarray:
    """A state's value before the first call: zero for a variable tensor (the reset state),
    CALL_ONCE's value for a resource variable."""
    if "initial" in record:
        return np.asarray(record["initial"], record["dtype"]).reshape(record["shape"])
    return np.zeros(record["shape"], np.float32)


def read_pairs(model: onnx.ModelProto) -> list[dict]:
    """The state records of a converted model (empty without state I/O)."""
    for prop in model.metadata_props:
        if prop.key == STATE_IO_KEY:
            return json.loads(prop.value)
    return []
