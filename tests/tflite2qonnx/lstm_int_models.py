"""Hand-built integer (8x8_16) UNIDIRECTIONAL_SEQUENCE_LSTM models with the variants TF's
converter does not emit from Keras: projection, peepholes, layer normalization, CIFG.

One operator, seeded random weights on realistic grids: int8 input / output state / weights,
int16 cell state (a power-of-two scale) and peephole / layer-norm weights, int32 biases, and the
five intermediates the kernel reads (the gate pre-activation grids for layer norm, the hidden
o * tanh(c) grid). Written with the litert schema's object API so that the interpreter runs
exactly what the converter reads.
"""

from __future__ import annotations

import flatbuffers
import numpy as np

_NP = {"int8": np.int8, "int16": np.int16, "int32": np.int32}


def integer_lstm(
    *,
    batch: int = 2,
    steps: int = 5,
    n_in: int = 6,
    n_cell: int = 8,
    projection: int = 0,
    projection_bias: bool = True,
    peephole: bool = False,
    layer_norm: bool = False,
    cifg: bool = False,
    cell_clip: float = 0.0,
    proj_clip: float = 0.0,
    hidden_zero_point: int = 0,
    gate_grid: float = 1.0,
    per_channel: bool = False,
    time_major: bool = False,
    seed: int = 0,
    bias_offsets: tuple[float, float, float, float] = (0.0, 1.0, 0.0, 0.0),
) -> bytes:
    """The model's bytes; input [batch, steps, n_in] int8, output [batch, steps, n_out]
    (``time_major``: steps first). ``bias_offsets``: added to each gate's (input, forget,
    cell, output) random real biases (large ones saturate the gates and drive the cell)."""
    from ai_edge_litert import schema_py_generated as schema

    rng = np.random.default_rng(seed)
    n_out = projection or n_cell
    model = schema.ModelT()
    model.version, model.buffers = 3, [schema.BufferT()]
    sg = schema.SubGraphT()
    sg.tensors, sg.name = [], "main"

    def tensor(name, shape, dtype, scale=None, zp=0, data=None, variable=False) -> int:
        t = schema.TensorT()
        t.name, t.shape = name, list(shape)
        t.type = getattr(schema.TensorType, dtype.upper())
        t.buffer, t.isVariable = 0, variable
        if data is not None:
            buffer = schema.BufferT()
            raw = np.ascontiguousarray(np.asarray(data, _NP[dtype])).tobytes()
            buffer.data = np.frombuffer(raw, np.uint8)
            model.buffers.append(buffer)
            t.buffer = len(model.buffers) - 1
        if scale is not None:
            q = schema.QuantizationParametersT()
            q.scale = [float(v) for v in np.atleast_1d(scale)]
            q.zeroPoint = [int(zp)] * len(q.scale)
            t.quantization = q
        sg.tensors.append(t)
        return len(sg.tensors) - 1

    x_scale, x_zp = 1 / 120, 3
    h_scale, h_zp = 1 / 127, -2
    cell_scale = 2.0**-11
    # layer norm: the gate pre-activation grids (``gate_grid`` coarsens them: small variances)
    inter = [s * gate_grid for s in (0.00031, 0.00027, 0.00035, 0.00029)]

    def weights(name, shape, span=0.6) -> int:
        """int8 weights; ``per_channel``: one scale per output row (axis 0)."""
        scale = span / 127 * (np.linspace(0.5, 1.0, shape[0])[:, None] if per_channel else 1)
        q = np.clip(np.round(rng.uniform(-span, span, shape) / scale), -127, 127)
        return tensor(name, shape, "int8", np.ravel(scale) if per_channel else scale, 0, q)

    def int16_vector(name, low, high) -> int:
        scale = max(abs(low), abs(high)) / 32767
        q = np.round(rng.uniform(low, high, n_cell) / scale)
        return tensor(name, (n_cell,), "int16", scale, 0, q)

    lead = (steps, batch) if time_major else (batch, steps)
    x = tensor("x", (*lead, n_in), "int8", x_scale, x_zp)
    gates = range(1 if cifg else 0, 4)
    wx = [weights(f"w_x{g}", (n_cell, n_in)) if g in gates else -1 for g in range(4)]
    wh = [weights(f"w_h{g}", (n_cell, n_out)) if g in gates else -1 for g in range(4)]
    peep = [-1, -1, -1]
    if peephole:
        peep = [int16_vector(f"peephole{k}", -0.5, 0.5) if k or not cifg else -1 for k in range(3)]
    biases, norms = [], [-1] * 4
    for g in range(4):
        if g not in gates:
            biases.append(-1)
            continue
        real = rng.uniform(-0.3, 0.3, n_cell) + bias_offsets[g]
        if layer_norm:  # the bias is the layer norm's, on 2^-10 of its weights' unit
            norms[g] = int16_vector(f"layer_norm{g}", 0.5, 1.5)
            unit = sg.tensors[norms[g]].quantization.scale[0] / 1024
        else:
            unit = x_scale * sg.tensors[wx[g]].quantization.scale[0]
        biases.append(tensor(f"bias{g}", (n_cell,), "int32", unit, 0, np.round(real / unit)))
    hidden_scale = 1 / 128
    proj = [-1, -1]
    if projection:
        proj[0] = weights("projection", (n_out, n_cell), 0.5)
        if projection_bias:
            unit = hidden_scale * sg.tensors[proj[0]].quantization.scale[0]
            real = rng.uniform(-0.2, 0.2, n_out)
            proj[1] = tensor("projection_bias", (n_out,), "int32", unit, 0, np.round(real / unit))
    h_state = tensor("h_state", (batch, n_out), "int8", h_scale, h_zp, variable=True)
    c_state = tensor("c_state", (batch, n_cell), "int16", cell_scale, 0, variable=True)
    y = tensor("y", (*lead, n_out), "int8", h_scale, h_zp)
    intermediates = [
        tensor(f"inter{g}", (0,), "int16", inter[g] if layer_norm else 2.0**-12, 0)
        for g in range(4)
    ] + [tensor("hidden", (0,), "int8", hidden_scale, hidden_zero_point)]

    op = schema.OperatorT()
    op.opcodeIndex = 0
    op.inputs = [x, *wx, *wh, *peep, *biases, *proj, h_state, c_state, *norms]
    op.outputs, op.intermediates = [y], intermediates
    options = schema.UnidirectionalSequenceLSTMOptionsT()
    options.fusedActivationFunction, options.cellClip, options.projClip = 4, cell_clip, proj_clip
    options.timeMajor = time_major
    op.builtinOptionsType = schema.BuiltinOptions.UnidirectionalSequenceLSTMOptions
    op.builtinOptions = options
    sg.operators, sg.inputs, sg.outputs = [op], [x], [y]
    code = schema.OperatorCodeT()
    code.builtinCode = schema.BuiltinOperator.UNIDIRECTIONAL_SEQUENCE_LSTM
    code.deprecatedBuiltinCode, code.version = code.builtinCode, 3
    model.operatorCodes, model.subgraphs = [code], [sg]
    model.description = "integer LSTM variant (tests/tflite2qonnx/lstm_int_models.py)"
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())
