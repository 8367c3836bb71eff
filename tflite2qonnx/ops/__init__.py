"""The operator table: one record (``Op``, ``ops.record``) per TFLite builtin or custom code.

Adding an operator means one small converter ``f(builder, operator)`` and one row here, with
its operand rules and how --bit-exact and int16 compute it (its integer kernels). Rows name
functions as ``"subpackage.module:function"``, imported on first use: the reader checks operands
without loading a converter. ``ops.dispatch`` runs them, ``ops.listing`` documents them.
"""

from __future__ import annotations

from tflite2qonnx.ops import operands as rules
from tflite2qonnx.ops.custom_records import CUSTOM_OPERATORS
from tflite2qonnx.ops.record import (
    ANY_INTEGER,
    EMULATED,
    EXACT,
    INT16_BIT_EXACT,
    INT16_DEFAULT,
    INT16_DEFAULT_INT64_BIAS,
    Op,
)

# one LSTM direction's operand ranks: input and recurrent weights (2-D), peepholes and gate
# biases (1-D), projection weights and bias; the states and layer norms follow per kernel
_LSTM_DIRECTION = (2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 2, 1)

_COMPARISON = {  # int16 compares stored integers; int8 / uint8 rescale (the kernel's, --bit-exact)
    "kernel": "exact.compare:compare",
    "kernel_when": "arith.stored_integer:compare_rescales",
    "stored_integers": ("int16",),
    "bit_exact": EMULATED,
}

__all__ = ["CONVERTERS", "CUSTOM_OPERATORS", "OPERATORS", "Op"]

