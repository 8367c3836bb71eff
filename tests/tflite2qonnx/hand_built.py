"""Small models of ops TF's converter does not emit on its own (it folds or rewrites them, or
they come from other tools): built with tflite_writer, checked against the interpreter."""

from __future__ import annotations

import struct

import flatbuffers
import numpy as np
from flatbuffers import flexbuffers
from tflite_writer import build_model

INT32 = 2  # tflite.TensorType.INT32


def _unary(op: str, x_shape, y_shape, extra: list[dict] = (), version: int = 1) -> bytes:
    tensors = [{"name": "x", "shape": x_shape}, *extra, {"name": "y", "shape": y_shape}]
    inputs = [0, *range(1, 1 + len(extra))]
    return build_model(
        tensors,
        [{"op": op, "inputs": inputs, "outputs": [len(tensors) - 1], "version": version}],
        [0],
        [len(tensors) - 1],
    )


def relu_0_to_1() -> bytes:
    return _unary("RELU_0_TO_1", (1, 4, 4, 3), (1, 4, 4, 3))


def squeeze_all_unit_dims() -> bytes:
    """No SqueezeOptions: every size-1 dim goes."""
    return _unary("SQUEEZE", (1, 4, 1, 3), (4, 3))


def expand_dims_negative_axis() -> bytes:
    axis = {"name": "axis", "shape": (1,), "dtype": "int32", "data": np.array([-1], np.int32)}
    return _unary("EXPAND_DIMS", (1, 4, 3), (1, 4, 3, 1), [axis])


def broadcast_to() -> bytes:
    shape = np.array([2, 5, 4, 3], np.int32)
    dims = {"name": "shape", "shape": (4,), "dtype": "int32", "data": shape}
    return _unary("BROADCAST_TO", (1, 1, 4, 3), (2, 5, 4, 3), [dims], version=2)


def shape_fill_zeros_like() -> bytes:
    """FILL(SHAPE(x), 0.5) and ZEROS_LIKE(x): shapes computed at run time."""
    tensors = [
        {"name": "x", "shape": (1, 4, 3)},
        {"name": "dims", "shape": (3,), "dtype": "int32"},
        {"name": "value", "shape": (), "data": np.array(0.5, np.float32)},
        {"name": "filled", "shape": (1, 4, 3)},
        {"name": "zeros", "shape": (1, 4, 3)},
    ]
    ops = [
        {
            "op": "SHAPE",
            "inputs": [0],
            "outputs": [1],
            "options": ("ShapeOptions", {"OutType": INT32}),
        },
        {"op": "FILL", "inputs": [1, 2], "outputs": [3]},
        {"op": "ZEROS_LIKE", "inputs": [0], "outputs": [4]},
    ]
    return build_model(tensors, ops, [0], [3, 4])


DENSE = np.array([[1, 0, 0, 2], [0, 0, 0, 0], [0, 3, 0, 0], [4, 0, 5, 0]], np.float32)


def _densify_add(sparse: dict, dtype: str = "float32") -> bytes:
    """y = x + DENSIFY(sparse constant) (+ DEQUANTIZE for float16)."""
    tensors = [
        {"name": "x", "shape": (4, 4)},
        {"name": "sparse", "shape": (4, 4), "dtype": dtype, **sparse},
        {"name": "dense", "shape": (4, 4), "dtype": dtype},
        {"name": "y", "shape": (4, 4)},
    ]
    ops = [{"op": "DENSIFY", "inputs": [1], "outputs": [2]}]
    if dtype == "float16":
        tensors.insert(3, {"name": "dense_f32", "shape": (4, 4)})
        ops.append({"op": "DEQUANTIZE", "inputs": [2], "outputs": [3]})
    ops.append({"op": "ADD", "inputs": [0, len(tensors) - 2], "outputs": [len(tensors) - 1]})
    return build_model(tensors, ops, [0], [len(tensors) - 1])


def densify_csr(dtype: str = "float32") -> bytes:
    rows, cols = np.nonzero(DENSE)
    segments = [0, *np.cumsum(np.bincount(rows, minlength=4)).tolist()]
    sparsity = {"traversal_order": [0, 1], "dims": [(4,), (segments, cols.tolist())]}
    data = DENSE[rows, cols].astype(dtype)
    return _densify_add({"data": data, "sparsity": sparsity}, dtype)


def densify_blocked_2x2() -> bytes:
    """2x2 blocks, CSR over block columns: order (block row, block col, row, col in block)."""
    blocks = DENSE.reshape(2, 2, 2, 2).transpose(0, 2, 1, 3)  # [brow, bcol, r, c]
    nonzero = np.abs(blocks).sum(axis=(2, 3)) > 0
    brows, bcols = np.nonzero(nonzero)
    segments = [0, *np.cumsum(np.bincount(brows, minlength=2)).tolist()]
    sparsity = {
        "traversal_order": [0, 1, 2, 3],
        "block_map": [0, 1],
        "dims": [(2,), (segments, bcols.tolist()), (2,), (2,)],
    }
    return _densify_add({"data": blocks[brows, bcols].reshape(-1), "sparsity": sparsity})


