"""The operator table: one record (``Op``, ``ops.record``) per TFLite builtin or custom code.

Adding an operator means one small converter ``f(builder, operator)`` and one row here: its
operand rules and, per input type, the TFLite kernels emulated in place of the converter
(``Kernel``: int8, int16, hybrid), from which its --bit-exact and int16 labels follow. Rows
name functions as ``"subpackage.module:function"``, imported on first use: the reader checks
operands without loading a converter. ``ops.dispatch`` runs them, ``ops.listing`` documents them.
"""

from __future__ import annotations

from tflite2qonnx.ops import operands as rules
from tflite2qonnx.ops.custom_records import CUSTOM_OPERATORS
from tflite2qonnx.ops.record import (
    ANY_INTEGER,
    BY_DEFAULT,
    DEFAULT_WHERE,
    EXACT,
    Kernel,
    Op,
)
from tflite2qonnx.ops.recurrent_records import RECURRENT_OPERATORS

_COMPARISON = {  # int16 compares stored integers; int8 / uint8 rescale (the kernel's, --bit-exact)
    "int8": Kernel("exact.compare:compare", when="arith.stored_integer:compare_rescales"),
    "stored_integers": ("int16",),
}

# int8 / uint8 convolutions whose accumulator's multiplier shifts right: by default their
# accumulator rounded twice as MultiplyByQuantizedMultiplier rounds it (nn.conv_rounding)
_ROUNDS_TWICE = "kernel_rounding:accumulator_rounds_twice"
# the int8 / uint8 kernels that run by default where their ``when`` holds: the float graph with
# its requantization rounded as MultiplyByQuantizedMultiplier rounds it, twice where the
# multiplier shifts right (arith.rounding, nn.quantize_rounding)
_AR = "arith.rounding"


__all__ = ["CONVERTERS", "CUSTOM_OPERATORS", "OPERATORS", "Kernel", "Op"]

