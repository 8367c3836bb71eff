"""Kernels that ignore the quantization: TFLite runs CAST on the stored integers of any quantized
tensor, NEG, FLOOR_DIV and FLOOR_MOD on int8 and
int16 tensors, and the comparisons on int16 ones, as plain integer kernels
(``reference_ops::Negate``, ``FloorDiv<T>``, ``FloorMod<T>``, ``Comparison<int16_t>``) on the
stored integers, whatever the scales say (int8 / uint8 comparisons rescale both operands first;
those keep ``ops.arith.elementwise``'s real-valued form). int8 / int16 SQRT is a float kernel on the
dequantized value whose result is truncated, not rounded, onto the output grid (``sqrt``).

Converting the real values instead was silently wrong on hand-built 16x8 models whose grids
differ: NEG up to 19282 steps (int8: 179, and off on one grid with a zero point, which the
kernel ignores too), FLOOR_DIV up to 32764 (int8: 148), FLOOR_MOD (int8) 61, LESS /
GREATER_EQUAL 16% of the booleans. The integers are recovered from the real values (``x / s +
zp``, rounded: exact for int16) and the result is written on the output's grid, so the output
Quant is the identity.
"""

from __future__ import annotations

import numpy as np

from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.arith import elementwise as ew
from tflite2qonnx.ops.treatment import is_integer_op

# which kinds run so on which input types: their records' ``stored_integers`` (ops/__init__)
_BITS = {"int8": 8, "int16": 16}
_INTEGERS = ("int8", "int16", "uint8")  # results wrap modulo 2^bits (-(-32768) is -32768)


def _per_tensor(b: GraphBuilder, idx: int, dtypes=("int16",)) -> bool:
    """Whether tensor ``idx`` exists and is a per-tensor quantized tensor of ``dtypes``."""
    if idx < 0:
        return False
    t = b.tensor(idx)
    q = t.quantization
    return (
        t.dtype in dtypes and t.integer_quantized and len(q.scale) == 1 and len(q.zero_point) == 1
    )


def is_raw_int16(b: GraphBuilder, op: Operator, n_inputs: int = 1) -> bool:
    """Whether ``op``'s first ``n_inputs`` are per-tensor quantized int16 tensors."""
    ins = op.inputs[:n_inputs]
    return len(ins) == n_inputs and all(_per_tensor(b, i) for i in ins)


def _stored(b: GraphBuilder, idx: int) -> str:
    """Tensor ``idx``'s stored integers as an integer-valued float32."""
    q = b.tensor(idx).quantization
    scale = b.const(np.array(float(np.float32(q.scale[0])), np.float32), "scale")
    x = b.emit("Round", [b.emit("Div", [b.input(idx), scale])[0]])[0]
    if int(q.zero_point[0]):
        zp = b.const(np.array(int(q.zero_point[0]), np.float32), "zero_point")
        x = b.emit("Add", [x, zp])[0]
    return x


def _wrapped(b: GraphBuilder, q: str, bits: int = 16) -> str:
    """``q`` (an integer-valued float32 within int32) wrapped into the signed range."""
    f, size, half = np.float32, 1 << bits, 1 << (bits - 1)
    shifted = b.emit("Add", [q, b.const(np.array(half, f), "half_range")])[0]
    m = b.emit("Mod", [shifted, b.const(np.array(size, f), "range")], fmod=1)[0]
    m = b.emit("Add", [m, b.const(np.array(size, f), "range")])[0]  # fmod keeps the sign
    m = b.emit("Mod", [m, b.const(np.array(size, f), "range")], fmod=1)[0]
    return b.emit("Sub", [m, b.const(np.array(half, f), "half_range")])[0]


def _on_output_grid(b: GraphBuilder, op: Operator, q: str) -> None:
    """Stored integers ``q`` as output 0's real values (the output Quant keeps them)."""
    out = b.tensor(op.outputs[0]).quantization
    zp = b.const(np.array(int(out.zero_point[0]), np.float32), "zero_point")
    scale = b.const(np.array(float(np.float32(out.scale[0])), np.float32), "scale")
    b.set_output(op.outputs[0], b.emit("Mul", [b.emit("Sub", [q, zp])[0], scale])[0])


def _negates_stored(b: GraphBuilder, op: Operator) -> bool:
    x, y = (op.inputs[0] if op.inputs else -1), (op.outputs[0] if op.outputs else -1)
    return _per_tensor(b, x, tuple(_BITS)) and _per_tensor(b, y, (b.tensor(x).dtype,))


def neg_rescales(b: GraphBuilder, op: Operator) -> bool:
    """Whether NEG runs the rescaling kernel (uint8, ``exact.compare.neg``), not ``neg``'s."""
    return not _negates_stored(b, op) and is_integer_op(b, op)


def compare_rescales(b: GraphBuilder, op: Operator) -> bool:
    """Whether a comparison rescales its operands (int8 / uint8, ``exact.compare.compare``)
    rather than comparing int16 stored integers."""
    return not is_raw_int16(b, op, 2) and is_integer_op(b, op)


def neg(b: GraphBuilder, op: Operator) -> None:
    """NEG: int8 / int16 ``-q`` of the stored integer (wrapping, zero points ignored), copied
    onto the output's grid."""
    if not _negates_stored(b, op):
        return ew.neg(b, op)
    t = b.tensor(op.inputs[0])
    q = b.emit("Neg", [_stored(b, op.inputs[0])])[0]
    _on_output_grid(b, op, _wrapped(b, q, _BITS[t.dtype]))


