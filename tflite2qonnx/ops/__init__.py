"""The operator table: one record (``Op``) per TFLite builtin or MediaPipe custom code.

Adding an operator means writing one small converter ``f(builder, operator)`` and one row here;
the row also carries the operand ranks and rules the reader checks and how --bit-exact treats
the operator (``tflite2qonnx.ops.record``).
"""

from __future__ import annotations

from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops import operands as rules
from tflite2qonnx.ops.arith import elementwise as ew
from tflite2qonnx.ops.arith import misc_builtins as math_extra
from tflite2qonnx.ops.arith import reduce
from tflite2qonnx.ops.arith import stored_integer as raw16
from tflite2qonnx.ops.arith.elementwise import relu, relu6
from tflite2qonnx.ops.control import flow as cf
from tflite2qonnx.ops.control import loop
from tflite2qonnx.ops.detection.mediapipe import (
    convolution_2d_transpose_bias,
    max_pooling_with_argmax_2d,
    max_unpooling_2d,
)
from tflite2qonnx.ops.detection.mediapipe_transform import (
    landmarks_to_transform_matrix,
    transform_landmarks,
    transform_tensor_bilinear,
)
from tflite2qonnx.ops.detection.nms import non_max_suppression
from tflite2qonnx.ops.detection.postprocess import detection_postprocess
from tflite2qonnx.ops.exact.int16_interpolated import int16_table
from tflite2qonnx.ops.nn.conv import (
    conv_2d,
    conv_3d,
    depth_to_space,
    depthwise_conv_2d,
    local_response_normalization,
    space_to_depth,
    transpose_conv,
)
from tflite2qonnx.ops.nn.conv3d_transpose import conv_3d_transpose
from tflite2qonnx.ops.nn.fully_connected import batch_matmul, fully_connected
from tflite2qonnx.ops.nn.pool import average_pool_2d, max_pool_2d
from tflite2qonnx.ops.nn.quantize import dequantize, quantize
from tflite2qonnx.ops.nn.resize import resize_bilinear, resize_nearest_neighbor
from tflite2qonnx.ops.nn.softmax import log_softmax, softmax
from tflite2qonnx.ops.record import (
    DEQUANTIZES,
    EMULATED,
    EXACT,
    EXACT_ON_ONE_GRID,
    ROUNDED_ONCE,
    Converter,
    Op,
)
from tflite2qonnx.ops.recurrent.sequence import (
    bidirectional_sequence_lstm,
    unidirectional_sequence_lstm,
    unidirectional_sequence_rnn,
)
from tflite2qonnx.ops.recurrent.svdf import svdf
from tflite2qonnx.ops.tensor import scatter, shape, slicing, space_batch, update
from tflite2qonnx.ops.tensor.concat_pad_transpose import concatenation, pad, transpose
from tflite2qonnx.ops.tensor.densify import densify
from tflite2qonnx.ops.tensor.topk import topk_v2

# one LSTM direction's operand ranks: input and recurrent weights (2-D), peepholes and gate
# biases (1-D), projection weights and bias; the states and layer norms follow per kernel
_LSTM_DIRECTION = (2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 2, 1)

__all__ = ["CONVERTERS", "CUSTOM_OPERATORS", "OPERATORS", "Op", "rounded_once"]

