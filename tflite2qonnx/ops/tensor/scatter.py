"""Index-driven ops: SCATTER_ND, SPARSE_TO_DENSE, ONE_HOT, WHERE, UNIQUE and the segment
reductions (SEGMENT_SUM, UNSORTED_SEGMENT_SUM / MAX / MIN / PROD).

Scatters that may hit a cell twice and segment reductions are written as a mask over
(target cell, source row) and one ONNX reduction over the rows: exact at opset 13 (ScatterND
has no reduction before 16), duplicates summed as TFLite sums them, empty segments holding
the kernel's initial value. The price is a (cells x rows) intermediate.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto, helper

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.common import one_int, reduce_axes, table_size
from tflite2qonnx.ops.int64_order import reduce_extreme


def _i64(b: GraphBuilder, values, hint: str) -> str:
    return b.const(np.asarray(values, np.int64), hint)


def _as_int64(b: GraphBuilder, idx: int) -> str:
    if b.tensor(idx).data is not None:
        return _i64(b, b.int_constant(idx, "indices"), "indices")
    return b.emit("Cast", [b.input(idx)], to=TensorProto.INT64)[0]


def _float_only(b: GraphBuilder, op: Operator) -> None:
    for i in (*op.inputs, *op.outputs):
        if i >= 0 and b.tensor(i).quant is not None:
            raise ConversionError(f"{op.name} has float and int32 kernels only", op.where)


def _masked_reduce(
    b: GraphBuilder, op: Operator, rows: str, data: str, cells: str, rest: int, kind: str
) -> str:
    """For each target cell c (``cells``, [M] int64) the ``kind`` reduction of the data rows
    ([N, *rest dims]) whose target (``rows``, [N] int64) is c, or the kernel's initial value."""
    mask = b.emit(
        "Equal",
        [b.emit("Unsqueeze", [rows, _i64(b, [0], "axis")])[0],
         b.emit("Unsqueeze", [cells, _i64(b, [1], "axis")])[0]],
    )[0]  # fmt: skip
    if rest:
        mask = b.emit("Unsqueeze", [mask, _i64(b, list(range(2, 2 + rest)), "axes")])[0]
    data = b.emit("Unsqueeze", [data, _i64(b, [0], "axis")])[0]
    dtype = b.tensor(op.outputs[0]).dtype
    quantized = b.tensor(op.outputs[0]).quant is not None  # raw integers held as floats
    np_type = np.float32 if dtype == "float32" or quantized else np.dtype(dtype)
    if kind == "sum":
        onnx_op, init = "ReduceSum", 0
    elif kind == "prod":
        onnx_op, init = "ReduceProd", 1
    else:
        info = np.finfo(np_type) if np_type == np.float32 else np.iinfo(np_type)
        onnx_op, init = ("ReduceMax", info.min) if kind == "max" else ("ReduceMin", info.max)
    fill = b.const(np.array(init, np_type), f"{kind}_init")
    masked = b.emit("Where", [mask, data, fill])[0]
    if kind in ("max", "min"):  # int64: onnxruntime's ReduceMax / ReduceMin misorder values
        elem = helper.np_dtype_to_tensor_dtype(np.dtype(np_type))
        return reduce_extreme(b, onnx_op, masked, [1], 0, elem)
    return reduce_axes(b, onnx_op, masked, [1], 0)


def _stored_integers(b: GraphBuilder, op: Operator, idx: int) -> str:
    """The integers a per-tensor quantized tensor stores, as float: round(x / s) + zp."""
    q = b.tensor(idx).quant
    if q is None or q.axis is not None or b.tensor(op.outputs[0]).quant is None:
        raise ConversionError(f"{op.name} needs per-tensor quantized updates and output", op.where)
    x = b.emit("Div", [b.input(idx), b.const(np.array(q.scale, np.float32), "scale")])[0]
    zp = b.const(np.array(float(q.zero_point), np.float32), "zero_point")
    return b.emit("Add", [b.emit("Round", [x])[0], zp])[0]