def _raw_binary(b: GraphBuilder, op: Operator) -> bool:
    """Whether ``op`` takes and gives per-tensor int8 or int16 tensors of one type."""
    ins = op.inputs[:2]
    if len(ins) != 2 or not op.outputs or not _per_tensor(b, ins[0], tuple(_BITS)):
        return False
    dtype = (b.tensor(ins[0]).dtype,)
    return _per_tensor(b, ins[1], dtype) and _per_tensor(b, op.outputs[0], dtype)


def cast(b: GraphBuilder, op: Operator) -> None:
    """CAST of a quantized int8 / int16 / uint8 tensor: ``static_cast`` of its stored integers
    (casting the real values was 99% wrong), wrapped into a narrower integer type; onto the
    output's grid if that is quantized too."""
    x, y = (op.inputs[0] if op.inputs else -1), (op.outputs[0] if op.outputs else -1)
    if y < 0 or not _per_tensor(b, x, _INTEGERS):
        return ew.cast(b, op)
    out = b.tensor(y)
    q = _stored(b, x)
    if out.dtype in _BITS:
        q = _wrapped(b, q, _BITS[out.dtype])
    elif out.dtype == "uint8":
        q = _wrapped(b, b.emit("Sub", [q, b.const(np.array(128, np.float32), "half")])[0], 8)
        q = b.emit("Add", [q, b.const(np.array(128, np.float32), "half")])[0]
    if out.quantization is not None:
        if not _per_tensor(b, y, (out.dtype,)):
            return ew.cast(b, op)
        return _on_output_grid(b, op, q)
    b.set_output(y, b.emit("Cast", [q], to=b.elem_type(y))[0])


def _floor_quotient(b: GraphBuilder, x: str, y: str) -> str:
    """floor(x / y) of integer-valued float32 |x|, |y| < 2^15: float32 division rounds the
    quotient correctly, so its floor is exact."""
    return b.emit("Floor", [b.emit("Div", [x, y])[0]])[0]


def floor_div(b: GraphBuilder, op: Operator) -> None:
    """FLOOR_DIV: ``floor(q1 / q2)`` of the stored integers (wrapping), on the output's grid.
    The kernel's cast of min / -1 is undefined: the interpreter wraps it on short tensors (as
    here) and saturates it where the cast is vectorized."""
    if not _raw_binary(b, op):
        return ew.floor_div(b, op)
    x, y = (_stored(b, i) for i in op.inputs[:2])
    bits = _BITS[b.tensor(op.inputs[0]).dtype]
    _on_output_grid(b, op, _wrapped(b, _floor_quotient(b, x, y), bits))


def floor_mod(b: GraphBuilder, op: Operator) -> None:
    """FLOOR_MOD: ``q1 - floor(q1 / q2) q2`` of the stored integers (the divisor's sign), on
    the output's grid; every step an exact float32 integer below 2^16."""
    if not _raw_binary(b, op):
        return ew.floor_mod(b, op)
    x, y = (_stored(b, i) for i in op.inputs[:2])
    q = b.emit("Mul", [_floor_quotient(b, x, y), y])[0]
    _on_output_grid(b, op, b.emit("Sub", [x, q])[0])


def _compare(onnx_op: str, negate: bool = False, fallback=None):
    def convert(b: GraphBuilder, op: Operator) -> None:
        if not is_raw_int16(b, op, 2):
            return fallback(b, op)
        y = b.emit(onnx_op, [_stored(b, i) for i in op.inputs[:2]])[0]
        b.set_output(op.outputs[0], b.emit("Not", [y])[0] if negate else y)

    convert.__doc__ = f"{onnx_op} of int16 stored integers; other types as ops.arith.elementwise."
    return convert


less = _compare("Less", fallback=ew.less)
less_equal = _compare("LessOrEqual", fallback=ew.less_equal)
greater = _compare("Greater", fallback=ew.greater)
greater_equal = _compare("GreaterOrEqual", fallback=ew.greater_equal)
equal = _compare("Equal", fallback=ew.equal)
not_equal = _compare("Equal", negate=True, fallback=ew.not_equal)


def sqrt(b: GraphBuilder, op: Operator) -> None:
    """SQRT: int8 / int16 ``trunc(sqrtf(x) / s_out) + zp_out`` in float32 (rounding instead
    was a step off on half the outputs; measured equal over every int8 input); the kernel
    fails on negative inputs, so trunc is floor."""
    x, y = (op.inputs[0] if op.inputs else -1), (op.outputs[0] if op.outputs else -1)
    if not (_per_tensor(b, x, tuple(_BITS)) and _per_tensor(b, y, (b.tensor(x).dtype,))):
        return ew.sqrt(b, op)
    out = b.tensor(y)
    if out.dtype == "int16" and int(out.quantization.zero_point[0]):
        return ew.sqrt(b, op)  # the 16x8 kernels take zero points 0 only
    top = (1 << (_BITS[out.dtype] - 1)) - 1
    zp = int(out.quantization.zero_point[0])
    scale = b.const(np.array(float(np.float32(out.quantization.scale[0])), np.float32), "scale")
    root = b.emit("Sqrt", [b.input(x)])[0]
    q = b.emit("Floor", [b.emit("Div", [root, scale])[0]])[0]
    if zp:
        q = b.emit("Add", [q, b.const(np.array(zp, np.float32), "zero_point")])[0]
    q = b.emit("Min", [q, b.const(np.array(top, np.float32), "int_max")])[0]
    _on_output_grid(b, op, q)
