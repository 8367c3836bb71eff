"""The integer UNIDIRECTIONAL_SEQUENCE_LSTM step (TFLite's 8x8_16 kernel), bit for bit.

TFLite's kernel (lstm.cc PopulateQuantizedLstmParams8x8_16, lstm_eval.cc
LstmStepInteger8x8_16) keeps int8 input and hidden state, int16 gates and cell state:

- each gate's input part, x @ W + bias, and its recurrent part, h @ R, are int32
  accumulators each rescaled to the Q3.12 gate grid by MultiplyByQuantizedMultiplier
  (``fixed_point.requantize``); their sum saturates at int16;
- gemmlowp's fixed-point logistic / tanh map Q3.12 to Q0.15, read from tables of their exact
  outputs (``ops.gemmlowp_tables``); CIFG's input gate is 32767 - f;
- the cell state is a power-of-two grid 2^cs: f * c and i * g are RoundingDivideByPOT of the
  raw products, their sum saturates at int16 and is clipped at the quantized cell_clip;
- the hidden state o * tanh(c) (tanh with 15 + cs integer bits) is rescaled to intermediate
  4's int8 grid and copied as raw integers into the output state and the output.

The gate bias is added as raw int32 to the input part's accumulator, so its real value is
q * s_x * s_W whatever scale the bias tensor declares. Each int16 / int8 result keeps a Quant
node on its grid (the identity there) so consumers read the widths. Variants not covered
here (peepholes, layer norm, projection, per-channel weights) are refused by name.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.fixed_point import f64, quantize_multiplier, requantize, rounding_divide_by_pot
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops import gemmlowp_tables
from tflite2qonnx.ops.lstm_operands import Direction

GATE_SCALE = 2.0**-12  # Q3.12: the gate pre-activations without layer norm
ACT_SCALE = 2.0**-15  # Q0.15: sigmoid and tanh outputs
INT16 = {"bit_width": 16, "signed": True, "narrow": False}


class IntegerLstm:
    """The 8x8_16 kernel's arithmetic for ``ops.lstm.run_sequence``."""

    def __init__(self, b: GraphBuilder, op: Operator, d: Direction):
        self.b, self.op, self.d = b, op, d
        self._check()
        x = b.tensor(op.inputs[0])
        self.x_scale = float(x.quant.scale)
        h_state = b.tensor(d.states[0])
        self.h_scale, self.h_zp = float(h_state.quant.scale), float(h_state.quant.zero_point)
        c_state = b.tensor(d.states[1])
        self.c_scale = float(c_state.quant.scale)
        cs = self.cell_power = int(round(np.log2(self.c_scale)))
        if 2.0**cs != self.c_scale or not -15 <= cs <= -9:
            raise ConversionError(
                f"cell state scale {self.c_scale} is not a power of two 2^-15..2^-9, which the "
                "integer kernel's tanh needs (Q0.15 to Q6.9)",
                op.where,
            )
        hidden = b.tensor(op.intermediates[4])
        self.hidden_scale = float(hidden.quant.scale)
        self.hidden_zp = float(hidden.quant.zero_point)
        clip = float(op.options.get("cell_clip", 0.0))
        # TFLite truncates cell_clip / scale to int16
        self.cell_clip = int(min(max(clip / self.c_scale, -32768.0), 32767.0))

    def _check(self) -> None:
        b, op, d = self.b, self.op, self.d
        unsupported = [
            ("peepholes", d.peephole),
            ("layer normalization", d.normalized),
            ("projection", d.projection[0] >= 0),
        ]
        for what, present in unsupported:
            if present:
                raise ConversionError(f"integer {op.name} with {what} is not supported", op.where)
        if op.options.get("fused_activation_function", "NONE") != "TANH":
            raise ConversionError(f"integer {op.name} needs the TANH activation", op.where)
        if len(op.intermediates) < 5 or b.tensor(op.intermediates[4]).quant is None:
            raise ConversionError(
                f"integer {op.name} needs its quantized hidden-state intermediate (5th)", op.where
            )
        x = b.tensor(op.inputs[0])
        if x.dtype != "int8":
            raise ConversionError(f"{x.dtype} {op.name} is not supported (int8 only)", op.where)
        wanted = [(d.states[0], "int8"), (d.states[1], "int16")]
        wanted += [(d.x_weights[g], "int8") for g in d.gates]
        wanted += [(d.h_weights[g], "int8") for g in d.gates]
        wanted += [(d.biases[g], "int32") for g in d.gates]
        for idx, dtype in wanted:
            t = b.tensor(idx)
            if t.dtype != dtype or t.quant is None or t.quant.axis is not None:
                raise ConversionError(
                    f"integer {op.name} needs a per-tensor {dtype} tensor, got {t.dtype}",
                    f"{op.where}, tensor {idx} '{t.name}'",
                )
        constants = [*(d.x_weights[g] for g in d.gates), *(d.h_weights[g] for g in d.gates)]
        for idx in (*constants, *(d.biases[g] for g in d.gates)):
            if b.tensor(idx).data is None:  # the fixed-point rescales are built from the values
                raise ConversionError(
                    f"integer {op.name} needs constant weights and biases",
                    f"{op.where}, tensor {idx} '{b.tensor(idx).name}'",
                )
        for idx in constants:
            if float(b.tensor(idx).quant.zero_point) != 0:
                raise ConversionError(
                    f"integer {op.name} needs symmetric weights", f"tensor '{b.tensor(idx).name}'"
                )

    def _quant(self, x: str, hint: str, scale: float, zero_point: float = 0.0, **bits) -> str:
        b = self.b
        return b.quant(x, hint, None, scale=np.float32(scale), zero_point=zero_point, **bits)

    def _accumulator(self, y: str, unit: np.ndarray) -> str:
        """The kernel's int32 accumulator (float64 integers) from its real value ``y``."""
        b = self.b
        acc = b.emit("Round", [b.emit("Mul", [y, b.const(1 / unit, "acc_unit")])[0]])[0]
        return b.emit("Cast", [acc], to=TensorProto.DOUBLE)[0]

    def _rescaled(self, acc: str, scales: np.ndarray, bound: np.ndarray, hint: str) -> str:
        """MultiplyByQuantizedMultiplier(acc, scales / 2^-12) on the Q3.12 grid."""
        pairs = [quantize_multiplier(float(s) / GATE_SCALE) for s in scales]
        m0 = np.array([p[0] for p in pairs], np.int64)
        shift = np.array([p[1] for p in pairs], np.int64)
        y = requantize(self.b, acc, m0, shift, bound, GATE_SCALE, self.op.where)
        return self._quant(y, hint, GATE_SCALE, bit_width=32, signed=True)

    def _unit(self, gates, weights, source_scale: float) -> tuple[np.ndarray, np.ndarray]:
        """Per output column: the accumulator's unit s_in * s_W, and |acc|'s bound."""
        units, bounds = [], []
        for g in gates:
            w = self.b.tensor(weights[g])
            n = w.shape[0]
            units.append(np.full(n, source_scale * float(w.quant.scale)))
            bounds.append(np.abs(np.asarray(w.data, np.float64)).sum(axis=1) * 256)
        return np.concatenate(units), np.concatenate(bounds)

    def x_part(self, x: str, wx: str, gates: tuple[int, ...]) -> str:
        """MultiplyByQuantizedMultiplier(x @ W + bias) on Q3.12, saturated at int16, for all
        steps at once (the bias is raw int32 on the accumulator's unit)."""
        b, d = self.b, self.d
        y = b.emit("MatMul", [x, wx])[0]
        unit, bound = self._unit(gates, d.x_weights, self.x_scale)
        raw = np.concatenate([np.asarray(b.tensor(d.biases[g]).data, np.float64) for g in gates])
        bias = b.const((raw * unit).astype(np.float32), "lstm_gate_bias")
        acc = self._accumulator(b.emit("Add", [y, bias])[0], unit.astype(np.float32))
        y = self._rescaled(acc, unit, bound + np.abs(raw), "lstm_input_part")
        return self._quant(y, "lstm_input_part_saturated", GATE_SCALE, **INT16)

    def h_part(self, h_part: str) -> str:
        """h @ R rescaled to Q3.12 (int32: no saturation before the sum)."""
        unit, bound = self._unit(self.d.gates, self.d.h_weights, self.h_scale)
        acc = self._accumulator(h_part, unit.astype(np.float32))
        return self._rescaled(acc, unit, bound, "lstm_recurrent_part")

    def gate_sum(self, x_part: str, h_part: str) -> str:
        total = self.b.emit("Add", [x_part, h_part])[0]
        return self._quant(total, "lstm_gate", GATE_SCALE, **INT16)

    def activation(self, pre: str, gate: int) -> str:
        return self._table(pre, GATE_SCALE, "tanh" if gate == 2 else "logistic", 3)

    def _table(self, x: str, scale: float, kind: str, integer_bits: int) -> str:
        """gemmlowp's fixed-point ``kind`` of ``x`` (int16 on ``scale``), read from a table of
        its outputs; the Quant on Q0.15 is the identity there and states the width."""
        b = self.b
        raw = b.emit("Round", [b.emit("Mul", [x, b.const(np.float32(1 / scale), "inv")])[0]])[0]
        index = b.emit("Cast", [raw], to=TensorProto.INT64)[0]
        index = b.emit("Add", [index, b.const(np.array(32768, np.int64), "offset")])[0]
        values = b.const(gemmlowp_tables.table(kind, integer_bits), f"gemmlowp_{kind}")
        y = b.emit("Gather", [values, index], axis=0, hint=f"lstm_{kind}")[0]
        return self._quant(y, f"lstm_{kind}_q", ACT_SCALE, **INT16)

    def one_minus(self, f: str) -> str:
        """CIFG's input gate: Sub1Vector, 32767 - f on Q0.15."""
        one = self.b.const(np.float32(32767 * ACT_SCALE), "q15_one")
        return self.b.emit("Sub", [one, f])[0]

    def _raw(self, x: str, scale: float) -> str:
        """The int16 raw integers of ``x`` (on ``scale``) as float64."""
        b = self.b
        x = b.emit("Cast", [x], to=TensorProto.DOUBLE)[0]
        return b.emit("Mul", [x, f64(b, 1 / scale, "raw_unit")])[0]

    def _cwise_mul(self, a: str, a_scale: float, c: str, c_scale: float, shift: int) -> str:
        """CwiseMul: RoundingDivideByPOT(a * c, shift) of the raw int16s (float64 raw)."""
        product = self.b.emit("Mul", [self._raw(a, a_scale), self._raw(c, c_scale)])[0]
        return rounding_divide_by_pot(self.b, product, shift)

    def cell(self, f: str, c: str, i: str, g: str) -> str:
        b, cs = self.b, self.cell_power
        kept = self._cwise_mul(f, ACT_SCALE, c, self.c_scale, 15)
        new = self._cwise_mul(i, ACT_SCALE, g, ACT_SCALE, 30 + cs)
        total = b.emit("Cast", [b.emit("Add", [kept, new])[0]], to=TensorProto.FLOAT)[0]
        total = b.emit("Mul", [total, b.const(np.float32(self.c_scale), "cell_scale")])[0]
        c = self._quant(total, "lstm_cell", self.c_scale, **INT16)
        if 0 < self.cell_clip < 32767:
            bound = self.cell_clip * self.c_scale
            lo = b.const(np.array(-bound, np.float32), "cell_clip_min")
            hi = b.const(np.array(bound, np.float32), "cell_clip_max")
            c = b.emit("Clip", [c, lo, hi])[0]
        return c

    def hidden(self, o: str, c: str) -> str:
        """o * tanh(c) on the hidden intermediate's int8 grid, read as the output state's."""
        b = self.b
        tanh_c = self._table(c, self.c_scale, "tanh", 15 + self.cell_power)
        product = b.emit("Mul", [self._raw(o, ACT_SCALE), self._raw(tanh_c, ACT_SCALE)])[0]
        m0, shift = quantize_multiplier(ACT_SCALE * ACT_SCALE / self.hidden_scale)
        h = requantize(b, product, np.array(m0), np.array(shift), 2.0**30, self.hidden_scale,
                       self.op.where)  # fmt: skip
        h = self._quant(h, "lstm_hidden", self.hidden_scale, self.hidden_zp, bit_width=8)
        return _reinterpret(b, h, (self.hidden_scale, self.hidden_zp), (self.h_scale, self.h_zp))

    def output(self, y: str, out_idx: int) -> str:
        """The output holds the output state's raw integers."""
        q = self.b.tensor(out_idx).quant
        if q is None:
            raise ConversionError(f"integer {self.op.name} needs a quantized output", self.op.where)
        dst = (float(q.scale), float(q.zero_point))
        return _reinterpret(self.b, y, (self.h_scale, self.h_zp), dst)


def _reinterpret(b: GraphBuilder, x: str, src: tuple[float, float], dst: tuple[float, float]):
    """Raw integers of grid ``src`` read on grid ``dst``: s_d * (x / s_s + zp_s - zp_d)."""
    if src == dst:
        return x
    y = b.emit("Mul", [x, b.const(np.array(dst[0] / src[0], np.float32), "regrid")])[0]
    if src[1] != dst[1]:
        shift = b.const(np.array(dst[0] * (src[1] - dst[1]), np.float32), "regrid_shift")
        y = b.emit("Add", [y, shift])[0]
    return y