def _wrapped_to_grid(b: GraphBuilder, op: Operator, v: str) -> str:
    """Integer sums stored back into the output's type as C++ does (modulo 2^bits), then read
    on the output's grid: s * (q - zp)."""
    out = b.tensor(op.outputs[0])
    info = np.iinfo(np.dtype(out.dtype))
    span = float(info.max) - float(info.min) + 1
    low = b.const(np.array(float(info.min), np.float32), "type_min")
    wraps = b.emit("Floor", [b.emit("Div", [b.emit("Sub", [v, low])[0], _f(b, span)])[0]])[0]
    v = b.emit("Sub", [v, b.emit("Mul", [wraps, _f(b, span)])[0]])[0]
    v = b.emit("Sub", [v, _f(b, float(out.quant.zero_point))])[0]
    return b.emit("Mul", [v, _f(b, float(out.quant.scale))])[0]


def _f(b: GraphBuilder, value: float) -> str:
    return b.const(np.array(value, np.float32), "c")


def scatter_nd(b: GraphBuilder, op: Operator) -> None:
    """A zero tensor of ``shape`` with ``updates`` added at ``indices`` (duplicates sum). The
    int8 kernel adds the stored integers onto raw zeros, wrapping in the type, whatever the
    grids (it never requantizes): that is what the graph computes then."""
    indices_idx, updates_idx, shape_idx = (op.inputs[i] for i in range(3))
    quantized = b.tensor(updates_idx).quant is not None or b.tensor(op.outputs[0]).quant
    if not quantized:
        _float_only(b, op)
    shape = [int(d) for d in b.int_constant(shape_idx, op.where).reshape(-1)]
    k = b.tensor(indices_idx).shape[-1]
    if not 1 <= k <= len(shape):
        raise ConversionError(f"indices of depth {k} into shape {shape}", op.where)
    strides = [math.prod(shape[i + 1 : k]) for i in range(k)]
    idx = b.emit("Reshape", [_as_int64(b, indices_idx), _i64(b, [-1, k], "idx_shape")])[0]
    rows = b.emit("Mul", [idx, _i64(b, strides, "strides")])[0]
    rows = reduce_axes(b, "ReduceSum", rows, [1], 0)
    rest = shape[k:]
    data = _stored_integers(b, op, updates_idx) if quantized else b.input(updates_idx)
    data = b.emit("Reshape", [data, _i64(b, [-1, *rest], "rows")])[0]
    cells = _i64(b, np.arange(table_size(math.prod(shape[:k]), "cells", op.where)), "cells")
    y = _masked_reduce(b, op, rows, data, cells, len(rest), "sum")
    if quantized:
        y = _wrapped_to_grid(b, op, y)
    b.set_output(op.outputs[0], b.emit("Reshape", [y, _i64(b, shape, "shape")])[0])


def _segments(kind: str, unsorted: bool):
    def convert(b: GraphBuilder, op: Operator) -> None:
        _float_only(b, op)
        data_idx, ids_idx = op.inputs[0], op.inputs[1]
        data_shape = list(b.tensor(data_idx).shape)
        k = len(b.tensor(ids_idx).shape)
        if k != 1 and not unsorted:
            raise ConversionError("segment_ids must be a vector", op.where)
        if any(d < 0 for d in data_shape[k:]):
            raise ConversionError(f"data {data_shape} needs static trailing dims", op.where)
        rest = data_shape[k:]
        ids = b.emit("Reshape", [_as_int64(b, ids_idx), _i64(b, [-1], "flat")])[0]
        data = b.emit("Reshape", [b.input(data_idx), _i64(b, [-1, *rest], "rows")])[0]
        if unsorted:
            count = one_int(b, op.inputs[2], "num_segments", op.where)
            cells = _i64(b, np.arange(table_size(count, "segments", op.where)), "segments")
        elif b.tensor(ids_idx).data is not None:
            ids_value = b.int_constant(ids_idx, op.where)
            count = table_size(int(ids_value.max(initial=-1)) + 1, "segments", op.where)
            cells = _i64(b, np.arange(count), "segments")
        else:  # as many segments as the largest id says
            top = reduce_axes(b, "ReduceMax", ids, [0], 0)
            one = _i64(b, 1, "one")
            count = b.emit("Add", [top, one])[0]
            cells = b.emit("Range", [_i64(b, 0, "zero"), count, one])[0]
        b.set_output(op.outputs[0], _masked_reduce(b, op, ids, data, cells, len(rest), kind))

    return convert


segment_sum = _segments("sum", unsorted=False)
unsorted_segment_sum = _segments("sum", unsorted=True)
unsorted_segment_max = _segments("max", unsorted=True)
unsorted_segment_min = _segments("min", unsorted=True)
unsorted_segment_prod = _segments("prod", unsorted=True)


