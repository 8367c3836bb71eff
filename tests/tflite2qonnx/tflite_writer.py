"""A small TFLite flatbuffer writer for ops TF's converter does not emit (custom ops, DENSIFY).

One subgraph; tensors are dicts (name, shape, dtype, optional data, sparsity, quant =
(scales, zero_points) and variable), operators
name a builtin or a custom code and may carry raw custom options.
"""

from __future__ import annotations

import flatbuffers
import numpy as np
import tflite

_TYPES = {
    "float32": tflite.TensorType.FLOAT32,
    "float16": tflite.TensorType.FLOAT16,
    "int32": tflite.TensorType.INT32,
    "int64": tflite.TensorType.INT64,
    "int8": tflite.TensorType.INT8,
    "uint8": tflite.TensorType.UINT8,
    "int16": tflite.TensorType.INT16,
    "uint32": tflite.TensorType.UINT32,
    "uint64": tflite.TensorType.UINT64,
    "bool": tflite.TensorType.BOOL,
    "complex64": tflite.TensorType.COMPLEX64,
}


def _quantization(b: flatbuffers.Builder, quant: tuple) -> int:
    """QuantizationParameters from (scales, zero_points[, quantized_dimension])."""
    scales, zero_points = quant[:2]
    b.StartVector(4, len(scales), 4)
    for v in reversed(list(scales)):
        b.PrependFloat32(float(v))
    scale_vec = b.EndVector()
    zp_vec = int_vector(b, [int(z) for z in zero_points], "PrependInt64", 8)
    tflite.QuantizationParametersStart(b)
    tflite.QuantizationParametersAddScale(b, scale_vec)
    tflite.QuantizationParametersAddZeroPoint(b, zp_vec)
    if len(quant) > 2:
        tflite.QuantizationParametersAddQuantizedDimension(b, quant[2])
    return tflite.QuantizationParametersEnd(b)


def int_vector(b: flatbuffers.Builder, values, prepend: str = "PrependInt32", size: int = 4):
    b.StartVector(size, len(values), size)
    for v in reversed(list(values)):
        getattr(b, prepend)(v)
    return b.EndVector()


def offset_vector(b: flatbuffers.Builder, offs):
    b.StartVector(4, len(offs), 4)
    for o in reversed(offs):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def byte_vector(b: flatbuffers.Builder, data: bytes, align: int = 16):
    b.StartVector(1, len(data), align)
    b.head = b.head - len(data)
    b.Bytes[b.head : b.head + len(data)] = data
    return b.EndVector()


def index_vector(b: flatbuffers.Builder, values):
    vec = int_vector(b, values)
    tflite.Int32VectorStart(b)
    tflite.Int32VectorAddValues(b, vec)
    return tflite.Int32VectorEnd(b)


def sparsity_parameters(
    b: flatbuffers.Builder, traversal_order, block_map, dim_metadata: list[tuple]
) -> int:
    """SparsityParameters; each dim is (format, dense_size, segments or None, indices)."""
    dims = []
    for fmt, dense_size, segments, indices in dim_metadata:
        seg = idx = None
        if segments is not None:
            seg, idx = index_vector(b, segments), index_vector(b, indices)
        tflite.DimensionMetadataStart(b)
        tflite.DimensionMetadataAddFormat(b, fmt)
        tflite.DimensionMetadataAddDenseSize(b, dense_size)
        if seg is not None:
            tflite.DimensionMetadataAddArraySegmentsType(b, tflite.SparseIndexVector.Int32Vector)
            tflite.DimensionMetadataAddArraySegments(b, seg)
            tflite.DimensionMetadataAddArrayIndicesType(b, tflite.SparseIndexVector.Int32Vector)
            tflite.DimensionMetadataAddArrayIndices(b, idx)
        dims.append(tflite.DimensionMetadataEnd(b))
    order = int_vector(b, traversal_order)
    block_map = int_vector(b, block_map)
    dims_vec = offset_vector(b, dims)
    tflite.SparsityParametersStart(b)
    tflite.SparsityParametersAddTraversalOrder(b, order)
    tflite.SparsityParametersAddBlockMap(b, block_map)
    tflite.SparsityParametersAddDimMetadata(b, dims_vec)
    return tflite.SparsityParametersEnd(b)


def _sparsity(b: flatbuffers.Builder, sp: dict) -> int:
    """sp: traversal_order, block_map, dims = [(dense_size,) | (segments, indices)]."""
    dims = [
        (tflite.DimensionType.SPARSE_CSR, 0, *dim)
        if len(dim) == 2
        else (tflite.DimensionType.DENSE, dim[0], None, None)
        for dim in sp["dims"]
    ]
    return sparsity_parameters(b, sp["traversal_order"], sp.get("block_map", []), dims)