# ---------------------------------------------------------------------- MediaPipe custom ops
SAME, VALID = 1, 2  # TfLitePadding


def _transpose_out(size: int, k: int, s: int, padding: int) -> tuple[int, int]:
    total = max(0, k - (size - 1) % s - 1) if padding == SAME else 0
    return s * (size - 1) + k - total, total // 2


def transpose_conv_bias_model(x_shape, w, bias, stride, padding) -> bytes:
    oh, _ = _transpose_out(x_shape[1], w.shape[1], stride[0], padding)
    ow, _ = _transpose_out(x_shape[2], w.shape[2], stride[1], padding)
    tensors = [
        {"name": "x", "shape": x_shape},
        {"name": "weights", "shape": w.shape, "data": w},
        {"name": "bias", "shape": bias.shape, "data": bias},
        {"name": "y", "shape": (x_shape[0], oh, ow, w.shape[0])},
    ]
    options = struct.pack("<3i", padding, stride[1], stride[0])
    ops = [{"op": "Convolution2DTransposeBias", "inputs": [0, 1, 2], "outputs": [3],
            "custom_options": options}]  # fmt: skip
    return build_model(tensors, ops, [0], [3])


def pool_options(padding, stride, kernel, activation=0) -> bytes:
    # TfLitePoolParams: padding, stride_w, stride_h, filter_w, filter_h, activation, computed
    return struct.pack("<10i", padding, stride[1], stride[0], kernel[1], kernel[0], activation,
                       0, 0, 0, 0)  # fmt: skip


def argmax_pool_model(x_shape, out_shape, kernel, stride, padding) -> bytes:
    tensors = [
        {"name": "x", "shape": x_shape},
        {"name": "values", "shape": out_shape},
        {"name": "indices", "shape": out_shape},
    ]
    ops = [{"op": "MaxPoolingWithArgmax2D", "inputs": [0], "outputs": [1, 2],
            "custom_options": pool_options(padding, stride, kernel)}]  # fmt: skip
    return build_model(tensors, ops, [0], [1, 2])


def unpool_model(x_shape, kernel, stride) -> bytes:
    out_shape = (x_shape[0], x_shape[1] * kernel[0], x_shape[2] * kernel[1], x_shape[3])
    tensors = [
        {"name": "x", "shape": x_shape},
        {"name": "indices", "shape": x_shape},
        {"name": "y", "shape": out_shape},
    ]
    ops = [{"op": "MaxUnpooling2D", "inputs": [0, 1], "outputs": [2],
            "custom_options": pool_options(SAME, stride, kernel)}]  # fmt: skip
    return build_model(tensors, ops, [0, 1], [2])


def flex_options(**options) -> bytes:
    """A flexbuffer map, as MediaPipe's v2 transform ops store their options: lists become
    typed int vectors, floats and ints scalars."""
    fbb = flexbuffers.Builder()
    with fbb.Map():
        for key, value in options.items():
            if isinstance(value, list | tuple):
                fbb.Key(key)
                fbb.TypedVectorFromElements([int(v) for v in value])
            elif isinstance(value, float):
                fbb.Float(key, value)
            elif isinstance(value, str):
                fbb.String(key, value)
            else:
                fbb.Int(key, int(value))
    return bytes(fbb.Finish())


def landmarks_to_matrix_model(landmarks_shape, options: bytes | None, version: int = 2) -> bytes:
    tensors = [
        {"name": "landmarks", "shape": landmarks_shape},
        {"name": "matrix", "shape": (1, 4, 4)},
    ]
    op = {"op": "Landmarks2TransformMatrix", "inputs": [0], "outputs": [1], "version": version}
    if options is not None:
        op["custom_options"] = options
    return build_model(tensors, [op], [0], [1])


def transform_landmarks_model(landmarks_shape, matrix_shape=(1, 4, 4), version: int = 2) -> bytes:
    tensors = [
        {"name": "landmarks", "shape": landmarks_shape},
        {"name": "matrix", "shape": matrix_shape},
        {"name": "y", "shape": landmarks_shape},
    ]
    ops = [{"op": "TransformLandmarks", "inputs": [0, 1], "outputs": [2], "version": version,
            "custom_options": flex_options()}]  # fmt: skip
    return build_model(tensors, ops, [0, 1], [2])


def transform_tensor_model(
    x_shape, out_hw, matrix_shape=(1, 4, 4), options: bytes | None = None, version: int = 2
) -> bytes:
    """TransformTensorBilinear; options default to MediaPipe's output_height / output_width."""
    out_shape = (x_shape[0], *out_hw, x_shape[3])
    tensors = [
        {"name": "x", "shape": x_shape},
        {"name": "matrix", "shape": matrix_shape},
        {"name": "y", "shape": out_shape},
    ]
    if options is None:
        options = flex_options(output_height=out_hw[0], output_width=out_hw[1])
    ops = [{"op": "TransformTensorBilinear", "inputs": [0, 1], "outputs": [2], "version": version,
            "custom_options": options}]  # fmt: skip
    return build_model(tensors, ops, [0, 1], [2])


