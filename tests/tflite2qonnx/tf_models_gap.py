"""Single-op models of the builtins closing the gap to tf2onnx's TFLite handler table
(scripts/tflite_op_gap.py), generated with TF's converter as in tf_models.

Integer operands come from float inputs inside the model (cast after scaling), so the
interpreter and ours see the same values whatever the random input.
"""

from __future__ import annotations

import numpy as np
from tf_models import OpCase, _conv_then, _f, _fn, _layer
from tflite_writer import build_model


def _i(tf, x, scale: float = 4.0):
    """An int32 tensor from a float one: floor(x * scale) (ROUND has no reference kernel)."""
    return tf.cast(tf.floor(x * scale), tf.int32)


_SEGMENTS = np.array([0, 0, 1, 2, 2, 2], np.int32)  # sorted, no gaps (the kernel's rule)
_UNSORTED = np.array([2, 0, 2, -1, 0, 4], np.int32)  # -1 is dropped; segment 1 and 3 empty


def recode(data: bytes, op: str, new_op: str) -> bytes:
    """``data`` with ``op``'s code replaced, its options kept (TF's converter never emits
    L2_POOL_2D: the AVERAGE_POOL_2D model with the same Pool2DOptions)."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(data, 0))
    for code in model.operatorCodes:
        if max(code.builtinCode, code.deprecatedBuiltinCode) == getattr(schema.BuiltinOperator, op):
            code.builtinCode = getattr(schema.BuiltinOperator, new_op)
            code.deprecatedBuiltinCode = min(code.builtinCode, 127)
            code.version = 1
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _unsorted(tf_op: str):
    return OpCase(
        f"UNSORTED_SEGMENT_{tf_op.upper()}",
        _fn(lambda tf, x: getattr(tf.math, f"unsorted_segment_{tf_op}")(x, _UNSORTED, 5)),
        ((6, 3),),
        quantized=False,
        interpreter="default",
    )


GAP_CASES: dict[str, OpCase] = {
    # ---- space / batch and matrix ops
    "space_to_batch_nd": OpCase(
        "SPACE_TO_BATCH_ND",
        _conv_then(lambda tf, x: tf.space_to_batch(x, [2, 3], [[1, 1], [0, 1]])),
        ((2, 6, 5, 4),),
    ),
    "batch_to_space_nd": OpCase(
        "BATCH_TO_SPACE_ND",
        _conv_then(lambda tf, x: tf.batch_to_space(x, [2, 2], [[1, 0], [0, 2]])),
        ((4, 5, 6, 4),),
    ),
    "matrix_diag": OpCase("MATRIX_DIAG", _fn(lambda tf, x: tf.linalg.diag(x)), ((2, 3, 5),)),
    "matrix_set_diag_wide": OpCase(
        "MATRIX_SET_DIAG",
        _fn(lambda tf, t: tf.linalg.set_diag(t[0], t[1][:, :, 0])),
        ((2, 4, 6), (2, 4, 1)),
    ),
    "matrix_set_diag_tall": OpCase(
        "MATRIX_SET_DIAG",
        _fn(lambda tf, t: tf.linalg.set_diag(t[0], t[1][:, 0, :])),
        ((2, 6, 4), (2, 1, 4)),
        quantized=False,  # int8: the wide case covers it
    ),
    "reverse_sequence": OpCase(
        "REVERSE_SEQUENCE",
        _fn(lambda tf, x: tf.reverse_sequence(x, [3, 1, 6, 5], seq_axis=2, batch_axis=1)),
        ((2, 4, 6, 3),),
        quantized=False,  # TFLite has no int8 kernel
    ),
    "l2_pool_same": OpCase(
        "L2_POOL_2D",
        _fn(lambda tf, x: tf.nn.avg_pool2d(x, 3, 2, "SAME")),
        ((1, 9, 8, 3),),
        quantized=False,
        edit=lambda data: recode(data, "AVERAGE_POOL_2D", "L2_POOL_2D"),
    ),
    # float only: TFLite's CONV_3D_TRANSPOSE is float-only
    "conv_3d_transpose_same": OpCase(
        "CONV_3D_TRANSPOSE",
        _layer(lambda tf: tf.keras.layers.Conv3DTranspose(3, 3, (2, 1, 2), padding="same")),
        ((1, 3, 4, 5, 2),),
        quantized=False,
    ),
    "conv_3d_transpose_valid": OpCase(
        "CONV_3D_TRANSPOSE",
        _layer(lambda tf: tf.keras.layers.Conv3DTranspose(2, (2, 3, 1), (1, 2, 2))),
        ((1, 3, 4, 5, 2),),
        quantized=False,
    ),
    # ---- gather / scatter / segments
    # int8: the kernel sums stored integers (wrapping in int8) onto raw zeros
    "scatter_nd_duplicates": OpCase(
        "SCATTER_ND",
        _fn(lambda tf, x: tf.scatter_nd([[1], [3], [1], [0]], x, [5, 3])),
        ((4, 3),),
    ),
    "scatter_nd_slices": OpCase(
        "SCATTER_ND",
        _fn(lambda tf, x: tf.scatter_nd([[[0, 2]], [[1, 1]]], x, [2, 3, 4])),
        ((2, 1, 4),),
    ),
    # SEGMENT_SUM, ... have no reference kernel
    "segment_sum": OpCase(
        "SEGMENT_SUM",
        _fn(lambda tf, x: tf.math.segment_sum(x, _SEGMENTS)),
        ((6, 3),),
        quantized=False,
        interpreter="default",
    ),
    "unsorted_segment_sum": _unsorted("sum"),
    "unsorted_segment_max": _unsorted("max"),
    "unsorted_segment_min": _unsorted("min"),
    "unsorted_segment_prod": _unsorted("prod"),
    "one_hot_axis1": OpCase(
        "ONE_HOT",
        _fn(lambda tf, x: tf.one_hot(_i(tf, x, 3.0), 4, 2.5, -1.0, axis=1)),
        ((3, 5),),
    ),
    "where": OpCase(
        "WHERE", _fn(lambda tf, x: _f(tf, tf.where(x > 0.3))), ((3, 4),), quantized=False
    ),
    "sparse_to_dense": OpCase(
        "SPARSE_TO_DENSE",
        _fn(
            lambda tf, x: tf.compat.v1.sparse_to_dense([[0, 1], [2, 0], [1, 3]], [3, 4], x[0], 0.5)
        ),
        ((1, 3),),
    ),
    "unique": OpCase(
        "UNIQUE",
        _fn(lambda tf, x: [_f(tf, v) for v in tf.unique(tf.floor(x[0] * 2.0))]),
        ((1, 12),),
    ),
    # ---- non-max suppression (boxes with corners in either order, as the kernel allows);
    # fewer boxes than max_output_size survive on some inputs: the zero padding is compared
    "non_max_suppression_v4": OpCase(
        "NON_MAX_SUPPRESSION_V4",
        _fn(
            lambda tf, t: [
                _f(tf, v)
                for v in tf.raw_ops.NonMaxSuppressionV4(
                    boxes=t[0],
                    scores=t[1][:, 0],
                    max_output_size=10,
                    iou_threshold=0.2,
                    score_threshold=0.0,
                    pad_to_max_output_size=True,
                )
            ]
        ),
        ((16, 4), (16, 1)),
        quantized=False,
    ),
    "non_max_suppression_v5": OpCase(
        "NON_MAX_SUPPRESSION_V5",
        _fn(
            lambda tf, t: [
                _f(tf, v)
                for v in tf.raw_ops.NonMaxSuppressionV5(
                    boxes=t[0],
                    scores=t[1][:, 0],
                    max_output_size=7,
                    iou_threshold=0.25,
                    score_threshold=-0.2,
                    soft_nms_sigma=0.0,
                    pad_to_max_output_size=True,
                )
            ]
        ),
        ((16, 4), (16, 1)),
        quantized=False,
    ),
    # ---- math
    # float only: TF's int8 model keeps ATAN2 in float (TFLite has no int8 kernel)
    "atan2": OpCase(
        "ATAN2", _fn(lambda tf, t: tf.math.atan2(t[0], t[1])), ((2, 8), (2, 8)), quantized=False
    ),
    "right_shift": OpCase(
        "RIGHT_SHIFT",
        _fn(
            lambda tf, t: _f(
                tf, tf.bitwise.right_shift(_i(tf, t[0], 1000.0), _i(tf, t[1], 5.0) % 8)
            )
        ),
        ((2, 8), (2, 8)),
        quantized=False,
    ),
    "bitwise_xor": OpCase(
        "BITWISE_XOR",
        _fn(
            lambda tf, t: _f(tf, tf.bitwise.bitwise_xor(_i(tf, t[0], 1000.0), _i(tf, t[1], 100.0)))
        ),
        ((2, 8), (2, 8)),
        quantized=False,
    ),
    "reduce_any": OpCase(
        "REDUCE_ANY",
        _fn(lambda tf, x: _f(tf, tf.reduce_any(x > 0.6, axis=1))),
        ((3, 4, 2),),
        quantized=False,
    ),
    "reduce_all_keepdims": OpCase(
        "REDUCE_ALL",
        _fn(lambda tf, x: _f(tf, tf.reduce_all(x > -0.6, axis=[0, 2], keepdims=True))),
        ((3, 4, 2),),
        quantized=False,
    ),
    "range": OpCase(
        "RANGE",
        _fn(lambda tf, x: _f(tf, tf.range(_i(tf, x[0, 0], 3.0), 9, 2))),
        ((1, 1),),
        quantized=False,
    ),
    "bucketize": OpCase(
        "BUCKETIZE",
        _fn(lambda tf, x: _f(tf, tf.raw_ops.Bucketize(input=x, boundaries=[-0.5, 0.0, 0.25, 0.5]))),
        ((3, 5),),
        quantized=False,
    ),
}


# ---------------------------------------------------------------------- built without TF
# (TF's converter folds RANK and BROADCAST_ARGS on static shapes and emits no
# DYNAMIC_UPDATE_SLICE or EMBEDDING_LOOKUP from Keras)
def _i32(name: str, values) -> dict:
    values = np.asarray(values, np.int32)
    return {"name": name, "shape": values.shape, "dtype": "int32", "data": values}


def rank_model() -> bytes:
    tensors = [{"name": "x", "shape": (2, 3, 4)}, {"name": "r", "shape": (), "dtype": "int32"}]
    return build_model(tensors, [{"op": "RANK", "inputs": [0], "outputs": [1]}], [0], [1])


def broadcast_args_model() -> bytes:
    y = {"name": "y", "shape": (3,), "dtype": "int32"}
    ops = [{"op": "BROADCAST_ARGS", "inputs": [0, 1], "outputs": [2]}]
    return build_model([_i32("a", [5, 1, 3]), _i32("b", [4, 1]), y], ops, [], [2])


def dynamic_update_slice_model() -> bytes:
    """The same block written at a start past the end and at a negative one."""
    tensors = [
        {"name": "x", "shape": (4, 6)},
        {"name": "u", "shape": (2, 3)},
        _i32("past_end", [3, 1]),
        _i32("negative", [-1, 4]),
        {"name": "y1", "shape": (4, 6)},
        {"name": "y2", "shape": (4, 6)},
    ]
    ops = [
        {"op": "DYNAMIC_UPDATE_SLICE", "inputs": [0, 1, 2], "outputs": [4]},
        {"op": "DYNAMIC_UPDATE_SLICE", "inputs": [0, 1, 3], "outputs": [5]},
    ]
    return build_model(tensors, ops, [0, 1], [4, 5])


def embedding_lookup_model() -> bytes:
    tensors = [
        _i32("ids", [2, 0, 2, 3]),
        {"name": "table", "shape": (4, 3)},
        {"name": "rows", "shape": (4, 3)},
    ]
    ops = [{"op": "EMBEDDING_LOOKUP", "inputs": [0, 1], "outputs": [2]}]
    return build_model(tensors, ops, [1], [2])


def nms_v4_model(iou_threshold: float) -> bytes:
    """Boxes and scores fed, the rest constant: 3 boxes, at most 3 kept, any score."""
    scalar = {"shape": ()}
    tensors = [
        {"name": "boxes", "shape": (3, 4)},
        {"name": "scores", "shape": (3,)},
        _i32("max_output_size", 3),
        {"name": "iou", **scalar, "data": np.array(iou_threshold, np.float32)},
        {"name": "min_score", **scalar, "data": np.array(-1e9, np.float32)},
        {"name": "selected", "shape": (3,), "dtype": "int32"},
        {"name": "valid", "shape": (), "dtype": "int32"},
    ]
    ops = [{"op": "NON_MAX_SUPPRESSION_V4", "inputs": [0, 1, 2, 3, 4], "outputs": [5, 6]}]
    return build_model(tensors, ops, [0, 1], [5, 6])


GAP_MODELS = {
    "non_max_suppression_v4": lambda: nms_v4_model(0.5),
    "rank": rank_model,
    "broadcast_args": broadcast_args_model,
    "dynamic_update_slice": dynamic_update_slice_model,
    "embedding_lookup": embedding_lookup_model,
}
