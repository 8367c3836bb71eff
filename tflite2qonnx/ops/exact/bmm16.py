"""--bit-exact int16 BATCH_MATMUL as reference_ops::BatchMatMul<int16_t, int64_t> computes it:
the int64 sum of ``q_lhs * q_rhs`` (zero points 0) requantized with the 64-bit
MultiplyByQuantizedMultiplier (multiplier rounded to 16 bits, one rounding), the multiplier
from the float32 product of the input scales over the output scale as for int8.

The products reach 2^30, so the MatMul runs in float64 (exact while the depth keeps the sum
below 2^53); the requantizing product with the 16-bit multiplier must stay below 2^53 too,
which bounds the depth at 255 for full-range operands (deeper is refused, by name).
"""

from __future__ import annotations

from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.fixed_point import (
    cast,
    conv_multipliers,
    grid,
    offsets,
    requantize_single_rounding,
)
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.exact.int8 import batch_matmul_operands


def batch_matmul(b: GraphBuilder, op: Operator) -> None:
    where = op.where
    grids = [grid(b, i, where) for i in op.inputs[:2]]
    g_out = grid(b, op.outputs[0], where)
    if any(b.tensor(i).dtype != "int16" for i in op.inputs[:2]):
        raise ConversionError("bit_exact: int16 BATCH_MATMUL needs two int16 operands", where)
    doubles = (cast(b, offsets(b, i, where), TensorProto.DOUBLE) for i in op.inputs[:2])
    operands, depth = batch_matmul_operands(b, op, doubles)
    bound = float(depth * grids[0].max_abs_offset * grids[1].max_abs_offset)
    if bound * 0x7FFF >= 2.0**53:
        raise ConversionError(
            f"bit_exact: int16 BATCH_MATMUL of depth {depth} is too deep for exact float64 "
            "requantization",
            where,
        )
    acc = b.emit("MatMul", operands)[0]
    m0, shift = conv_multipliers(grids[0].scale, [grids[1].scale], g_out.scale, True)
    b.set_output(op.outputs[0], requantize_single_rounding(b, acc, m0[0], shift[0], g_out.scale))