def build_model(tensors: list[dict], operators: list[dict], inputs, outputs) -> bytes:
    """A one-subgraph model. Operators: {"op": builtin name or custom code, "inputs",
    "outputs", optional "custom_options" (bytes) or "options" (builtin options table name and
    scalar fields)}; names not in BuiltinOperator are custom."""
    b = flatbuffers.Builder(1024)
    buffers = [b""]
    for t in tensors:
        data = t.get("data")
        buffers.append(b"" if data is None else np.ascontiguousarray(data).tobytes())
    buffer_offs = []
    for data in buffers:
        vec = byte_vector(b, data) if data else None
        tflite.BufferStart(b)
        if vec is not None:
            tflite.BufferAddData(b, vec)
        buffer_offs.append(tflite.BufferEnd(b))

    tensor_offs = []
    for k, t in enumerate(tensors):
        name = b.CreateString(t["name"])
        shape = int_vector(b, t["shape"])
        sparsity = _sparsity(b, t["sparsity"]) if "sparsity" in t else None
        quant = _quantization(b, t["quant"]) if "quant" in t else None
        tflite.TensorStart(b)
        tflite.TensorAddShape(b, shape)
        tflite.TensorAddType(b, _TYPES[t.get("dtype", "float32")])
        tflite.TensorAddBuffer(b, k + 1)
        tflite.TensorAddName(b, name)
        if sparsity is not None:
            tflite.TensorAddSparsity(b, sparsity)
        if quant is not None:
            tflite.TensorAddQuantization(b, quant)
        if t.get("variable"):
            tflite.TensorAddIsVariable(b, True)
        tensor_offs.append(tflite.TensorEnd(b))

    codes: list[str] = list(dict.fromkeys(op["op"] for op in operators))
    versions = {op["op"]: op.get("version", 1) for op in operators}
    op_offs = []
    for op in operators:
        ins, outs = int_vector(b, op["inputs"]), int_vector(b, op["outputs"])
        custom = byte_vector(b, op["custom_options"], 1) if "custom_options" in op else None
        options = None
        if "options" in op:  # (table name, {field: scalar}), e.g. ("ShapeOptions", {...})
            table, fields = op["options"]
            getattr(tflite, f"{table}Start")(b)
            for field, value in fields.items():
                getattr(tflite, f"{table}Add{field}")(b, value)
            options = (getattr(tflite.BuiltinOptions, table), getattr(tflite, f"{table}End")(b))
        tflite.OperatorStart(b)
        tflite.OperatorAddOpcodeIndex(b, codes.index(op["op"]))
        tflite.OperatorAddInputs(b, ins)
        tflite.OperatorAddOutputs(b, outs)
        if custom is not None:
            tflite.OperatorAddCustomOptions(b, custom)
        if options is not None:
            tflite.OperatorAddBuiltinOptionsType(b, options[0])
            tflite.OperatorAddBuiltinOptions(b, options[1])
        op_offs.append(tflite.OperatorEnd(b))

    tensors_vec, ops_vec = offset_vector(b, tensor_offs), offset_vector(b, op_offs)
    sg_in, sg_out, sg_name = int_vector(b, inputs), int_vector(b, outputs), b.CreateString("main")
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, tensors_vec)
    tflite.SubGraphAddOperators(b, ops_vec)
    tflite.SubGraphAddInputs(b, sg_in)
    tflite.SubGraphAddOutputs(b, sg_out)
    tflite.SubGraphAddName(b, sg_name)
    subgraph = tflite.SubGraphEnd(b)

    code_offs = []
    for code in codes:
        builtin = getattr(tflite.BuiltinOperator, code, None)
        custom = b.CreateString(code) if builtin is None else None
        builtin = tflite.BuiltinOperator.CUSTOM if builtin is None else builtin
        tflite.OperatorCodeStart(b)
        tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(builtin, 127))
        tflite.OperatorCodeAddBuiltinCode(b, builtin)
        tflite.OperatorCodeAddVersion(b, versions[code])
        if custom is not None:
            tflite.OperatorCodeAddCustomCode(b, custom)
        code_offs.append(tflite.OperatorCodeEnd(b))

    codes_vec, sgs_vec, bufs_vec = offset_vector(b, code_offs), offset_vector(b, [subgraph]), None
    bufs_vec = offset_vector(b, buffer_offs)
    description = b.CreateString("built by tflite_writer")
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddOperatorCodes(b, codes_vec)
    tflite.ModelAddSubgraphs(b, sgs_vec)
    tflite.ModelAddDescription(b, description)
    tflite.ModelAddBuffers(b, bufs_vec)
    b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())
