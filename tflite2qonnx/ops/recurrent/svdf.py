"""SVDF (float, and int8 with its int16 state) as TFLite's kernel computes one invocation.

TFLite's SVDF (kernels/svdf.cc, reference/svdf.h) keeps a variable state of shape
[batch, num_filters * memory_size]: each invocation shifts every filter's memory left by one,
writes the new feature activation ``x @ W_feature^T`` into its last column, then takes each
filter's dot product with its row of ``weights_time``, sums groups of ``rank`` filters into one
unit, adds the bias and applies the activation.

State: the interpreter carries the variable state from one invocation to the next until
``reset_all_variables``. By default the converted graph computes one invocation from the
variable's reset value (zero), so only the last column of ``weights_time`` reaches the
output: the whole op is ``act((x @ W_feature^T) * w_time[:, -1]) @ G + bias``, where G sums
each unit's ``rank`` filters. With state I/O (``tflite2qonnx.state``; TFLite Micro's keyword
models feed one frame per call) the state is a graph input, shifted and written as the kernel
does, and the shifted state a graph output. A state that is not a variable tensor is refused
(TFLite versions differ on when the shift happens).

The int8 kernel (EvalIntegerSVDF) is emulated exactly: the int32 feature accumulator (raw
int8 weights times ``x - input_zp``) is rescaled by MultiplyByQuantizedMultiplier to the int16
state and saturated; the time products (raw int16 ``weights_time`` times the state) and the raw
int32 bias are summed in int32 (wrapping, as the C loop does), rescaled to the output and
clamped to int8 after adding its zero point. The kernel requires the RELU activation but never
applies it beyond that clamp, and it reads the weights' and bias's first scale only and never
their zero points; all of that is followed as written. The hybrid kernel (float input, int8
weights) quantizes the input rows on the fly as ``ops.hybrid.quant`` does, symmetric or
asymmetric per ``asymmetric_quantize_inputs``.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx import fixed_point as fp
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.activation import fused_activation
from tflite2qonnx.ops.common import reduce_axes
from tflite2qonnx.ops.hybrid.quant import hybrid_matrix, hybrid_product
from tflite2qonnx.state import state_after, state_before

_INT32 = 2.0**31


def _operands(b: GraphBuilder, op: Operator) -> tuple[int, int, int, int, int]:
    if len(op.inputs) != 5:
        raise ConversionError(f"SVDF needs 5 inputs, got {len(op.inputs)}", op.where)
    x, wf, wt, bias, state = op.inputs
    for idx, what in ((wf, "weights_feature"), (wt, "weights_time")):
        if idx < 0 or b.tensor(idx).data is None:
            raise ConversionError(f"SVDF needs a constant {what}", op.where)
    s = b.tensor(state)
    if not s.is_variable:
        raise ConversionError(
            f"SVDF state tensor '{s.name}' is not a variable tensor; only a variable state "
            "(reset to zero) is converted",
            op.where,
        )
    if s.data is not None and np.any(np.asarray(s.data) != 0):
        raise ConversionError(
            f"SVDF state tensor '{s.name}' has a non-zero initial value", op.where
        )
    return x, wf, wt, bias, state


def _shape(b: GraphBuilder, op: Operator, wf: int, wt: int) -> tuple[int, int, int]:
    """(rank, num_filters, memory_size), checked as the kernel's Prepare does."""
    rank = int(op.options.get("rank", 0))
    filters, memory = b.tensor(wf).shape[0], b.tensor(wt).shape[1]
    if rank <= 0 or filters % rank or b.tensor(wt).shape[0] != filters:
        raise ConversionError(
            f"SVDF rank {rank} does not divide num_filters {filters} (weights_time "
            f"{list(b.tensor(wt).shape)})",
            op.where,
        )
    return rank, filters, memory


