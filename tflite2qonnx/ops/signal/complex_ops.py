"""TFLite's signal ops on complex64 tensors: RFFT2D, COMPLEX_ABS, REAL, IMAG, complex MUL and
the reshapes between them (TF's converter lowers ``tf.signal.rfft`` / ``stft`` to RESHAPE ->
RFFT2D -> RESHAPE; frames and windows are GATHER and MUL on floats, converted as usual).

ONNX runtimes have no complex tensors, so a complex64 tensor is a float tensor with a trailing
dimension of 2, [real, imag] (the layout of ONNX's DFT). Only the records with a ``complex``
field understand that form (CAST to and from complex64 too): any other operator reading a complex
tensor is refused by name (``ops.dispatch``), as is a complex graph input or output
(``element_types.refuse_complex_boundary``).

RFFT2D is a product with DFT matrices rather than ONNX's DFT (opset 17; the project emits 13):
TFLite's kernel transforms in double (Ooura's rdft2d) and rounds once to float32, so the
products and COMPLEX_ABS's hypot are computed in double and cast once, which reproduces the
interpreter's values (to the last bit but for rare ties).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.common import is_complex, reduce_axes, table_size
from tflite2qonnx.ops.tensor.shape import _dims, expand_axis, squeeze_axes

# the largest fft_length side written as a dense DFT matrix (TFLite's YAMNet uses 512)
_MAX_FFT = 1 << 14


def _describe(b: GraphBuilder, idx: int) -> str:
    return f"tensor {idx} '{b.tensor(idx).name}'"


def complex_input(b: GraphBuilder, idx: int) -> str:
    """Tensor ``idx`` (complex64) as [..., 2]: a constant is split here, once."""
    t = b.tensor(idx)
    if t.data is not None:
        value = np.asarray(t.data).astype(np.complex64)
        pairs = np.stack([value.real, value.imag], axis=-1).astype(np.float32)
        return b.const(pairs, f"{b.tensor_name(idx)}_pairs")
    return b.input(idx)


# ---------------------------------------------------------------------------------- RFFT2D
def dft(length: int, n_in: int, n_out: int, sign: float) -> tuple[np.ndarray, np.ndarray]:
    """cos and sign*sin of 2*pi*k*n/length as [n_in, n_out] (n: input sample, k: bin), in
    double; samples at or beyond ``length`` get zero rows (TFLite crops the input to the
    fft_length, and zero-pads a shorter one, which needs no row)."""
    n = np.arange(n_in)[:, None]
    k = np.arange(n_out)[None, :]
    turn = (n * k) % length
    angle = 2.0 * np.pi * turn / length
    cos, sin = np.cos(angle), np.sin(angle)
    # quarter turns exactly (sin(pi) is 1.2e-16, not 0): the imaginary parts TFLite's kernel
    # returns as exact zeros (DC and Nyquist bins) stay zeros
    quarter = (4 * turn) % length == 0
    q = (4 * turn // length)[quarter]
    cos[quarter], sin[quarter] = np.array([1, 0, -1, 0])[q], np.array([0, 1, 0, -1])[q]
    keep = (n < length).astype(np.float64)
    return cos * keep, sign * sin * keep


def rfft2d(b: GraphBuilder, op: Operator) -> None:
    """The real-input 2-D DFT over the last two axes: X[k0, k1] = sum x[m, n] e^(-2 pi i
    (k0 m / F0 + k1 n / F1)), F = fft_length (powers of two, as the kernel requires)."""
    x_idx, len_idx = op.inputs[0], op.inputs[1]
    shape = b.tensor(x_idx).shape_signature
    if len(shape) < 2:
        raise ConversionError(
            f"RFFT2D needs an input of rank 2 or more, got {list(shape)}", op.where
        )
    lengths = b.int_constant(len_idx, op.where).reshape(-1)
    if lengths.size != 2:
        raise ConversionError(f"fft_length must hold 2 values, got {lengths.tolist()}", op.where)
    f0, f1 = int(lengths[0]), int(lengths[1])
    for f in (f0, f1):
        if f < 1 or f & (f - 1) or f > _MAX_FFT:
            raise ConversionError(
                f"fft_length {[f0, f1]}: TFLite's RFFT2D takes powers of two (here at most "
                f"{_MAX_FFT})",
                op.where,
            )
    height, width = int(shape[-2]), int(shape[-1])
    if height < 1 or width < 1:
        raise ConversionError(
            f"RFFT2D needs static last two dims, got {list(shape)} ({_describe(b, x_idx)})",
            op.where,
        )
    table_size((width + height) * max(f0, f1), "RFFT2D's DFT matrices", op.where)
    x = b.emit("Cast", [b.input(x_idx)], to=TensorProto.DOUBLE)[0]
    cos_w, sin_w = dft(f1, width, f1 // 2 + 1, -1.0)  # e^(-i theta) = cos - i sin
    re = b.emit("MatMul", [x, b.const(cos_w, "rfft_cos")])[0]
    im = b.emit("MatMul", [x, b.const(sin_w, "rfft_sin")])[0]
    if (f0, height) != (1, 1):  # the complex DFT along the rows: (cos - i sin)(re + i im)
        cos_h, sin_h = (m.T.copy() for m in dft(f0, height, f0, 1.0))  # [F0, height]
        c, s = b.const(cos_h, "rfft_rows_cos"), b.const(sin_h, "rfft_rows_sin")
        re, im = (
            b.emit("Add", [b.emit("MatMul", [c, re])[0], b.emit("MatMul", [s, im])[0]])[0],
            b.emit("Sub", [b.emit("MatMul", [c, im])[0], b.emit("MatMul", [s, re])[0]])[0],
        )
    b.set_output(op.outputs[0], _pairs(b, re, im, TensorProto.DOUBLE))


def _pairs(b: GraphBuilder, re: str, im: str, elem: int = TensorProto.FLOAT) -> str:
    """[re, im] stacked on a new last axis, as float32."""
    axes = b.const(np.array([-1], np.int64), "last_axis")
    parts = [b.emit("Unsqueeze", [v, axes])[0] for v in (re, im)]
    y = b.emit("Concat", parts, axis=-1)[0]
    return y if elem == TensorProto.FLOAT else b.emit("Cast", [y], to=TensorProto.FLOAT)[0]


def _part(b: GraphBuilder, z: str, k: int) -> str:
    """The real (0) or imaginary (1) part of a [..., 2] value."""
    return b.emit("Gather", [z, b.const(np.array(k, np.int64), "part")], axis=-1)[0]


# ------------------------------------------------------------------ elementwise on complex
def complex_abs(b: GraphBuilder, op: Operator) -> None:
    """|z| = hypot(re, im): squared and summed in double, so float32's rounding happens
    once, as in the kernel's std::abs."""
    z = b.emit("Cast", [complex_input(b, op.inputs[0])], to=TensorProto.DOUBLE)[0]
    squares = b.emit("Mul", [z, z])[0]
    total = reduce_axes(b, "ReduceSum", squares, [-1], keepdims=0)
    y = b.emit("Sqrt", [total])[0]
    b.set_output(op.outputs[0], b.emit("Cast", [y], to=TensorProto.FLOAT)[0])