# Builtin operators, by BuiltinOperator name (the recurrent ones in ops.recurrent_records)
OPERATORS: dict[str, Op] = {
    "ABS": Op(
        "arith.elementwise:abs_",
        int8=Kernel("exact.unary:abs_", table=True),
        int16=Kernel("exact.unary:abs_", table=True),
    ),
    "ADD": Op(
        "arith.elementwise:add",
        int8=Kernel("exact.int8:add"),
        int16=(
            Kernel("exact.int16:add_pot", when="exact.int16:pot_scaled"),
            Kernel("exact.int8:add"),
        ),
    ),
    "ADD_N": Op("arith.elementwise:add_n", operands=rules.variadic),
    "ASSIGN_VARIABLE": Op("control.flow:assign_variable"),
    "ARG_MAX": Op("arith.reduce:arg_max", operands=rules.one_axis, int8=EXACT),
    "ARG_MIN": Op("arith.reduce:arg_min", operands=rules.one_axis, int8=EXACT),
    "ATAN2": Op("arith.misc_builtins:atan2"),
    "AVERAGE_POOL_2D": Op(
        "nn.pool:average_pool_2d",
        ranks=((4,), (4,)),
        int8=Kernel("exact.entry:average_pool_2d"),
        int16=Kernel("exact.entry:average_pool_2d_16x8", BY_DEFAULT),
    ),
    "BATCH_MATMUL": Op(
        "nn.fully_connected:batch_matmul",
        int8=Kernel("exact.int8:batch_matmul"),
        int16=Kernel("exact.bmm16:batch_matmul"),
    ),
    "BATCH_TO_SPACE_ND": Op("tensor.space_batch:batch_to_space_nd", int8=EXACT),
    "BITWISE_XOR": Op("arith.misc_builtins:bitwise_xor"),
    "BROADCAST_ARGS": Op("arith.misc_builtins:broadcast_args"),
    "BROADCAST_TO": Op("tensor.shape:broadcast_to", int8=EXACT),
    "CALL_ONCE": Op("control.flow:call_once"),
    "BUCKETIZE": Op("arith.misc_builtins:bucketize"),
    "CAST": Op("arith.stored_integer:cast", complex="signal.complex_ops:complex_cast"),
    "CEIL": Op("arith.elementwise:ceil"),
    "CONCATENATION": Op(
        "tensor.concat_pad_transpose:concatenation",
        operands=rules.concatenation,
        int8=Kernel("exact.concat:concatenation", when="exact.concat:rescales"),
    ),
    "CONV_2D": Op(
        "nn.conv:conv_2d",
        ranks=((4, 4), (4,)),
        operands=rules.conv_filter,
        int8=(
            Kernel("exact.entry:conv_2d"),
            Kernel("nn.conv_rounding:conv_2d", BY_DEFAULT, when=_ROUNDS_TWICE),
        ),
        int16=Kernel("exact.entry:conv_2d_16x8", DEFAULT_WHERE, when="exact.int16:wide_bias"),
        hybrid=Kernel("hybrid.conv:conv_2d", BY_DEFAULT, when="hybrid.conv:is_hybrid_conv"),
    ),
    "CONV_3D": Op("nn.conv:conv_3d", ranks=((5, 5), (5,)), operands=rules.conv_filter),
    "CONV_3D_TRANSPOSE": Op("nn.conv3d_transpose:conv_3d_transpose", ranks=((1, 5, 5), (5,))),
    "COMPLEX_ABS": Op("signal.complex_ops:complex_abs", complex=True),
    "COS": Op("arith.elementwise:cos"),
    "CUMSUM": Op("arith.reduce:cumsum", operands=rules.one_axis),
    "DENSIFY": Op("tensor.densify:densify"),
    "DEPTHWISE_CONV_2D": Op(
        "nn.conv:depthwise_conv_2d",
        ranks=((4, 4), (4,)),
        operands=rules.conv_filter,
        int8=(
            Kernel("exact.entry:depthwise_conv_2d"),
            Kernel("nn.conv_rounding:depthwise_conv_2d", BY_DEFAULT, when=_ROUNDS_TWICE),
        ),
        int16=Kernel(
            "exact.entry:depthwise_conv_2d_16x8", DEFAULT_WHERE, when="exact.int16:wide_bias"
        ),
        hybrid=Kernel(
            "hybrid.conv:depthwise_conv_2d", BY_DEFAULT, when="hybrid.conv:is_hybrid_conv"
        ),
    ),
    "DEPTH_TO_SPACE": Op("nn.conv:depth_to_space", ranks=((4,), (4,)), int8=EXACT),
    "DEQUANTIZE": Op("nn.quantize:dequantize", int8=EXACT),
    "DIV": Op(
        "arith.elementwise:div",
        int8=Kernel("exact.compare:div"),
        int16=Kernel("exact.div16:convert", BY_DEFAULT),
    ),
    "DYNAMIC_UPDATE_SLICE": Op("tensor.update:dynamic_update_slice", int8=EXACT),
    "ELU": Op("arith.elementwise:elu", int8=Kernel("exact.unary:elu", table=True)),
    "EMBEDDING_LOOKUP": Op(
        "tensor.update:embedding_lookup", ranks=((1, None), (None,)), int8=EXACT
    ),
    "EQUAL": Op("arith.stored_integer:equal", **_COMPARISON),
    "EXP": Op(
        "arith.elementwise:exp",
        int8=Kernel("exact.unary:exp", table=True),
        int16=Kernel("exact.int16_interpolated:convert", BY_DEFAULT),
    ),
    "EXPAND_DIMS": Op(
        "tensor.shape:expand_dims",
        operands=rules.one_axis,
        int8=EXACT,
        complex="signal.complex_ops:complex_reshape",
    ),
    "FILL": Op("tensor.shape:fill"),
    "FLOOR": Op("arith.elementwise:floor"),
    "FLOOR_DIV": Op("arith.stored_integer:floor_div", stored_integers=ANY_INTEGER),
    "FLOOR_MOD": Op("arith.stored_integer:floor_mod", stored_integers=ANY_INTEGER),
    "FULLY_CONNECTED": Op(
        "nn.fully_connected:fully_connected",
        int8=Kernel("exact.entry:fully_connected"),
        int16=Kernel("exact.entry:fully_connected_16x8", BY_DEFAULT),
        hybrid=(
            Kernel(
                "hybrid.blockwise:fully_connected",
                BY_DEFAULT,
                when="hybrid.blockwise:is_blockwise_fc",
            ),
            Kernel(
                "hybrid.fully_connected:fully_connected",
                BY_DEFAULT,
                when="hybrid.fully_connected:is_hybrid_fc",
            ),
        ),
    ),
    "GATHER": Op("tensor.slicing:gather", int8=EXACT),
    "GATHER_ND": Op("tensor.slicing:gather_nd", int8=EXACT),
    "GELU": Op(
        "arith.elementwise:gelu",
        int8=Kernel("exact.unary:gelu", table=True),
        int16=Kernel("exact.int16_interpolated:convert", BY_DEFAULT),
    ),
    "GREATER": Op("arith.stored_integer:greater", **_COMPARISON),
    "GREATER_EQUAL": Op("arith.stored_integer:greater_equal", **_COMPARISON),
    "IF": Op("control.flow:if_"),
    "IMAG": Op("signal.complex_ops:imag", complex=True),
    "HARD_SWISH": Op(
        "arith.elementwise:hard_swish", int8=Kernel("exact.unary:hard_swish", table=True)
    ),
    "L2_NORMALIZATION": Op(
        "arith.reduce:l2_normalization", int8=Kernel("exact.l2norm:l2_normalization")
    ),
    "L2_POOL_2D": Op("tensor.space_batch:l2_pool_2d", ranks=((4,), (4,))),
    "LEAKY_RELU": Op(
        "arith.elementwise:leaky_relu",
        int8=(
            Kernel("exact.unary:leaky_relu", table=True),
            Kernel(f"{_AR}:leaky_relu", BY_DEFAULT, when=f"{_AR}:leaky_relu_rounds_twice"),
        ),
        int16=Kernel("exact.unary:leaky_relu", table=True),
    ),
    "LESS": Op("arith.stored_integer:less", **_COMPARISON),
    "LESS_EQUAL": Op("arith.stored_integer:less_equal", **_COMPARISON),
    "LOCAL_RESPONSE_NORMALIZATION": Op("nn.conv:local_response_normalization", ranks=((4,), (4,))),
    "LOG": Op(
        "arith.elementwise:log",
        int8=Kernel("exact.unary:log", table=True),
        int16=Kernel("exact.int16_interpolated:convert", BY_DEFAULT),
    ),
    "LOG_SOFTMAX": Op("nn.softmax:log_softmax", int8=Kernel("exact.log_softmax:log_softmax")),
    "LOGICAL_AND": Op("arith.elementwise:logical_and"),
    "LOGICAL_NOT": Op("arith.elementwise:logical_not"),
    "LOGICAL_OR": Op("arith.elementwise:logical_or"),
    "LOGISTIC": Op(
        "arith.elementwise:logistic",
        int8=Kernel("exact.unary:logistic", table=True),
        int16=Kernel("exact.sigmoid16:convert", BY_DEFAULT),
    ),
    "MATRIX_DIAG": Op("tensor.space_batch:matrix_diag", int8=EXACT),
    "MATRIX_SET_DIAG": Op("tensor.space_batch:matrix_set_diag", int8=EXACT),
    "MAXIMUM": Op("arith.elementwise:maximum", operands=rules.binary, int8=EXACT),
    "MAX_POOL_2D": Op("nn.pool:max_pool_2d", ranks=((4,), (4,)), int8=EXACT),
    "MEAN": Op(
        "arith.reduce:mean",
        operands=rules.reduction,
        int8=(
            Kernel("exact.entry:mean"),
            Kernel(f"{_AR}:mean", BY_DEFAULT, when=f"{_AR}:mean_rounds_twice"),
        ),
        int16=Kernel("exact.entry:mean", BY_DEFAULT),
    ),
    "MINIMUM": Op("arith.elementwise:minimum", operands=rules.binary, int8=EXACT),
    "MIRROR_PAD": Op("tensor.slicing:mirror_pad", operands=rules.pad, int8=EXACT),
    "MUL": Op(
        "arith.elementwise:mul",
        int8=(
            Kernel("exact.int8:mul"),
            Kernel(f"{_AR}:mul", BY_DEFAULT, when=f"{_AR}:mul_rounds_twice"),
        ),
        int16=Kernel("exact.int8:mul"),
        complex="signal.complex_ops:complex_mul",
    ),
    "NEG": Op(
        "arith.stored_integer:neg",
        int8=Kernel("exact.compare:neg", when="arith.stored_integer:neg_rescales"),
        stored_integers=ANY_INTEGER,
    ),
    "NON_MAX_SUPPRESSION_V4": Op("detection.nms:non_max_suppression", ranks=((2, 1), (1,))),
    "NON_MAX_SUPPRESSION_V5": Op("detection.nms:non_max_suppression", ranks=((2, 1), (1, 1))),
    "NOT_EQUAL": Op("arith.stored_integer:not_equal", **_COMPARISON),
    "ONE_HOT": Op("tensor.scatter:one_hot", int8=EXACT),
    "PACK": Op("tensor.slicing:pack", int8=EXACT),
    "PAD": Op("tensor.concat_pad_transpose:pad", operands=rules.pad, int8=EXACT),
    "PADV2": Op("tensor.concat_pad_transpose:pad", operands=rules.pad, int8=EXACT),
    "POW": Op("arith.elementwise:pow_"),
    "PRELU": Op(
        "arith.elementwise:prelu",
        int8=(
            Kernel("exact.int8:prelu"),
            Kernel(f"{_AR}:prelu", BY_DEFAULT, when=f"{_AR}:prelu_requantizes"),
        ),
        int16=Kernel("exact.prelu16:convert", BY_DEFAULT),
    ),
    "QUANTIZE": Op(
        "nn.quantize:quantize",
        int8=(
            Kernel("exact.unary:requantize", table=True),
            Kernel(
                "nn.quantize_rounding:quantize",
                BY_DEFAULT,
                when="nn.quantize_rounding:requantize_rounds_twice",
            ),
        ),
        int16=Kernel("exact.int16:quantize", BY_DEFAULT, when="exact.int16:requantizes"),
        float_input=Kernel("exact.quantize:quantize", when="exact.quantize:rounds_first"),
    ),
    "RANGE": Op("arith.misc_builtins:range_"),
    "RANK": Op("arith.misc_builtins:rank", int8=EXACT),
    "REDUCE_ALL": Op("arith.misc_builtins:reduce_all", operands=rules.reduction),
    "REDUCE_ANY": Op("arith.misc_builtins:reduce_any", operands=rules.reduction),
    "REDUCE_MAX": Op("arith.reduce:reduce_max", operands=rules.reduction, int8=EXACT),
    "REDUCE_MIN": Op("arith.reduce:reduce_min", operands=rules.reduction, int8=EXACT),
    "REDUCE_PROD": Op(
        "arith.reduce:reduce_prod",
        operands=rules.reduction,
        int8=Kernel("exact.entry:reduce_prod"),
        int16=Kernel("exact.entry:reduce_prod", BY_DEFAULT),
    ),
    "READ_VARIABLE": Op("control.flow:read_variable"),
    "RELU": Op(
        "arith.elementwise:relu",
        int8=Kernel("exact.unary:relu", table=True),
        int16=Kernel("exact.unary:relu", table=True),
    ),
    "RELU6": Op(
        "arith.elementwise:relu6",
        int8=Kernel("exact.unary:relu6", table=True),
        int16=Kernel("exact.unary:relu6", table=True),
    ),
    "RELU_0_TO_1": Op(
        "arith.elementwise:relu_0_to_1", int8=Kernel("exact.unary:relu_0_to_1", table=True)
    ),
    "RELU_N1_TO_1": Op(
        "arith.elementwise:relu_n1_to_1", int8=Kernel("exact.unary:relu_n1_to_1", table=True)
    ),
    "REAL": Op("signal.complex_ops:real", complex=True),
    "RESHAPE": Op("tensor.shape:reshape", int8=EXACT, complex="signal.complex_ops:complex_reshape"),
    "RESIZE_BILINEAR": Op(
        "nn.resize:resize_bilinear",
        ranks=((4,), (4,)),
        operands=rules.resize,
        int8=Kernel("exact.resize:resize_bilinear"),
        int16=Kernel("exact.resize:resize_bilinear", BY_DEFAULT),
    ),
    "RESIZE_NEAREST_NEIGHBOR": Op(
        "nn.resize:resize_nearest_neighbor",
        ranks=((4,), (4,)),
        operands=rules.resize,
        int8=EXACT,
    ),
    "REVERSE_SEQUENCE": Op("tensor.space_batch:reverse_sequence", int8=EXACT),
    "REVERSE_V2": Op("tensor.slicing:reverse_v2", int8=EXACT),
    "RFFT2D": Op("signal.complex_ops:rfft2d", complex=True),
    "RIGHT_SHIFT": Op("arith.misc_builtins:right_shift"),
    "ROUND": Op("arith.elementwise:round_"),
    "RSQRT": Op(
        "arith.elementwise:rsqrt",
        int8=Kernel("exact.unary:rsqrt", table=True),
        int16=Kernel("exact.int16_interpolated:convert", BY_DEFAULT),
    ),
    "SCATTER_ND": Op("tensor.scatter:scatter_nd", int8=EXACT),
    "SEGMENT_SUM": Op("tensor.scatter:segment_sum"),
    "SELECT": Op("arith.elementwise:select", int8=EXACT),
    "SELECT_V2": Op("arith.elementwise:select", int8=EXACT),
    "SHAPE": Op("tensor.shape:shape", int8=EXACT),
    "SIGN": Op("arith.elementwise:sign"),
    "SIN": Op("arith.elementwise:sin"),
    "SLICE": Op("tensor.slicing:slice_", operands=rules.per_dimension(1, 2), int8=EXACT),
    "SOFTMAX": Op(
        "nn.softmax:softmax",
        int8=(  # onto int16: gemmlowp's fixed point, not the float table
            Kernel("exact.softmax_int16_out:softmax", when="exact.softmax_int16_out:int16_output"),
            Kernel("exact.softmax:softmax"),
        ),
        int16=Kernel("exact.softmax16:softmax", BY_DEFAULT),
    ),
    "SPACE_TO_BATCH_ND": Op("tensor.space_batch:space_to_batch_nd", int8=EXACT),
    "SPACE_TO_DEPTH": Op("nn.conv:space_to_depth", ranks=((4,), (4,)), int8=EXACT),
    "SPARSE_TO_DENSE": Op("tensor.scatter:sparse_to_dense", int8=EXACT),
    "SPLIT": Op("tensor.slicing:split", operands=rules.split, int8=EXACT),
    "SPLIT_V": Op("tensor.slicing:split_v", operands=rules.split_v, int8=EXACT),
    "SQRT": Op("arith.stored_integer:sqrt", stored_integers=ANY_INTEGER),
    "SQUARE": Op("arith.elementwise:square"),
    "SQUARED_DIFFERENCE": Op(
        "arith.elementwise:squared_difference", int8=Kernel("exact.entry:squared_difference")
    ),
    "SQUEEZE": Op("tensor.shape:squeeze", int8=EXACT, complex="signal.complex_ops:complex_reshape"),
    "STRIDED_SLICE": Op(
        "tensor.strided_slice:strided_slice", operands=rules.strided_slice, int8=EXACT
    ),
    "STABLEHLO_COMPOSITE": Op(
        "control.composite:stablehlo_composite", int8=EXACT
    ),  # copies bytes to and from its decomposition, whose ops rounded_once counts
    "SUB": Op(
        "arith.elementwise:sub",
        int8=Kernel("exact.entry:sub"),
        int16=(
            Kernel("exact.entry:sub_pot", when="exact.int16:pot_scaled"),
            Kernel("exact.entry:sub"),
        ),
    ),
    "SUM": Op(
        "arith.reduce:reduce_sum",
        operands=rules.reduction,
        int8=Kernel("exact.entry:reduce_sum"),
        int16=Kernel("exact.entry:reduce_sum"),
    ),
    "TANH": Op(
        "arith.elementwise:tanh",
        int8=Kernel("exact.unary:tanh", table=True),
        int16=Kernel("exact.sigmoid16:convert", BY_DEFAULT),
    ),
    "TILE": Op("tensor.slicing:tile", operands=rules.per_dimension(1), int8=EXACT),
    "TOPK_V2": Op("tensor.topk:topk_v2", int8=EXACT),
    "TRANSPOSE": Op(
        "tensor.concat_pad_transpose:transpose", operands=rules.per_dimension(1), int8=EXACT
    ),
    "TRANSPOSE_CONV": Op(
        "nn.conv:transpose_conv",
        ranks=((None, 4, 4), (4,)),
        activation=2,
        int8=Kernel("exact.entry:transpose_conv"),
        int16=Kernel(
            "exact.entry:transpose_conv_16x8",
            DEFAULT_WHERE,
            when="exact.tconv16:transpose_conv_bias",
        ),
    ),
    "VAR_HANDLE": Op("control.flow:var_handle"),
    "WHILE": Op("control.loop:while_"),
    "UNIQUE": Op("tensor.scatter:unique", int8=EXACT),
    "UNPACK": Op("tensor.slicing:unpack", int8=EXACT),
    "UNSORTED_SEGMENT_MAX": Op("tensor.scatter:unsorted_segment_max"),
    "UNSORTED_SEGMENT_MIN": Op("tensor.scatter:unsorted_segment_min"),
    "UNSORTED_SEGMENT_PROD": Op("tensor.scatter:unsorted_segment_prod"),
    "UNSORTED_SEGMENT_SUM": Op("tensor.scatter:unsorted_segment_sum"),
    "WHERE": Op("tensor.scatter:where"),
    "ZEROS_LIKE": Op("tensor.shape:zeros_like"),
}

OPERATORS.update(RECURRENT_OPERATORS)
OPERATORS.update(CUSTOM_OPERATORS)

# operator name (custom code for custom ops) -> its converter's reference, for the kinds that
# convert (``tflite2qonnx.ops.dispatch.converter`` imports one)
CONVERTERS: dict[str, str] = {
    name: op.convert for name, op in OPERATORS.items() if op.convert is not None
}