# Builtin operators, by BuiltinOperator name
OPERATORS: dict[str, Op] = {
    "ABS": Op(
        "arith.elementwise:abs_",
        table="exact.unary:abs_",
        int16=INT16_BIT_EXACT,
        bit_exact=EMULATED,
    ),
    "ADD": Op(
        "arith.elementwise:add", kernel="exact.entry:add", int16=INT16_BIT_EXACT, bit_exact=EMULATED
    ),
    "ADD_N": Op("arith.elementwise:add_n", operands=rules.variadic),
    "ASSIGN_VARIABLE": Op("control.flow:assign_variable"),
    "ARG_MAX": Op("arith.reduce:arg_max", operands=rules.one_axis, bit_exact=EXACT),
    "ARG_MIN": Op("arith.reduce:arg_min", operands=rules.one_axis, bit_exact=EXACT),
    "ATAN2": Op("arith.misc_builtins:atan2"),
    "AVERAGE_POOL_2D": Op(
        "nn.pool:average_pool_2d",
        kernel="exact.entry:average_pool_2d",
        int16=INT16_DEFAULT,
        ranks=((4,), (4,)),
        bit_exact=EMULATED,
    ),
    "BATCH_MATMUL": Op(
        "nn.fully_connected:batch_matmul",
        kernel="exact.entry:batch_matmul",
        int16=INT16_BIT_EXACT,
        bit_exact=EMULATED,
    ),
    "BATCH_TO_SPACE_ND": Op("tensor.space_batch:batch_to_space_nd", bit_exact=EXACT),
    "BIDIRECTIONAL_SEQUENCE_LSTM": Op(
        "recurrent.sequence:bidirectional_sequence_lstm",
        ranks=((3, *_LSTM_DIRECTION * 2, 2, 2, 2, 2, 3), (3, 3)),
    ),
    "BITWISE_XOR": Op("arith.misc_builtins:bitwise_xor"),
    "BROADCAST_ARGS": Op("arith.misc_builtins:broadcast_args"),
    "BROADCAST_TO": Op("tensor.shape:broadcast_to", bit_exact=EXACT),
    "CALL_ONCE": Op("control.flow:call_once"),
    "BUCKETIZE": Op("arith.misc_builtins:bucketize"),
    "CAST": Op("arith.stored_integer:cast", complex="signal.complex_ops:complex_cast"),
    "CEIL": Op("arith.elementwise:ceil"),
    "CONCATENATION": Op(
        "tensor.concat_pad_transpose:concatenation",
        kernel="exact.concat:concatenation",
        kernel_when="exact.concat:rescales",
        operands=rules.concatenation,
        bit_exact=EMULATED,
    ),
    "CONV_2D": Op(
        "nn.conv:conv_2d",
        kernel="exact.entry:conv_2d",
        int16=INT16_DEFAULT_INT64_BIAS,
        ranks=((4, 4), (4,)),
        operands=rules.conv_filter,
        bit_exact=EMULATED,
    ),
    "CONV_3D": Op("nn.conv:conv_3d", ranks=((5, 5), (5,)), operands=rules.conv_filter),
    "CONV_3D_TRANSPOSE": Op("nn.conv3d_transpose:conv_3d_transpose", ranks=((1, 5, 5), (5,))),
    "COMPLEX_ABS": Op("signal.complex_ops:complex_abs", complex=True),
    "COS": Op("arith.elementwise:cos"),
    "CUMSUM": Op("arith.reduce:cumsum", operands=rules.one_axis),
    "DENSIFY": Op("tensor.densify:densify"),
    "DEPTHWISE_CONV_2D": Op(
        "nn.conv:depthwise_conv_2d",
        kernel="exact.entry:depthwise_conv_2d",
        int16=INT16_DEFAULT_INT64_BIAS,
        ranks=((4, 4), (4,)),
        operands=rules.conv_filter,
        bit_exact=EMULATED,
    ),
    "DEPTH_TO_SPACE": Op("nn.conv:depth_to_space", ranks=((4,), (4,)), bit_exact=EXACT),
    "DEQUANTIZE": Op("nn.quantize:dequantize", bit_exact=EXACT),
    "DIV": Op(
        "arith.elementwise:div",
        kernel="exact.compare:div",
        int16_kernel="exact.div16:convert",
        int16=INT16_DEFAULT,
        bit_exact=EMULATED,
    ),
    "DYNAMIC_UPDATE_SLICE": Op("tensor.update:dynamic_update_slice", bit_exact=EXACT),
    "ELU": Op("arith.elementwise:elu", table="exact.unary:elu", bit_exact=EMULATED),
    "EMBEDDING_LOOKUP": Op(
        "tensor.update:embedding_lookup", ranks=((1, None), (None,)), bit_exact=EXACT
    ),
    "EQUAL": Op("arith.stored_integer:equal", **_COMPARISON),
    "EXP": Op(
        "arith.elementwise:exp",
        table="exact.unary:exp",
        int16=INT16_DEFAULT,
        int16_kernel="exact.int16_interpolated:convert",
        bit_exact=EMULATED,
    ),
    "EXPAND_DIMS": Op(
        "tensor.shape:expand_dims",
        operands=rules.one_axis,
        bit_exact=EXACT,
        complex="signal.complex_ops:complex_reshape",
    ),
    "FILL": Op("tensor.shape:fill"),
    "FLOOR": Op("arith.elementwise:floor"),
    "FLOOR_DIV": Op("arith.stored_integer:floor_div", stored_integers=ANY_INTEGER),
    "FLOOR_MOD": Op("arith.stored_integer:floor_mod", stored_integers=ANY_INTEGER),
    "FULLY_CONNECTED": Op(
        "nn.fully_connected:fully_connected",
        kernel="exact.entry:fully_connected",
        int16=INT16_DEFAULT,
        bit_exact=EMULATED,
    ),
    "GATHER": Op("tensor.slicing:gather", bit_exact=EXACT),
    "GATHER_ND": Op("tensor.slicing:gather_nd", bit_exact=EXACT),
    "GELU": Op(
        "arith.elementwise:gelu",
        table="exact.unary:gelu",
        int16=INT16_DEFAULT,
        int16_kernel="exact.int16_interpolated:convert",
        bit_exact=EMULATED,
    ),
    "GREATER": Op("arith.stored_integer:greater", **_COMPARISON),
    "GREATER_EQUAL": Op("arith.stored_integer:greater_equal", **_COMPARISON),
    "IF": Op("control.flow:if_"),
    "IMAG": Op("signal.complex_ops:imag", complex=True),
    "HARD_SWISH": Op(
        "arith.elementwise:hard_swish", table="exact.unary:hard_swish", bit_exact=EMULATED
    ),
    "L2_NORMALIZATION": Op(
        "arith.reduce:l2_normalization", kernel="exact.l2norm:l2_normalization", bit_exact=EMULATED
    ),
    "L2_POOL_2D": Op("tensor.space_batch:l2_pool_2d", ranks=((4,), (4,))),
    "LEAKY_RELU": Op(
        "arith.elementwise:leaky_relu",
        table="exact.unary:leaky_relu",
        int16=INT16_BIT_EXACT,
        bit_exact=EMULATED,
    ),
    "LESS": Op("arith.stored_integer:less", **_COMPARISON),
    "LESS_EQUAL": Op("arith.stored_integer:less_equal", **_COMPARISON),
    "LOCAL_RESPONSE_NORMALIZATION": Op("nn.conv:local_response_normalization", ranks=((4,), (4,))),
    "LOG": Op(
        "arith.elementwise:log",
        table="exact.unary:log",
        int16=INT16_DEFAULT,
        int16_kernel="exact.int16_interpolated:convert",
        bit_exact=EMULATED,
    ),
    "LOG_SOFTMAX": Op(
        "nn.softmax:log_softmax", kernel="exact.log_softmax:log_softmax", bit_exact=EMULATED
    ),
    "LOGICAL_AND": Op("arith.elementwise:logical_and"),
    "LOGICAL_NOT": Op("arith.elementwise:logical_not"),
    "LOGICAL_OR": Op("arith.elementwise:logical_or"),
    "LOGISTIC": Op(
        "arith.elementwise:logistic",
        int16_kernel="exact.sigmoid16:convert",
        table="exact.unary:logistic",
        int16=INT16_DEFAULT,
        bit_exact=EMULATED,
    ),
    "MATRIX_DIAG": Op("tensor.space_batch:matrix_diag", bit_exact=EXACT),
    "MATRIX_SET_DIAG": Op("tensor.space_batch:matrix_set_diag", bit_exact=EXACT),
    "MAXIMUM": Op("arith.elementwise:maximum", operands=rules.binary, bit_exact=EXACT),
    "MAX_POOL_2D": Op("nn.pool:max_pool_2d", ranks=((4,), (4,)), bit_exact=EXACT),
    "MEAN": Op(
        "arith.reduce:mean",
        kernel="exact.entry:mean",
        int16=INT16_DEFAULT,
        operands=rules.reduction,
        bit_exact=EMULATED,
    ),
    "MINIMUM": Op("arith.elementwise:minimum", operands=rules.binary, bit_exact=EXACT),
    "MIRROR_PAD": Op("tensor.slicing:mirror_pad", operands=rules.pad, bit_exact=EXACT),
    "MUL": Op(
        "arith.elementwise:mul",
        kernel="exact.int8:mul",
        int16=INT16_BIT_EXACT,
        bit_exact=EMULATED,
        complex="signal.complex_ops:complex_mul",
    ),
    "NEG": Op(
        "arith.stored_integer:neg",
        kernel="exact.compare:neg",
        kernel_when="arith.stored_integer:neg_rescales",
        stored_integers=ANY_INTEGER,
        bit_exact=EMULATED,
    ),
    "NON_MAX_SUPPRESSION_V4": Op("detection.nms:non_max_suppression", ranks=((2, 1), (1,))),
    "NON_MAX_SUPPRESSION_V5": Op("detection.nms:non_max_suppression", ranks=((2, 1), (1, 1))),
    "NOT_EQUAL": Op("arith.stored_integer:not_equal", **_COMPARISON),
    "ONE_HOT": Op("tensor.scatter:one_hot", bit_exact=EXACT),
    "PACK": Op("tensor.slicing:pack", bit_exact=EXACT),
    "PAD": Op("tensor.concat_pad_transpose:pad", operands=rules.pad, bit_exact=EXACT),
    "PADV2": Op("tensor.concat_pad_transpose:pad", operands=rules.pad, bit_exact=EXACT),
    "POW": Op("arith.elementwise:pow_"),
    "PRELU": Op(
        "arith.elementwise:prelu",
        kernel="exact.int8:prelu",
        int16_kernel="exact.prelu16:convert",
        int16=INT16_DEFAULT,
        bit_exact=EMULATED,
    ),
    "QUANTIZE": Op(
        "nn.quantize:quantize",
        int16_kernel="exact.int16:quantize",
        int16_when="exact.int16:requantizes",
        table="exact.unary:requantize",
        kernel="exact.quantize:quantize",
        kernel_when="exact.quantize:rounds_first",
        int16=INT16_DEFAULT,
        bit_exact=EMULATED,
    ),
    "RANGE": Op("arith.misc_builtins:range_"),
    "RANK": Op("arith.misc_builtins:rank", bit_exact=EXACT),
    "REDUCE_ALL": Op("arith.misc_builtins:reduce_all", operands=rules.reduction),
    "REDUCE_ANY": Op("arith.misc_builtins:reduce_any", operands=rules.reduction),
    "REDUCE_MAX": Op("arith.reduce:reduce_max", operands=rules.reduction, bit_exact=EXACT),
    "REDUCE_MIN": Op("arith.reduce:reduce_min", operands=rules.reduction, bit_exact=EXACT),
    "REDUCE_PROD": Op(
        "arith.reduce:reduce_prod",
        kernel="exact.entry:reduce_prod",
        int16=INT16_DEFAULT,
        operands=rules.reduction,
        bit_exact=EMULATED,
    ),
    "READ_VARIABLE": Op("control.flow:read_variable"),
    "RELU": Op(
        "arith.elementwise:relu",
        table="exact.unary:relu",
        int16=INT16_BIT_EXACT,
        bit_exact=EMULATED,
    ),
    "RELU6": Op(
        "arith.elementwise:relu6",
        table="exact.unary:relu6",
        int16=INT16_BIT_EXACT,
        bit_exact=EMULATED,
    ),
    "RELU_0_TO_1": Op(
        "arith.elementwise:relu_0_to_1", table="exact.unary:relu_0_to_1", bit_exact=EMULATED
    ),
    "RELU_N1_TO_1": Op(
        "arith.elementwise:relu_n1_to_1", table="exact.unary:relu_n1_to_1", bit_exact=EMULATED
    ),
    "REAL": Op("signal.complex_ops:real", complex=True),
    "RESHAPE": Op(
        "tensor.shape:reshape", bit_exact=EXACT, complex="signal.complex_ops:complex_reshape"
    ),
    "RESIZE_BILINEAR": Op(
        "nn.resize:resize_bilinear",
        kernel="exact.resize:resize_bilinear",
        int16=INT16_DEFAULT,
        ranks=((4,), (4,)),
        operands=rules.resize,
        bit_exact=EMULATED,
    ),
    "RESIZE_NEAREST_NEIGHBOR": Op(
        "nn.resize:resize_nearest_neighbor",
        ranks=((4,), (4,)),
        operands=rules.resize,
        bit_exact=EXACT,
    ),
    "REVERSE_SEQUENCE": Op("tensor.space_batch:reverse_sequence", bit_exact=EXACT),
    "REVERSE_V2": Op("tensor.slicing:reverse_v2", bit_exact=EXACT),
    "RFFT2D": Op("signal.complex_ops:rfft2d", complex=True),
    "RIGHT_SHIFT": Op("arith.misc_builtins:right_shift"),
    "ROUND": Op("arith.elementwise:round_"),
    "RSQRT": Op(
        "arith.elementwise:rsqrt",
        table="exact.unary:rsqrt",
        int16=INT16_DEFAULT,
        int16_kernel="exact.int16_interpolated:convert",
        bit_exact=EMULATED,
    ),
    "SCATTER_ND": Op("tensor.scatter:scatter_nd", bit_exact=EXACT),
    "SEGMENT_SUM": Op("tensor.scatter:segment_sum"),
    "SELECT": Op("arith.elementwise:select", bit_exact=EXACT),
    "SELECT_V2": Op("arith.elementwise:select", bit_exact=EXACT),
    "SHAPE": Op("tensor.shape:shape", bit_exact=EXACT),
    "SIGN": Op("arith.elementwise:sign"),
    "SIN": Op("arith.elementwise:sin"),
    "SLICE": Op("tensor.slicing:slice_", operands=rules.per_dimension(1, 2), bit_exact=EXACT),
    "SOFTMAX": Op(
        "nn.softmax:softmax", kernel="exact.entry:softmax", int16=INT16_DEFAULT, bit_exact=EMULATED
    ),
    "SPACE_TO_BATCH_ND": Op("tensor.space_batch:space_to_batch_nd", bit_exact=EXACT),
    "SPACE_TO_DEPTH": Op("nn.conv:space_to_depth", ranks=((4,), (4,)), bit_exact=EXACT),
    "SPARSE_TO_DENSE": Op("tensor.scatter:sparse_to_dense", bit_exact=EXACT),
    "SPLIT": Op("tensor.slicing:split", operands=rules.split, bit_exact=EXACT),
    "SPLIT_V": Op("tensor.slicing:split_v", operands=rules.split_v, bit_exact=EXACT),
    "SQRT": Op("arith.stored_integer:sqrt", stored_integers=ANY_INTEGER),
    "SQUARE": Op("arith.elementwise:square"),
    "SQUARED_DIFFERENCE": Op(
        "arith.elementwise:squared_difference",
        kernel="exact.entry:squared_difference",
        bit_exact=EMULATED,
    ),
    "SQUEEZE": Op(
        "tensor.shape:squeeze", bit_exact=EXACT, complex="signal.complex_ops:complex_reshape"
    ),
    "STRIDED_SLICE": Op(
        "tensor.strided_slice:strided_slice", operands=rules.strided_slice, bit_exact=EXACT
    ),
    "STABLEHLO_COMPOSITE": Op(
        "control.composite:stablehlo_composite", bit_exact=EXACT
    ),  # copies bytes to and from its decomposition, whose ops rounded_once counts
    "SUB": Op(
        "arith.elementwise:sub", kernel="exact.entry:sub", int16=INT16_BIT_EXACT, bit_exact=EMULATED
    ),
    "SUM": Op(
        "arith.reduce:reduce_sum",
        kernel="exact.entry:reduce_sum",
        int16=INT16_BIT_EXACT,
        operands=rules.reduction,
        bit_exact=EMULATED,
    ),
    "SVDF": Op("recurrent.svdf:svdf", ranks=((2, 2, 2, 1, 2), (2,)), bit_exact=EMULATED),
    "TANH": Op(
        "arith.elementwise:tanh",
        int16_kernel="exact.sigmoid16:convert",
        table="exact.unary:tanh",
        int16=INT16_DEFAULT,
        bit_exact=EMULATED,
    ),
    "TILE": Op("tensor.slicing:tile", operands=rules.per_dimension(1), bit_exact=EXACT),
    "TOPK_V2": Op("tensor.topk:topk_v2", bit_exact=EXACT),
    "TRANSPOSE": Op(
        "tensor.concat_pad_transpose:transpose", operands=rules.per_dimension(1), bit_exact=EXACT
    ),
    "TRANSPOSE_CONV": Op(  # its activation is input 2: the record's predicates read that
        "nn.conv:transpose_conv",
        kernel="exact.entry:transpose_conv",
        kernel_when="treatment:transpose_conv_integer",
        int16_when="treatment:transpose_conv_int16",
        int16=INT16_DEFAULT_INT64_BIAS,
        ranks=((None, 4, 4), (4,)),
        bit_exact=EMULATED,
    ),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": Op(
        "recurrent.sequence:unidirectional_sequence_lstm",
        ranks=((3, *_LSTM_DIRECTION, 2, 2, 1, 1, 1, 1), (3,)),
        bit_exact=EMULATED,
    ),
    "UNIDIRECTIONAL_SEQUENCE_RNN": Op(
        "recurrent.sequence:unidirectional_sequence_rnn", ranks=((3, 2, 2, 1, 2), (3,))
    ),
    "VAR_HANDLE": Op("control.flow:var_handle"),
    "WHILE": Op("control.loop:while_"),
    "UNIQUE": Op("tensor.scatter:unique", bit_exact=EXACT),
    "UNPACK": Op("tensor.slicing:unpack", bit_exact=EXACT),
    "UNSORTED_SEGMENT_MAX": Op("tensor.scatter:unsorted_segment_max"),
    "UNSORTED_SEGMENT_MIN": Op("tensor.scatter:unsorted_segment_min"),
    "UNSORTED_SEGMENT_PROD": Op("tensor.scatter:unsorted_segment_prod"),
    "UNSORTED_SEGMENT_SUM": Op("tensor.scatter:unsorted_segment_sum"),
    "WHERE": Op("tensor.scatter:where"),
    "ZEROS_LIKE": Op("tensor.shape:zeros_like"),
}

OPERATORS.update(CUSTOM_OPERATORS)

# operator name (custom code for custom ops) -> its converter's reference, for the kinds that
# convert (``tflite2qonnx.ops.dispatch.converter`` imports one)
CONVERTERS: dict[str, str] = {
    name: op.convert for name, op in OPERATORS.items() if op.convert is not None
}