def sparse_to_dense(b: GraphBuilder, op: Operator) -> None:
    """``default_value`` everywhere, ``values`` at constant ``indices`` (distinct, in range:
    ONNX ScatterND leaves the order of repeated writes open)."""
    indices_idx, shape_idx, values_idx, default_idx = (op.inputs[i] for i in range(4))
    if b.tensor(indices_idx).data is None:
        raise ConversionError("SPARSE_TO_DENSE needs constant indices", op.where)
    shape = [int(d) for d in b.int_constant(shape_idx, op.where).reshape(-1)]
    indices = b.int_constant(indices_idx, op.where).reshape(-1)
    if indices.size % (len(shape) or 1):
        raise ConversionError(
            f"{indices.size} index values for a rank-{len(shape)} output", op.where
        )
    indices = indices.reshape(-1, len(shape) or 1)
    if len({tuple(r) for r in indices.tolist()}) != len(indices):
        raise ConversionError("repeated indices: the order of their writes is open", op.where)
    if ((indices < 0) | (indices >= np.array(shape))).any():
        raise ConversionError(f"indices outside the output shape {shape}", op.where)
    out = op.outputs[0]
    base = b.raw_input(default_idx, out) if b.tensor(default_idx).quant else None
    base = base or b.input(default_idx)
    base = b.emit("Expand", [base, _i64(b, shape, "shape")])[0]
    values = b.raw_input(values_idx, out) if b.tensor(values_idx).quant else None
    values = values or b.input(values_idx)
    values = b.emit("Expand", [values, _i64(b, [len(indices)], "count")])[0]
    y = b.emit("ScatterND", [base, _i64(b, indices, "indices"), values])[0]
    b.set_output(out, y)


def one_hot(b: GraphBuilder, op: Operator) -> None:
    """on_value where the index equals the class, off_value elsewhere; out-of-range and
    negative indices give a row of off_value (ONNX OneHot would wrap negative ones)."""
    indices_idx, depth_idx, on_idx, off_idx = (op.inputs[i] for i in range(4))
    depth = table_size(one_int(b, depth_idx, "depth", op.where), "depth", op.where)
    out_rank = len(b.tensor(indices_idx).shape) + 1
    axis = int(op.options.get("axis", -1)) % out_rank
    dtype = b.tensor(indices_idx).dtype
    if dtype not in ("int32", "int64"):
        raise ConversionError(f"indices of type {dtype}", op.where)
    classes = np.arange(depth, dtype=dtype).reshape([-1] + [1] * (out_rank - axis - 1))
    x = b.emit("Unsqueeze", [b.input(indices_idx), _i64(b, [axis], "axis")])[0]
    hit = b.emit("Equal", [x, b.const(classes, "classes")])[0]
    on, off = (
        b.raw_input(i, op.outputs[0]) if b.tensor(i).quant else b.input(i)
        for i in (on_idx, off_idx)
    )
    b.set_output(op.outputs[0], b.emit("Where", [hit, on, off])[0])


def where(b: GraphBuilder, op: Operator) -> None:
    """The coordinates of the non-zero (true) elements, one row each, in row-major order."""
    y = b.emit("Transpose", [b.emit("NonZero", [b.input(op.inputs[0])])[0]], perm=[1, 0])[0]
    if b.tensor(op.outputs[0]).dtype != "int64":
        y = b.emit("Cast", [y], to=b.elem_type(op.outputs[0]))[0]
    b.set_output(op.outputs[0], y)


def unique(b: GraphBuilder, op: Operator) -> None:
    """The distinct values in order of first appearance and each element's index into them:
    ONNX Unique with sorted=0."""
    if len(b.tensor(op.inputs[0]).shape) != 1:
        raise ConversionError("UNIQUE takes a vector", op.where)
    x = b.raw_input(op.inputs[0], op.outputs[0])
    values, _, inverse, _ = b.emit("Unique", [x], 4, sorted=0)
    b.set_output(op.outputs[0], values)
    if b.tensor(op.outputs[1]).dtype != "int64":
        inverse = b.emit("Cast", [inverse], to=b.elem_type(op.outputs[1]))[0]
    b.set_output(op.outputs[1], inverse)
