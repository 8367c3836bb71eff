"""The integer UNIDIRECTIONAL_SEQUENCE_LSTM step (TFLite's 8x8_16 kernel), bit for bit.

TFLite's kernel (lstm.cc PopulateQuantizedLstmParams8x8_16, lstm_eval.cc
LstmStepInteger8x8_16) keeps int8 input and hidden state, int16 gates and cell state:

- each gate's input part, x @ W + bias, and its recurrent part, h @ R, are int32
  accumulators each rescaled to the Q3.12 gate grid by MultiplyByQuantizedMultiplier
  (``fixed_point.requantize``); their sum saturates at int16;
- gemmlowp's fixed-point logistic / tanh map Q3.12 to Q0.15, read from tables of their exact
  outputs (``ops.exact.gemmlowp_tables``); CIFG's input gate is 32767 - f;
- the cell state is a power-of-two grid 2^cs: f * c and i * g are RoundingDivideByPOT of the
  raw products, their sum saturates at int16 and is clipped at the quantized cell_clip;
- the hidden state o * tanh(c) (tanh with 15 + cs integer bits) is rescaled to intermediate
  4's int8 grid and copied as raw integers into the output state and the output.

The gate bias is added as raw int32 to the input part's accumulator, so its real value is
q * s_x * s_W whatever scale the bias tensor declares. The variants:

- peepholes: int16 weights times the raw cell state, MultiplyByQuantizedMultiplier by
  2^cs * s_w / s_gate, added with int16 saturation (the output gate's on the updated cell);
- layer normalization: the gate pre-activations sit on intermediates 0..3's grids instead of
  Q3.12, the gate bias is the norm's, and TFLite's integer ApplyLayerNorm
  (``ops.recurrent.lstm_int_norm``) brings each gate back to Q3.12;
- projection: the int8 hidden state (intermediate 4's grid) times the int8 weights plus the
  int32 bias, rescaled to the output state's grid, clipped at the quantized proj_clip.

The effective scales are TFLite's float32 products, then QuantizeMultiplier. Each int16 / int8
result keeps a Quant node on its grid (the identity there) so consumers read the widths.
Per-channel weights are refused (the kernel reads one scale per tensor).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from qonnx_ingest.errors import ConversionError
from tflite2qonnx.fixed_point import (
    EXACT_F32,
    f64,
    quantize_multiplier,
    requantize,
    rounding_divide_by_pot,
)
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import Operator
from tflite2qonnx.ops.exact import gemmlowp_tables
from tflite2qonnx.ops.recurrent.lstm_operands import Direction

GATE_SCALE = 2.0**-12  # Q3.12: the gate pre-activations without layer norm
ACT_SCALE = 2.0**-15  # Q0.15: sigmoid and tanh outputs
INT16 = {"bit_width": 16, "signed": True, "narrow": False}


class IntegerLstm:
    """The 8x8_16 kernel's arithmetic for ``ops.recurrent.lstm.run_sequence``."""

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
        self.n_cell, self.n_out = b.tensor(d.h_weights[1]).shape
        if d.peephole and self.n_out != self.n_cell:
            batch = int(np.prod(b.tensor(d.states[1]).shape)) // self.n_cell
            if batch != 1 or self.n_out > self.n_cell:
                raise ConversionError(
                    f"integer {op.name} with peepholes and a projection to {self.n_out} != "
                    f"{self.n_cell} cells is not supported for batch {batch}: the kernel runs "
                    "the peephole over n_output values of the flattened batch",
                    op.where,
                )
        # the gate pre-activations' grids: Q3.12, or with layer norm intermediates 0..3
        self.gate_scale = [
            float(b.tensor(op.intermediates[g]).quant.scale) if d.normalized else GATE_SCALE
            for g in range(4)
        ]

    def _check(self) -> None:
        b, op, d = self.b, self.op, self.d
        if op.options.get("fused_activation_function", "NONE") != "TANH":
            raise ConversionError(f"integer {op.name} needs the TANH activation", op.where)
        wanted_inter = range(5) if d.normalized else (4,)
        if len(op.intermediates) < 5 or any(
            b.tensor(op.intermediates[k]).quant is None for k in wanted_inter
        ):
            raise ConversionError(
                f"integer {op.name} needs its quantized intermediates (5)", op.where
            )
        x = b.tensor(op.inputs[0])
        if x.dtype != "int8":
            raise ConversionError(f"{x.dtype} {op.name} is not supported (int8 only)", op.where)
        wanted = [(d.states[0], "int8"), (d.states[1], "int16")]
        wanted += [(d.x_weights[g], "int8") for g in d.gates]
        wanted += [(d.h_weights[g], "int8") for g in d.gates]
        wanted += [(d.biases[g], "int32") for g in d.gates]
        constants = [*(d.x_weights[g] for g in d.gates), *(d.h_weights[g] for g in d.gates)]
        constants += [d.biases[g] for g in d.gates]
        if d.peephole:
            wanted += [(d.peepholes[k], "int16") for k in _peephole_slots(d)]
            constants += [d.peepholes[k] for k in _peephole_slots(d)]
        if d.normalized:
            wanted += [(d.layer_norm[g], "int16") for g in d.gates]
            constants += [d.layer_norm[g] for g in d.gates]
        if d.projection[0] >= 0:
            wanted.append((d.projection[0], "int8"))
            constants.append(d.projection[0])
            if d.projection[1] >= 0:
                wanted.append((d.projection[1], "int32"))
                constants.append(d.projection[1])
        for idx, dtype in wanted:
            t = b.tensor(idx)
            if t.quant is not None and t.quant.axis is not None:
                raise ConversionError(
                    f"integer {op.name} with per-channel quantized weights is not supported "
                    "(the 8x8_16 kernel reads one scale per tensor)",
                    f"{op.where}, tensor {idx} '{t.name}'",
                )
            if t.dtype != dtype or t.quant is None:
                raise ConversionError(
                    f"integer {op.name} needs a per-tensor {dtype} tensor, got {t.dtype}",
                    f"{op.where}, tensor {idx} '{t.name}'",
                )
        for idx in constants:
            t = b.tensor(idx)
            if t.data is None:  # the fixed-point rescales are built from the values
                raise ConversionError(
                    f"integer {op.name} needs constant weights and biases",
                    f"{op.where}, tensor {idx} '{t.name}'",
                )
            if t.dtype in ("int8", "int16") and float(t.quant.zero_point) != 0:
                raise ConversionError(
                    f"integer {op.name} needs symmetric weights", f"tensor '{t.name}'"
                )

    # ------------------------------------------------------------------ helpers
    def _quant(self, x: str, hint: str, scale, zero_point: float = 0.0, **bits) -> str:
        scale = np.asarray(scale, np.float32)
        return self.b.quant(x, hint, None, scale=scale, zero_point=zero_point, **bits)

    def _requantized(self, acc: str, real: np.ndarray, bound, s_out, hint: str, bits=32):
        """MultiplyByQuantizedMultiplier(acc, QuantizeMultiplier(real)) on the grid ``s_out``
        (one per output column); a Quant of ``bits`` states the width."""
        real = np.broadcast_to(np.asarray(real, np.float32), np.shape(bound))
        pairs = [quantize_multiplier(float(s)) for s in real.reshape(-1)]
        m0 = np.array([p[0] for p in pairs], np.int64)
        shift = np.array([p[1] for p in pairs], np.int64)
        s_out = np.asarray(s_out, np.float32)
        k = requantize(self.b, acc, m0, shift, bound, 1.0, self.op.where)
        y = self.b.emit("Mul", [k, self.b.const(s_out, "grid")])[0]
        return self._quant(y, hint, s_out, bit_width=bits, signed=True)

    def _columns(self, gates, weights, source_scale: float):
        """Per output column: |acc|'s bound, TFLite's float32 effective scale
        s_W * s_in / s_gate, the gate's grid and the weights' scale."""
        bounds, reals, grids, scales = [], [], [], []
        for g in gates:
            w = self.b.tensor(weights[g])
            n = w.shape[0]
            ws = np.float32(w.quant.scale)
            bounds.append(np.abs(np.asarray(w.data, np.float64)).sum(axis=1) * 256)
            real = ws * np.float32(source_scale) / np.float32(self.gate_scale[g])
            reals.append(np.full(n, real, np.float32))
            grids.append(np.full(n, self.gate_scale[g], np.float32))
            scales.append(np.full(n, ws, np.float32))
        return [np.concatenate(v) for v in (bounds, reals, grids, scales)]

    def _raw(self, x: str, scale: float) -> str:
        """The raw integers of ``x`` (on ``scale``) as float64."""
        b = self.b
        x = b.emit("Cast", [x], to=TensorProto.DOUBLE)[0]
        return b.emit("Round", [b.emit("Mul", [x, f64(b, 1 / scale, "raw_unit")])[0]])[0]

    # ------------------------------------------------------------------ gates
    def x_part(self, x: str, wx: str, gates: tuple[int, ...]) -> str:
        """MultiplyByQuantizedMultiplier(x @ W + bias) on each gate's grid, saturated at
        int16, for all steps at once (the bias is raw int32 on the accumulator; with layer
        norm it is the norm's, added there)."""
        b, d = self.b, self.d
        bound, real, grid, w_scales = self._columns(gates, d.x_weights, self.x_scale)
        zp = float(b.tensor(self.op.inputs[0]).quant.zero_point)
        n_in = b.tensor(d.x_weights[1]).shape[1]
        acc = self._integer_matmul(x, (self.x_scale, zp), wx, w_scales, n_in)
        if not d.normalized:
            raw = np.concatenate([np.asarray(b.tensor(d.biases[g]).data, np.float64)
                                  for g in gates])  # fmt: skip
            acc = b.emit("Add", [acc, f64(b, raw, "lstm_gate_bias")])[0]
            bound = bound + np.abs(raw)
        y = self._requantized(acc, real, bound, grid, "lstm_input_part")
        return self._quant(y, "lstm_input_part_saturated", grid, **INT16)

    def _integer_matmul(self, x: str, x_grid: tuple[float, float], w: str, w_scales, rows: int):
        """x @ w over the integers under two real values (``x`` on the grid (scale, zero
        point), ``w`` real weights with one scale per column) exactly, as float64: float32
        sums are exact below 2^24, else the weights are split as hi * 16 + lo."""
        b = self.b
        scale, zp = x_grid
        x_max = max(128 + zp, 127 - zp)
        x_int = b.emit("Round", [b.emit("Mul", [x, b.const(np.float32(1 / scale), "inv")])[0]])[0]
        w_int = b.emit("Div", [w, b.const(np.asarray(w_scales, np.float32), "w_scale")])[0]
        w_int = b.emit("Round", [w_int])[0]

        def product(weights: str) -> str:
            return b.emit("Cast", [b.emit("MatMul", [x_int, weights])[0]], to=TensorProto.DOUBLE)[0]

        if rows * 127 * x_max < EXACT_F32:
            return product(w_int)
        if rows * 8 * x_max >= EXACT_F32:
            raise ConversionError(
                f"integer {self.op.name} reduces over too many terms for exact sums", self.op.where
            )
        sixteen = b.const(np.float32(16), "w_split")
        hi = b.emit("Round", [b.emit("Div", [w_int, sixteen])[0]])[0]
        lo = b.emit("Sub", [w_int, b.emit("Mul", [hi, sixteen])[0]])[0]
        high = b.emit("Mul", [product(hi), f64(b, 16.0, "w_split")])[0]
        return b.emit("Add", [high, product(lo)])[0]

    def recurrent(self, h: str, wh: str) -> str:
        """h @ R over the integers (exact), rescaled to each gate's grid (int32: no
        saturation before the sum)."""
        d = self.d
        bound, real, grid, w_scales = self._columns(d.gates, d.h_weights, self.h_scale)
        acc = self._integer_matmul(h, (self.h_scale, self.h_zp), wh, w_scales, self.n_out)
        return self._requantized(acc, real, bound, grid, "lstm_recurrent_part")

    def gate_sum(self, x_part: str, h_part: str) -> str:
        total = self.b.emit("Add", [x_part, h_part])[0]
        grid = np.concatenate([np.full(self.n_cell, self.gate_scale[g]) for g in self.d.gates])
        return self._quant(total, "lstm_gate", grid, **INT16)

    def peephole(self, pre: str, weight: int, c: str, gate: int) -> str:
        """gate += MultiplyByQuantizedMultiplier(w * c) (VectorBatchVectorCwiseProduct-
        Accumulate), saturated at int16. The kernel runs it over n_output values per batch
        entry of the flattened arrays, which is the cell when n_output == n_cell, and the
        first n_output cells of a single batch entry otherwise."""
        b = self.b
        w = b.tensor(weight)
        q = np.zeros(self.n_cell, np.float64)
        q[: self.n_out] = np.asarray(w.data, np.float64)[: self.n_out]
        real = np.float32(
            2.0**self.cell_power * float(np.float32(w.quant.scale))
            / float(np.float32(self.gate_scale[gate]))
        )  # fmt: skip
        product = b.emit("Mul", [self._raw(c, self.c_scale), f64(b, q, "peephole_weights")])[0]
        term = self._requantized(product, real, np.abs(q) * 32768, self.gate_scale[gate],
                                 "lstm_peephole")  # fmt: skip
        total = b.emit("Add", [pre, term])[0]
        return self._quant(total, "lstm_gate_peephole", self.gate_scale[gate], **INT16)

    def layer_norm(self, pre: str, gate: int) -> str:
        """ApplyLayerNorm: the integer normalization (``ops.recurrent.lstm_int_norm``), then
        MultiplyByQuantizedMultiplier by the norm weights' scale (shift + 12) to Q3.12."""
        from tflite2qonnx.ops.recurrent.lstm_int_norm import layer_norm_integer

        b, d = self.b, self.d
        w = b.tensor(d.layer_norm[gate])
        scale = np.float32(w.quant.scale)
        guard = max(1, int(np.float32(10000) * scale))
        v = self._raw(pre, self.gate_scale[gate])
        bias = np.asarray(b.tensor(d.biases[gate]).data, np.float64)
        weights = np.asarray(w.data, np.float64)
        y = layer_norm_integer(b, v, self.n_cell, weights, bias, guard)
        m0, shift = quantize_multiplier(float(scale))
        # |v - mean| / sqrt(trunc(variance)) <= sqrt(2 n): the rescaled values (2^10 times
        # that) stay within this bound, with a factor 2 to spare
        rescaled = 2048 * (np.sqrt(2 * self.n_cell) + 1)
        bound = (rescaled * np.abs(weights) + np.abs(bias)) / 1024 + 1
        y = requantize(b, y, np.array(m0), np.array(shift + 12), bound.max(), GATE_SCALE,
                       self.op.where, out_bits=16)  # fmt: skip
        return self._quant(y, "lstm_layer_norm", GATE_SCALE, **INT16)

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

    # ------------------------------------------------------------------ cell and output
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
        if self.cell_clip > 0:  # 32767 (a clip past int16) still takes -32768 to -32767
            bound = self.cell_clip * self.c_scale
            lo = b.const(np.array(-bound, np.float32), "cell_clip_min")
            hi = b.const(np.array(bound, np.float32), "cell_clip_max")
            c = b.emit("Clip", [c, lo, hi])[0]
        return c

    def hidden(self, o: str, c: str) -> str:
        """o * tanh(c) on the hidden intermediate's int8 grid; without projection read as the
        output state's raw integers."""
        b = self.b
        tanh_c = self._table(c, self.c_scale, "tanh", 15 + self.cell_power)
        product = b.emit("Mul", [self._raw(o, ACT_SCALE), self._raw(tanh_c, ACT_SCALE)])[0]
        real = np.float32(ACT_SCALE / float(np.float32(self.hidden_scale)) * ACT_SCALE)
        m0, shift = quantize_multiplier(float(real))
        h = requantize(b, product, np.array(m0), np.array(shift), 2.0**30, self.hidden_scale,
                       self.op.where)  # fmt: skip
        h = self._quant(h, "lstm_hidden", self.hidden_scale, self.hidden_zp, bit_width=8)
        if self.d.projection[0] >= 0:
            return h
        return _reinterpret(b, h, (self.hidden_scale, self.hidden_zp), (self.h_scale, self.h_zp))

    def project(self, h: str) -> str:
        """The projection (MatrixBatchVectorMultiplyAccumulate to int8): the hidden integers
        minus their zero point times the int8 weights, plus the int32 bias, rescaled to the
        output state's grid; then the quantized proj_clip on the raw integers."""
        b, (w_idx, bias_idx) = self.b, self.d.projection
        w = b.tensor(w_idx)
        wq = np.asarray(w.data, np.float64)
        raw_bias = np.zeros(wq.shape[0])
        if bias_idx >= 0:
            raw_bias = np.asarray(b.tensor(bias_idx).data, np.float64)
        ws = np.float32(w.quant.scale)
        wp = b.input(w_idx, perm=(1, 0))
        grid = (self.hidden_scale, self.hidden_zp)
        acc = self._integer_matmul(h, grid, wp, np.full(wq.shape[0], ws), self.n_cell)
        acc = b.emit("Add", [acc, f64(b, raw_bias, "proj_bias")])[0]
        real = ws * np.float32(self.hidden_scale) / np.float32(self.h_scale)
        bound = np.abs(wq).sum(axis=1) * 256 + np.abs(raw_bias)
        pairs = quantize_multiplier(float(real))
        k = requantize(b, acc, np.array(pairs[0]), np.array(pairs[1]), bound.max(), self.h_scale,
                       self.op.where)  # fmt: skip
        out = self._quant(k, "lstm_projection", self.h_scale, self.h_zp, bit_width=8)
        clip = float(self.op.options.get("proj_clip", 0.0))
        if clip > 0:
            out_q = b.tensor(self.op.outputs[0]).quant
            limit = int(min(max(np.float32(clip) / np.float32(out_q.scale), -128.0), 127.0))
            if limit > 0:  # CwiseClipping on the raw integers, zero point included
                lo = b.const(np.float32((-limit - self.h_zp) * self.h_scale), "proj_clip_min")
                hi = b.const(np.float32((limit - self.h_zp) * self.h_scale), "proj_clip_max")
                out = b.emit("Clip", [out, lo, hi])[0]
        return out

    def output(self, y: str, out_idx: int) -> str:
        """The output holds the output state's raw integers."""
        q = self.b.tensor(out_idx).quant
        if q is None:
            raise ConversionError(f"integer {self.op.name} needs a quantized output", self.op.where)
        dst = (float(q.scale), float(q.zero_point))
        return _reinterpret(self.b, y, (self.h_scale, self.h_zp), dst)


def _peephole_slots(d: Direction) -> tuple[int, ...]:
    return (1, 2) if d.cifg else (0, 1, 2)


def _reinterpret(b: GraphBuilder, x: str, src: tuple[float, float], dst: tuple[float, float]):
    """Raw integers of grid ``src`` read on grid ``dst``: s_d * (x / s_s + zp_s - zp_d)."""
    if src == dst:
        return x
    y = b.emit("Mul", [x, b.const(np.array(dst[0] / src[0], np.float32), "regrid")])[0]
    if src[1] != dst[1]:
        shift = b.const(np.array(dst[0] * (src[1] - dst[1]), np.float32), "regrid_shift")
        y = b.emit("Add", [y, shift])[0]
    return y
