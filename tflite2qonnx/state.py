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
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import onnx
from onnx import helper

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.names import short_name
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
        out = b.fresh(f"{name}_next")
        b.nodes.append(
            helper.make_node("Identity", [states.after[idx]], [out], name=b.fresh(short_name(out)))
        )
        states.outputs[idx] = out
        inputs.append(tensor_value_info(name, b.tensor(idx)))
        outputs.append(tensor_value_info(out, b.tensor(idx)))
    return inputs, outputs


def metadata(b: GraphBuilder) -> str | None:
    """JSON for ``STATE_IO_KEY``: one record per state, in graph-input order."""
    records = []
    for idx, name in b.states.inputs.items():
        t = b.tensor(idx)
        record = {
            "tensor": t.name,
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
    return json.dumps(records) if records else None


def read_pairs(model: onnx.ModelProto) -> list[dict]:
    """The state records of a converted model (empty without state I/O)."""
    for prop in model.metadata_props:
        if prop.key == STATE_IO_KEY:
            return json.loads(prop.value)
    return []