def _group_matrix(w_last: np.ndarray, rank: int, dtype) -> np.ndarray:
    """G with G[f, f // rank] = w_time[f, -1]: one MatMul does the time product and the
    reduction over each unit's filters."""
    filters = w_last.shape[0]
    g = np.zeros((filters, filters // rank), dtype)
    g[np.arange(filters), np.arange(filters) // rank] = w_last
    return g


def _checked(b: GraphBuilder, op: Operator) -> tuple:
    """The operands, rank, filters and memory, the state's shape checked."""
    x, wf, wt, bias, state = _operands(b, op)
    rank, filters, memory = _shape(b, op, wf, wt)
    if b.tensor(state).shape[-1:] != (filters * memory,):
        raise ConversionError(
            f"SVDF state tensor '{b.tensor(state).name}' has shape "
            f"{list(b.tensor(state).shape)}, not [batch, {filters * memory}]",
            op.where,
        )
    return x, wf, wt, bias, state, rank, memory


def _unsupported(b: GraphBuilder, op: Operator, x: int, wf: int) -> ConversionError:
    x_type, w_type = b.tensor(x).dtype, b.tensor(wf).dtype
    return ConversionError(
        f"SVDF with {x_type} input and {w_type} weights is not supported", op.where
    )


def svdf(b: GraphBuilder, op: Operator) -> None:
    """Float SVDF; its record's kernels take int8 weights (hybrid) and int8 activations."""
    x, wf, wt, bias, state, rank, memory = _checked(b, op)
    if b.tensor(x).dtype != "float32" or b.tensor(wf).dtype not in ("float32", "float16"):
        raise _unsupported(b, op, x, wf)
    _float(b, op, x, wf, wt, bias, state, rank, memory)


def is_hybrid(b: GraphBuilder, op: Operator) -> bool:
    """Float input with int8 weights: the hybrid kernel."""
    if len(op.inputs) != 5 or min(op.inputs[:2]) < 0:
        return False  # ``svdf`` refuses it by name
    x, wf = op.inputs[0], op.inputs[1]
    return b.tensor(x).dtype == "float32" and b.tensor(wf).dtype == "int8"


def hybrid_svdf(b: GraphBuilder, op: Operator) -> None:
    _hybrid(b, op, *_checked(b, op))


def integer_svdf(b: GraphBuilder, op: Operator) -> None:
    """The int8 kernel on any integer-quantized input (others refused by name)."""
    x, wf, wt, bias, state, rank, memory = _checked(b, op)
    if b.tensor(x).dtype != "int8":
        raise _unsupported(b, op, x, wf)
    _integer(b, op, x, wf, wt, bias, state, rank, memory)


def _shifted(b: GraphBuilder, before: str, feature: str, filters: int, memory: int) -> str:
    """[batch, filters, memory]: each filter's memory shifted left by one, the new feature
    activation in its last column (the kernel's state after the call)."""
    rows = b.emit("Reshape", [before, b.const(np.array([0, filters, memory], np.int64), "shape")])
    ends = [b.const(np.array([v], np.int64), h) for v, h in ((1, "start"), (memory, "end"))]
    old = b.emit("Slice", [rows[0], *ends, b.const(np.array([2], np.int64), "axis")])[0]
    new = b.emit("Unsqueeze", [feature, b.const(np.array([2], np.int64), "axis")])[0]
    return b.emit("Concat", [old, new], axis=2)[0]


def _flat(b: GraphBuilder, shifted: str, filters: int, memory: int) -> str:
    shape = b.const(np.array([0, filters * memory], np.int64), "state_shape")
    return b.emit("Reshape", [shifted, shape])[0]


def _float_time(b, op, state, feature, w_time: str, rank, memory) -> str:
    """The time product of a float (or hybrid) SVDF from the state input: sum over memory of
    the shifted state times weights_time, each unit's filters summed."""
    filters = b.tensor(state).shape[-1] // memory  # checked by svdf
    shifted = _shifted(b, state_before(b, state), feature, filters, memory)
    state_after(b, state, _flat(b, shifted, filters, memory))
    per_filter = reduce_axes(b, "ReduceSum", b.emit("Mul", [shifted, w_time])[0], [2], 0)
    ones = _group_matrix(np.ones(filters, np.float32), rank, np.float32)
    return b.emit("MatMul", [per_filter, b.const(ones, "svdf_units")])[0]


def _float(b, op, x, wf, wt, bias, state, rank, memory) -> None:
    feature = b.emit("MatMul", [b.input(x), b.input(wf, perm=(1, 0))])[0]
    if state_before(b, state) is not None:
        y = _float_time(b, op, state, feature, b.input(wt), rank, memory)
    else:
        w_last = np.asarray(b.constant(wt), np.float32)[:, memory - 1]
        group = b.const(_group_matrix(w_last, rank, np.float32), "svdf_time")
        y = b.emit("MatMul", [feature, group])[0]
    if bias >= 0:
        y = b.emit("Add", [y, b.input(bias)])[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))


def _hybrid(b, op, x, wf, wt, bias, state, rank, memory) -> None:
    """EvalHybridSVDF: the input rows quantized on the fly (``ops.hybrid.quant``), the int8
    feature product scaled back to float, the int8 weights_time dequantized (its Quant's
    output: the kernel's float32 scale * q)."""
    asymmetric = bool(op.options.get("asymmetric_quantize_inputs", False))
    matrix = hybrid_matrix(b, [wf], asymmetric, "svdf_feature", op.where)
    feature = hybrid_product(b, b.input(x), matrix)
    t = b.tensor(wt)
    if t.dtype != "int8" or t.quantization is None or len(t.quantization.scale) != 1:
        raise ConversionError("hybrid SVDF needs per-tensor int8 weights_time", op.where)
    if state_before(b, state) is not None:
        y = _float_time(b, op, state, feature, b.input(wt), rank, memory)
        if bias >= 0:
            y = b.emit("Add", [y, b.input(bias)])[0]
        b.set_output(op.outputs[0], fused_activation(b, op, y))
        return
    last = b.const(np.array([memory - 1], np.int64), "svdf_last")
    w_last = b.emit("Gather", [b.input(wt), last], axis=1)[0]  # [filters, 1]
    filters = t.shape[0]
    ones = _group_matrix(np.ones(filters, np.float32), rank, np.float32)
    group = b.emit("Mul", [w_last, b.const(ones, "svdf_units")])[0]  # G of _group_matrix
    y = b.emit("MatMul", [feature, group])[0]
    if bias >= 0:
        y = b.emit("Add", [y, b.input(bias)])[0]
    b.set_output(op.outputs[0], fused_activation(b, op, y))


def _per_tensor_scale(b: GraphBuilder, idx: int, dtype: str, op: Operator) -> float:
    t = b.tensor(idx)
    if t.dtype != dtype or t.quantization is None or len(t.quantization.scale) == 0:
        raise ConversionError(
            f"int8 SVDF needs a quantized {dtype} tensor, got {t.dtype}",
            f"{op.where}, tensor {idx} '{t.name}'",
        )
    return float(np.float32(t.quantization.scale[0]))  # the kernel reads scale->data[0]


def _integer(b, op, x, wf, wt, bias, state, rank, memory) -> None:
    where = op.where
    out = op.outputs[0]
    s_x = _per_tensor_scale(b, x, "int8", op)
    s_wf = _per_tensor_scale(b, wf, "int8", op)
    s_wt = _per_tensor_scale(b, wt, "int16", op)
    s_state = _per_tensor_scale(b, state, "int16", op)
    s_out = _per_tensor_scale(b, out, "int8", op)
    if bias >= 0 and (b.tensor(bias).dtype != "int32" or b.tensor(bias).data is None):
        raise ConversionError("int8 SVDF needs a constant int32 bias", where)
    if op.options.get("fused_activation_function", "NONE") != "RELU":
        raise ConversionError("int8 SVDF needs the RELU activation (TFLite's kernel)", where)
    # effective scales as Prepare computes them: float32 products, then QuantizeMultiplier
    m1, shift1 = fp.quantize_multiplier(float(np.float32(s_x) * np.float32(s_wf) / s_state))
    m2, shift2 = fp.quantize_multiplier(float(np.float32(s_state) * np.float32(s_wt) / s_out))

    # feature: sum_c W[f, c] * (x[c] - input_zp), int32, rescaled to the int16 state
    offsets = fp.offsets(b, x, where)
    w_feature = np.asarray(b.tensor(wf).data, np.float64).T
    x_max = fp.grid(b, x, where).max_abs_offset
    acc, bound = fp.integer_product(b, "MatMul", offsets, w_feature, wf, 0, 1, x_max, where)
    y = fp.requantize(b, acc, np.array(m1), np.array(shift1), bound.max(), s_state, where)
    y = b.quant(y, "svdf_state", None, scale=np.float32(s_state), bit_width=16, signed=True)
    y = b.emit("Div", [fp.cast(b, y, TensorProto.DOUBLE), fp.f64(b, s_state, "state_scale")])[0]
    k = b.emit("Round", [y])[0]  # the new feature's int16 integers, float64

    # time: int16 weights_time times the state, summed per unit, plus the bias
    w_time = np.asarray(b.tensor(wt).data, np.float64)
    before = state_before(b, state)
    if before is None:  # from the zero state only the last column counts
        group = _group_matrix(w_time[:, memory - 1], rank, np.float64)
        acc = b.emit("MatMul", [k, fp.f64(b, group, "svdf_time")])[0]
        bound = np.abs(group).sum(axis=0) * 32768.0
    else:
        acc, bound = _integer_time(b, state, before, k, w_time, s_state, rank)
    if bias >= 0:
        raw_bias = np.asarray(b.tensor(bias).data, np.float64)
        acc = b.emit("Add", [acc, fp.f64(b, raw_bias, "svdf_bias")])[0]
        bound = bound + np.abs(raw_bias)
    if bound.max() >= _INT32:
        acc, bound = _wrap_int32(b, acc), np.array(_INT32)
    y = fp.requantize(b, acc, np.array(m2), np.array(shift2), bound.max(), s_out, where)
    b.set_output(out, y)  # the output's Quant adds the zero point and clamps to int8


def _integer_time(b, state, before, k, w_time, s_state, rank) -> tuple[str, np.ndarray]:
    """The int32 time sums from the int16 state input (its integers, float64: each product
    below 2^30, their sums exact), the shifted state handed on as the state output."""
    filters, memory = w_time.shape
    scale = fp.f64(b, s_state, "state_scale")
    k_old = b.emit("Round", [b.emit("Div", [fp.cast(b, before, TensorProto.DOUBLE), scale])[0]])
    shifted = _shifted(b, k_old[0], k, filters, memory)
    flat = fp.cast(b, _flat(b, shifted, filters, memory), TensorProto.FLOAT)
    state_after(b, state, b.emit("Mul", [flat, b.const(np.float32(s_state), "state_scale")])[0])
    products = b.emit("Mul", [shifted, fp.f64(b, w_time, "svdf_time")])[0]
    per_filter = reduce_axes(b, "ReduceSum", products, [2], 0)
    ones = _group_matrix(np.ones(filters), rank, np.float64)
    acc = b.emit("MatMul", [per_filter, fp.f64(b, ones, "svdf_units")])[0]
    return acc, ones.T @ np.abs(w_time).sum(axis=1) * 32768.0


def _wrap_int32(b: GraphBuilder, acc: str) -> str:
    """acc modulo 2^32 into [-2^31, 2^31): the kernel's int32 sum where it could overflow."""
    shifted = b.emit("Add", [acc, fp.f64(b, _INT32, "int32_half")])[0]
    turns = b.emit("Floor", [b.emit("Mul", [shifted, fp.f64(b, 2.0**-32, "int32_turn")])[0]])[0]
    return b.emit("Sub", [acc, b.emit("Mul", [turns, fp.f64(b, 2.0**32, "int32_range")])[0]])[0]