# Builtin operators, by BuiltinOperator name
OPERATORS: dict[str, Op] = {
    "ABS": Op(ew.abs_, bit_exact=EMULATED),
    "ADD": Op(ew.add, bit_exact=EMULATED),
    "ADD_N": Op(ew.add_n, operands=rules.variadic),
    "ASSIGN_VARIABLE": Op(cf.assign_variable),
    "ARG_MAX": Op(reduce.arg_max, operands=rules.one_axis, bit_exact=EXACT),
    "ARG_MIN": Op(reduce.arg_min, operands=rules.one_axis, bit_exact=EXACT),
    "ATAN2": Op(math_extra.atan2),
    "AVERAGE_POOL_2D": Op(average_pool_2d, ranks=((4,), (4,)), bit_exact=EMULATED),
    "BATCH_MATMUL": Op(batch_matmul, bit_exact=EMULATED),
    "BATCH_TO_SPACE_ND": Op(space_batch.batch_to_space_nd, bit_exact=EXACT),
    "BIDIRECTIONAL_SEQUENCE_LSTM": Op(
        bidirectional_sequence_lstm, ranks=((3, *_LSTM_DIRECTION * 2, 2, 2, 2, 2, 3), (3, 3))
    ),
    "BITWISE_XOR": Op(math_extra.bitwise_xor),
    "BROADCAST_ARGS": Op(math_extra.broadcast_args),
    "BROADCAST_TO": Op(shape.broadcast_to, bit_exact=EXACT),
    "CALL_ONCE": Op(cf.call_once),
    "BUCKETIZE": Op(math_extra.bucketize),
    "CAST": Op(raw16.cast),
    "CEIL": Op(ew.ceil),
    "CONCATENATION": Op(concatenation, operands=rules.concatenation, bit_exact=EMULATED),
    "CONV_2D": Op(conv_2d, ranks=((4, 4), (4,)), operands=rules.conv_filter, bit_exact=EMULATED),
    "CONV_3D": Op(conv_3d, ranks=((5, 5), (5,)), operands=rules.conv_filter),
    "CONV_3D_TRANSPOSE": Op(conv_3d_transpose, ranks=((1, 5, 5), (5,))),
    "COS": Op(ew.cos),
    "CUMSUM": Op(reduce.cumsum, operands=rules.one_axis),
    "DENSIFY": Op(densify),
    "DEPTHWISE_CONV_2D": Op(
        depthwise_conv_2d, ranks=((4, 4), (4,)), operands=rules.conv_filter, bit_exact=EMULATED
    ),
    "DEPTH_TO_SPACE": Op(depth_to_space, ranks=((4,), (4,)), bit_exact=EXACT),
    "DEQUANTIZE": Op(dequantize, bit_exact=EXACT),
    "DIV": Op(ew.div, bit_exact=EMULATED),
    "DYNAMIC_UPDATE_SLICE": Op(update.dynamic_update_slice, bit_exact=EXACT),
    "ELU": Op(ew.elu, bit_exact=EMULATED),
    "EMBEDDING_LOOKUP": Op(update.embedding_lookup, ranks=((1, None), (None,)), bit_exact=EXACT),
    "EQUAL": Op(raw16.equal, bit_exact=EMULATED),
    "EXP": Op(int16_table(ew.exp), bit_exact=EMULATED),
    "EXPAND_DIMS": Op(shape.expand_dims, operands=rules.one_axis, bit_exact=EXACT),
    "FILL": Op(shape.fill),
    "FLOOR": Op(ew.floor),
    "FLOOR_DIV": Op(raw16.floor_div),
    "FLOOR_MOD": Op(raw16.floor_mod),
    "FULLY_CONNECTED": Op(fully_connected, bit_exact=EMULATED),
    "GATHER": Op(slicing.gather, bit_exact=EXACT),
    "GATHER_ND": Op(slicing.gather_nd, bit_exact=EXACT),
    "GELU": Op(int16_table(ew.gelu), bit_exact=EMULATED),
    "GREATER": Op(raw16.greater, bit_exact=EMULATED),
    "GREATER_EQUAL": Op(raw16.greater_equal, bit_exact=EMULATED),
    "IF": Op(cf.if_),
    "HARD_SWISH": Op(ew.hard_swish, bit_exact=EMULATED),
    "L2_NORMALIZATION": Op(reduce.l2_normalization, bit_exact=EMULATED),
    "L2_POOL_2D": Op(space_batch.l2_pool_2d, ranks=((4,), (4,))),
    "LEAKY_RELU": Op(ew.leaky_relu, bit_exact=EMULATED),
    "LESS": Op(raw16.less, bit_exact=EMULATED),
    "LESS_EQUAL": Op(raw16.less_equal, bit_exact=EMULATED),
    "LOCAL_RESPONSE_NORMALIZATION": Op(local_response_normalization, ranks=((4,), (4,))),
    "LOG": Op(int16_table(ew.log), bit_exact=EMULATED),
    "LOG_SOFTMAX": Op(log_softmax, bit_exact=EMULATED),
    "LOGICAL_AND": Op(ew.logical_and),
    "LOGICAL_NOT": Op(ew.logical_not),
    "LOGICAL_OR": Op(ew.logical_or),
    "LOGISTIC": Op(ew.logistic, bit_exact=EMULATED),
    "MATRIX_DIAG": Op(space_batch.matrix_diag, bit_exact=EXACT),
    "MATRIX_SET_DIAG": Op(space_batch.matrix_set_diag, bit_exact=EXACT),
    "MAXIMUM": Op(ew.maximum, bit_exact=EXACT),
    "MAX_POOL_2D": Op(max_pool_2d, ranks=((4,), (4,)), bit_exact=EXACT),
    "MEAN": Op(reduce.mean, operands=rules.reduction, bit_exact=EMULATED),
    "MINIMUM": Op(ew.minimum, bit_exact=EXACT),
    "MIRROR_PAD": Op(slicing.mirror_pad, operands=rules.pad, bit_exact=EXACT),
    "MUL": Op(ew.mul, bit_exact=EMULATED),
    "NEG": Op(raw16.neg, bit_exact=EMULATED),
    "NON_MAX_SUPPRESSION_V4": Op(non_max_suppression, ranks=((2, 1), (1,))),
    "NON_MAX_SUPPRESSION_V5": Op(non_max_suppression, ranks=((2, 1), (1, 1))),
    "NOT_EQUAL": Op(raw16.not_equal, bit_exact=EMULATED),
    "ONE_HOT": Op(scatter.one_hot, bit_exact=EXACT),
    "PACK": Op(slicing.pack, bit_exact=EXACT),
    "PAD": Op(pad, operands=rules.pad, bit_exact=EXACT),
    "PADV2": Op(pad, operands=rules.pad, bit_exact=EXACT),
    "POW": Op(ew.pow_),
    "PRELU": Op(ew.prelu, bit_exact=EMULATED),
    "QUANTIZE": Op(quantize, bit_exact=EMULATED),
    "RANGE": Op(math_extra.range_),
    "RANK": Op(math_extra.rank, bit_exact=EXACT),
    "REDUCE_ALL": Op(math_extra.reduce_all, operands=rules.reduction),
    "REDUCE_ANY": Op(math_extra.reduce_any, operands=rules.reduction),
    "REDUCE_MAX": Op(reduce.reduce_max, operands=rules.reduction, bit_exact=EXACT),
    "REDUCE_MIN": Op(reduce.reduce_min, operands=rules.reduction, bit_exact=EXACT),
    "REDUCE_PROD": Op(reduce.reduce_prod, operands=rules.reduction, bit_exact=EMULATED),
    "READ_VARIABLE": Op(cf.read_variable),
    "RELU": Op(relu, bit_exact=EMULATED),
    "RELU6": Op(relu6, bit_exact=EMULATED),
    "RELU_0_TO_1": Op(ew.relu_0_to_1, bit_exact=EMULATED),
    "RELU_N1_TO_1": Op(ew.relu_n1_to_1, bit_exact=EMULATED),
    "RESHAPE": Op(shape.reshape, bit_exact=EXACT),
    "RESIZE_BILINEAR": Op(
        resize_bilinear, ranks=((4,), (4,)), operands=rules.resize, bit_exact=EMULATED
    ),
    "RESIZE_NEAREST_NEIGHBOR": Op(
        resize_nearest_neighbor, ranks=((4,), (4,)), operands=rules.resize, bit_exact=EXACT
    ),
    "REVERSE_SEQUENCE": Op(space_batch.reverse_sequence, bit_exact=EXACT),
    "REVERSE_V2": Op(slicing.reverse_v2, bit_exact=EXACT),
    "RIGHT_SHIFT": Op(math_extra.right_shift),
    "ROUND": Op(ew.round_),
    "RSQRT": Op(int16_table(ew.rsqrt), bit_exact=EMULATED),
    "SCATTER_ND": Op(scatter.scatter_nd, bit_exact=EXACT),
    "SEGMENT_SUM": Op(scatter.segment_sum),
    "SELECT": Op(ew.select, bit_exact=EXACT),
    "SELECT_V2": Op(ew.select, bit_exact=EXACT),
    "SHAPE": Op(shape.shape, bit_exact=EXACT),
    "SIGN": Op(ew.sign),
    "SIN": Op(ew.sin),
    "SLICE": Op(slicing.slice_, operands=rules.per_dimension(1, 2), bit_exact=EXACT),
    "SOFTMAX": Op(softmax, bit_exact=EMULATED),
    "SPACE_TO_BATCH_ND": Op(space_batch.space_to_batch_nd, bit_exact=EXACT),
    "SPACE_TO_DEPTH": Op(space_to_depth, ranks=((4,), (4,)), bit_exact=EXACT),
    "SPARSE_TO_DENSE": Op(scatter.sparse_to_dense, bit_exact=EXACT),
    "SPLIT": Op(slicing.split, operands=rules.split, bit_exact=EXACT),
    "SPLIT_V": Op(slicing.split_v, operands=rules.split_v, bit_exact=EXACT),
    "SQRT": Op(raw16.sqrt),
    "SQUARE": Op(ew.square),
    "SQUARED_DIFFERENCE": Op(ew.squared_difference, bit_exact=EMULATED),
    "SQUEEZE": Op(shape.squeeze, bit_exact=EXACT),
    "STRIDED_SLICE": Op(slicing.strided_slice, operands=rules.strided_slice, bit_exact=EXACT),
    "SUB": Op(ew.sub, bit_exact=EMULATED),
    "SUM": Op(reduce.reduce_sum, operands=rules.reduction, bit_exact=EMULATED),
    "SVDF": Op(svdf, ranks=((2, 2, 2, 1, 2), (2,)), bit_exact=EMULATED),
    "TANH": Op(ew.tanh, bit_exact=EMULATED),
    "TILE": Op(slicing.tile, operands=rules.per_dimension(1), bit_exact=EXACT),
    "TOPK_V2": Op(topk_v2, bit_exact=EXACT),
    "TRANSPOSE": Op(transpose, operands=rules.per_dimension(1), bit_exact=EXACT),
    "TRANSPOSE_CONV": Op(transpose_conv, ranks=((None, 4, 4), (4,)), bit_exact=EMULATED),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": Op(
        unidirectional_sequence_lstm,
        ranks=((3, *_LSTM_DIRECTION, 2, 2, 1, 1, 1, 1), (3,)),
        bit_exact=EMULATED,
    ),
    "UNIDIRECTIONAL_SEQUENCE_RNN": Op(unidirectional_sequence_rnn, ranks=((3, 2, 2, 1, 2), (3,))),
    "VAR_HANDLE": Op(cf.var_handle),
    "WHILE": Op(loop.while_),
    "UNIQUE": Op(scatter.unique, bit_exact=EXACT),
    "UNPACK": Op(slicing.unpack, bit_exact=EXACT),
    "UNSORTED_SEGMENT_MAX": Op(scatter.unsorted_segment_max),
    "UNSORTED_SEGMENT_MIN": Op(scatter.unsorted_segment_min),
    "UNSORTED_SEGMENT_PROD": Op(scatter.unsorted_segment_prod),
    "UNSORTED_SEGMENT_SUM": Op(scatter.unsorted_segment_sum),
    "WHERE": Op(scatter.where),
    "ZEROS_LIKE": Op(shape.zeros_like),
}