def real(b: GraphBuilder, op: Operator) -> None:
    b.set_output(op.outputs[0], _part(b, complex_input(b, op.inputs[0]), 0))


def imag(b: GraphBuilder, op: Operator) -> None:
    b.set_output(op.outputs[0], _part(b, complex_input(b, op.inputs[0]), 1))


def complex_mul(b: GraphBuilder, op: Operator) -> None:
    """(a + ib)(c + id) = (ac - bd) + i(ad + bc), in float as the kernel's std::complex<float>;
    both operands are complex (TFLite's MUL takes one type), broadcasting as numpy."""
    if op.options.get("fused_activation_function", "NONE") != "NONE":
        raise ConversionError("a fused activation on a complex MUL is not supported", op.where)
    for idx in (op.inputs[0], op.inputs[1]):
        if not is_complex(b, idx):
            raise ConversionError(
                f"MUL mixes complex64 with {b.tensor(idx).dtype} {_describe(b, idx)}", op.where
            )
    u, v = complex_input(b, op.inputs[0]), complex_input(b, op.inputs[1])
    a, bi, c, d = _part(b, u, 0), _part(b, u, 1), _part(b, v, 0), _part(b, v, 1)

    def mul(p: str, q: str) -> str:
        return b.emit("Mul", [p, q])[0]

    re = b.emit("Sub", [mul(a, c), mul(bi, d)])[0]
    im = b.emit("Add", [mul(a, d), mul(bi, c)])[0]
    b.set_output(op.outputs[0], _pairs(b, re, im))


def complex_cast(b: GraphBuilder, op: Operator) -> None:
    """CAST from complex64 keeps the real part (the kernel's ``std::real``, then
    ``static_cast``); CAST to complex64 pairs the value with a zero imaginary part."""
    x, y = op.inputs[0], op.outputs[0]
    for idx in (x, y):
        if b.tensor(idx).quant is not None:
            raise ConversionError(
                f"CAST between complex64 and quantized {_describe(b, idx)}", op.where
            )
    if is_complex(b, x) and is_complex(b, y):
        return b.alias(y, complex_input(b, x))
    if is_complex(b, x):
        value = _part(b, complex_input(b, x), 0)
        return b.set_output(y, b.emit("Cast", [value], to=b.elem_type(y))[0])
    re = b.emit("Cast", [b.input(x)], to=TensorProto.FLOAT)[0]
    zeros = b.emit("ConstantOfShape", [b.emit("Shape", [re])[0]])[0]  # float 0 by default
    b.set_output(y, _pairs(b, re, zeros))


def complex_reshape(b: GraphBuilder, op: Operator) -> None:
    """RESHAPE, SQUEEZE and EXPAND_DIMS of a complex tensor: the output's shape (its
    signature, or RESHAPE's computed new_shape where several dims are dynamic) and the pair."""
    target = list(b.tensor(op.outputs[0]).shape_signature)
    two = b.const(np.array([2], np.int64), "pair")
    if target.count(-1) <= 1:
        shape = b.const(np.array([*target, 2], np.int64), "reshape_shape")
    elif op.opcode.builtin == "RESHAPE" and len(op.inputs) > 1 and op.inputs[1] >= 0:
        shape = b.emit("Concat", [_dims(b, op.inputs[1]), two], axis=0)[0]
    elif op.opcode.builtin in ("SQUEEZE", "EXPAND_DIMS"):  # the pair stays last
        kind, axes = (
            ("Squeeze", squeeze_axes(b, op))
            if op.opcode.builtin == "SQUEEZE"
            else ("Unsqueeze", [expand_axis(b, op)])
        )
        axes = b.const(np.asarray(axes, np.int64), "axes")
        b.set_output(op.outputs[0], b.emit(kind, [complex_input(b, op.inputs[0]), axes])[0])
        return
    else:
        raise ConversionError(
            f"{op.name} of complex64 {_describe(b, op.inputs[0])} to a shape with several "
            f"dynamic dims {target}",
            op.where,
        )
    b.set_output(op.outputs[0], b.emit("Reshape", [complex_input(b, op.inputs[0]), shape])[0])