def custom_op_examples() -> list[bytes]:
    """One model per MediaPipe op (run only by XNNPACK or not at all, so tested against numpy)."""
    w = np.ones((2, 2, 2, 3), np.float32)
    return [
        transpose_conv_bias_model((1, 3, 3, 3), w, np.zeros(2, np.float32), (2, 2), SAME),
        argmax_pool_model((1, 4, 4, 2), (1, 2, 2, 2), (2, 2), (2, 2), VALID),
        unpool_model((1, 2, 2, 2), (2, 2), (2, 2)),
        landmarks_to_matrix_model(
            (1, 4, 3),
            flex_options(
                subset_idxs=[0, 1, 2, 3],
                left_rotation_idx=0,
                right_rotation_idx=1,
                target_rotation_radians=0.0,
                output_height=8,
                output_width=8,
                scale_x=1.0,
                scale_y=1.0,
            ),
        ),
        transform_landmarks_model((1, 4, 3)),
        transform_tensor_model((1, 4, 4, 2), (3, 3)),
    ]


MODELS = {
    "relu_0_to_1": relu_0_to_1,
    "squeeze_all_unit_dims": squeeze_all_unit_dims,
    "expand_dims_negative_axis": expand_dims_negative_axis,
    "broadcast_to": broadcast_to,
    "shape_fill_zeros_like": shape_fill_zeros_like,
    "densify_csr": densify_csr,
    "densify_csr_float16": lambda: densify_csr("float16"),
    "densify_blocked_2x2": densify_blocked_2x2,
    "bidirectional_sequence_lstm": lambda: _sequence_model("bidirectional"),
    "unidirectional_sequence_rnn": lambda: _sequence_model("rnn"),
}


def _sequence_model(kind: str) -> bytes:
    """A generated LSTM's operator replaced (lstm_models, which needs TF's converter)."""
    import lstm_models

    base = lstm_models.keras_lstm(return_sequences=True)
    if kind == "rnn":
        return lstm_models.sequence_rnn(base)
    return lstm_models.bidirectional_lstm(base, merge_outputs=False)


# ---------------------------------------------------------------------- edited generated models
def edit_operator(
    data: bytes,
    op: str,
    *,
    new_op: str | None = None,
    version: int | None = None,
    options: dict | None = None,
    constants: dict | None = None,
    output_shape: tuple[int, ...] | None = None,
    output_quantization: tuple[float, int] | None = None,
) -> bytes:
    """A TF-generated model whose one ``op`` is changed: its code (``new_op``, ``version``),
    its builtin options' fields, constant inputs by position, its output's shape, its outputs'
    (per-tensor) scale and zero point.

    For ops TF's converter never emits (it folds or rewrites them) in an int8 model: the
    generated model brings real quantization parameters, which tflite_writer does not write.
    """
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(data, 0))
    sg = model.subgraphs[0]
    codes = model.operatorCodes
    (target,) = (o for o in sg.operators if _op_name(schema, codes[o.opcodeIndex]) == op)
    if new_op is not None or version is not None:
        code = schema.OperatorCodeT()
        code.builtinCode = getattr(schema.BuiltinOperator, new_op or op)
        code.deprecatedBuiltinCode = min(code.builtinCode, 127)
        code.version = version or codes[target.opcodeIndex].version
        if sum(o.opcodeIndex == target.opcodeIndex for o in sg.operators) == 1:
            codes[target.opcodeIndex] = code  # an unused code would still need a kernel
        else:
            codes.append(code)
            target.opcodeIndex = len(codes) - 1
        if new_op is not None:  # the old op's options table means nothing to the new op
            target.builtinOptionsType, target.builtinOptions = 0, None
    for field, value in (options or {}).items():
        setattr(target.builtinOptions, field, value)
    for position, value in (constants or {}).items():
        value = np.asarray(value, np.int32)
        buffer = schema.BufferT()  # a new buffer: TF shares equal constants' buffers
        buffer.data = np.frombuffer(value.tobytes(), np.uint8)
        model.buffers.append(buffer)
        tensor = sg.tensors[target.inputs[position]]
        tensor.shape = tensor.shapeSignature = list(value.shape)
        tensor.buffer = len(model.buffers) - 1
    if output_shape is not None:
        out = sg.tensors[target.outputs[0]]
        out.shape = out.shapeSignature = list(output_shape)
    if output_quantization is not None:
        for index in target.outputs:
            q = sg.tensors[index].quantization
            q.scale, q.zeroPoint = [output_quantization[0]], [output_quantization[1]]
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _op_name(schema, code) -> str:
    builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
    return next(k for k, v in vars(schema.BuiltinOperator).items() if v == builtin)