# Custom ops (MediaPipe's, TFLite's detection post-processing), by custom code
CUSTOM_OPERATORS: dict[str, Op] = {
    "Convolution2DTransposeBias": Op(convolution_2d_transpose_bias),
    "Landmarks2TransformMatrix": Op(landmarks_to_transform_matrix),
    "MaxPoolingWithArgmax2D": Op(max_pooling_with_argmax_2d),
    "MaxUnpooling2D": Op(max_unpooling_2d),
    "TFLite_Detection_PostProcess": Op(detection_postprocess, bit_exact=DEQUANTIZES),
    "TransformLandmarks": Op(transform_landmarks),
    "TransformTensorBilinear": Op(transform_tensor_bilinear),
}
OPERATORS.update(CUSTOM_OPERATORS)

# operator name (custom code for custom ops) -> converter, for the kinds that convert
CONVERTERS: dict[str, Converter] = {
    name: op.convert for name, op in OPERATORS.items() if op.convert is not None
}


def unsupported_message(op: Operator) -> str:
    """The error for an operator without a converter; a custom op's lists the custom ops."""
    text = f"unsupported operator {op.name} (operator {op.index})"
    if op.opcode.builtin == "CUSTOM":
        text += f"; supported custom ops: {', '.join(sorted(CUSTOM_OPERATORS))}"
    return text


def rounded_once(b: GraphBuilder, operators: list[Operator]) -> list[str]:
    """Names of the integer operators --bit-exact leaves to the default single rounding."""
    names = []
    for op in operators:
        t = b.tensor(op.inputs[0]) if op.inputs and op.inputs[0] >= 0 else None
        if t is None or not t.integer_quantized:
            continue
        if op.name in raw16.STORED_INTEGER_KERNELS and (
            t.dtype == "int16" or op.name in raw16.INT8_STORED_INTEGER_KERNELS
        ):
            continue
        record = OPERATORS.get(op.name)
        treatment = ROUNDED_ONCE if record is None else record.bit_exact
        if treatment in (EMULATED, EXACT, DEQUANTIZES):
            continue
        out = b.tensor(op.outputs[0]).quantization if op.outputs else None
        same_grid = out is not None and (list(out.scale), list(out.zero_point)) == (
            list(t.quantization.scale),
            list(t.quantization.zero_point),
        )
        if treatment == EXACT_ON_ONE_GRID and same_grid:
            continue
        names.append(op.name)
    return names
