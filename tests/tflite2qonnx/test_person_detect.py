"""TFLM person_detect against a numpy reference of TFLite's int8 kernels.

The file quantizes its rank-1 depthwise biases with quantized_dimension 3, which ai-edge-litert
refuses to load, so the interpreter cannot be the reference here. Instead the integer kernels
are written out by hand from TFLite's reference_integer_ops: an exact int64 accumulation of
(x_q - zp_in) * w_q + bias_q, then requantization by M[c] = s_in * s_w[c] / s_out, + zp_out,
clamped to the fused activation's range. Requantization comes in two flavours: TFLite's
fixed-point MultiplyByQuantizedMultiplier (gemmlowp, two roundings) and the same product in
float64 rounded once, half away from zero.
"""

import json

import numpy as np
import onnx
import pytest
import tflite
from litert_compare import valid_window_sums
from onnx import numpy_helper

import tflite2qonnx
from qonnx_ingest.errors import ConversionWarning
from qonnx_ingest.execute import execute_qonnx
from support import CORPUS, requires_corpus
from tflite2qonnx.api import convert_subgraph, slice_subgraph
from tflite2qonnx.reader import read_model

PATH = CORPUS / "tflite" / "tflm__person_detect.tflite"
INT8_MIN, INT8_MAX = -128, 127

pytestmark = [
    requires_corpus,
    pytest.mark.skipif(not PATH.exists(), reason=f"{PATH.name} not in the corpus"),
]


# ----------------------------------------------------------------------------- requantization


def quantize_multiplier(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TFLite's QuantizeMultiplier: m = q * 2**(shift - 31), q a Q31 mantissa in [2**30, 2**31)."""
    mantissa, shift = np.frexp(m)
    q = np.round(mantissa * 2.0**31).astype(np.int64)  # positive: round == half away from zero
    carry = q == 2**31
    q, shift = np.where(carry, q // 2, q), np.where(carry, shift + 1, shift)
    tiny = shift < -31
    return np.where(tiny, 0, q), np.where(tiny, 0, shift).astype(np.int64)


def _truncating_div(a: np.ndarray, d: int) -> np.ndarray:
    """C integer division (rounds toward zero)."""
    return np.where(a >= 0, a // d, -((-a) // d))


def requantize_fixed_point(acc: np.ndarray, m: np.ndarray) -> np.ndarray:
    """MultiplyByQuantizedMultiplier: SaturatingRoundingDoublingHighMul, RoundingDivideByPOT."""
    q, shift = quantize_multiplier(m)
    x = acc * (np.int64(1) << np.maximum(shift, 0))
    ab = x * q
    high = _truncating_div(ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30)), 1 << 31)
    exponent = np.maximum(-shift, 0)
    mask = (np.int64(1) << exponent) - 1
    threshold = (mask >> 1) + (high < 0)
    return (high >> exponent) + ((high & mask) > threshold)


def requantize_exact(acc: np.ndarray, m: np.ndarray) -> np.ndarray:
    """The same product in float64, rounded once, half away from zero."""
    v = acc * np.asarray(m, np.float64)
    return (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int64)


# ----------------------------------------------------------------------------- kernels


def _same_padding(size: int, k: int, stride: int) -> tuple[int, int, int]:
    out = -(-size // stride)
    total = max((out - 1) * stride + k - size, 0)
    return out, total // 2, total - total // 2


def _activation_range(op, scale: np.float32, zero_point: int) -> tuple[int, int]:
    """CalculateActivationRangeQuantized: zp + round(bound / scale), within int8."""
    kind = op.options.get("fused_activation_function", "NONE")
    lo, hi = INT8_MIN, INT8_MAX
    if kind in ("RELU", "RELU6"):
        lo = max(lo, zero_point + int(np.round(np.float32(0.0) / scale)))
    if kind == "RELU6":
        hi = min(hi, zero_point + int(np.round(np.float32(6.0) / scale)))
    assert kind in ("NONE", "RELU", "RELU6"), kind
    return lo, hi


def conv_accumulator(sg, op, xq: np.ndarray) -> np.ndarray:
    """int64 sum((x_q - zp_in) * w_q) + bias_q of CONV_2D / DEPTHWISE_CONV_2D, SAME padding."""
    t = sg.tensors
    x_t, w_t, b_t = (t[i] for i in op.inputs[:3])
    o = op.options
    assert o["padding"] == "SAME" and o.get("dilation_h_factor", 1) == 1
    sh, sw = o["stride_h"], o["stride_w"]
    w = w_t.data.astype(np.int64)
    _, kh, kw, _ = w.shape
    n, h, wd, c = xq.shape
    oh, top, bottom = _same_padding(h, kh, sh)
    ow, left, right = _same_padding(wd, kw, sw)
    # padded cells are real zeros, i.e. x_q == zp_in
    xs = np.pad(
        xq.astype(np.int64) - int(x_t.quantization.zero_point[0]),
        ((0, 0), (top, bottom), (left, right), (0, 0)),
    )
    depthwise = op.name == "DEPTHWISE_CONV_2D"
    c_out = w.shape[3] if depthwise else w.shape[0]
    acc = np.zeros((n, oh, ow, c_out), np.int64)
    for i in range(kh):
        for j in range(kw):
            patch = xs[:, i : i + sh * oh : sh, j : j + sw * ow : sw, :]
            if depthwise:  # output channel k reads input channel k // depth_multiplier
                acc += np.repeat(patch, c_out // c, axis=3) * w[0, i, j, :]
            else:
                acc += np.einsum("nhwc,oc->nhwo", patch, w[:, i, j, :])
    return acc + b_t.data.astype(np.int64)


def conv_multiplier(sg, op) -> np.ndarray:
    """Per output channel s_in * s_w[c] / s_out, in double from the file's float32 scales."""
    x_t, w_t = sg.tensors[op.inputs[0]], sg.tensors[op.inputs[1]]
    y_t = sg.tensors[op.outputs[0]]
    s_in = np.float64(x_t.quantization.scale[0])
    s_out = np.float64(y_t.quantization.scale[0])
    return s_in * w_t.quantization.scale.astype(np.float64) / s_out


def conv_reference(sg, op, xq: np.ndarray, requantize) -> np.ndarray:
    y_t = sg.tensors[op.outputs[0]]
    zp_out = int(y_t.quantization.zero_point[0])
    y = requantize(conv_accumulator(sg, op, xq), conv_multiplier(sg, op)) + zp_out
    return np.clip(y, *_activation_range(op, y_t.quantization.scale[0], zp_out))


def average_pool_reference(sg, op, xq: np.ndarray) -> np.ndarray:
    """reference_integer_ops::AveragePool, VALID: sum / count rounded half away from zero."""
    acc = valid_window_sums(xq, op.options)
    count = op.options["filter_height"] * op.options["filter_width"]
    acc = np.where(acc > 0, acc + count // 2, acc - count // 2)
    y_t = sg.tensors[op.outputs[0]]
    lo, hi = _activation_range(op, y_t.quantization.scale[0], int(y_t.quantization.zero_point[0]))
    return np.clip(_truncating_div(acc, count), lo, hi)


def softmax_reference(sg, op, xq: np.ndarray) -> np.ndarray:
    """float64 softmax of the dequantized logits, quantized half away from zero."""
    x_t, y_t = sg.tensors[op.inputs[0]], sg.tensors[op.outputs[0]]
    x = np.float64(x_t.quantization.scale[0]) * (xq - int(x_t.quantization.zero_point[0]))
    x = x * op.options.get("beta", 1.0)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    v = p / np.float64(y_t.quantization.scale[0])
    y = np.floor(v + 0.5) + int(y_t.quantization.zero_point[0])
    return np.clip(y, INT8_MIN, INT8_MAX).astype(np.int64)


def run_reference(sg, n_ops: int, xq: np.ndarray, requantize=requantize_exact) -> np.ndarray:
    """int8 output of operators 0 .. n_ops - 1 of the (sequential) network on input ``xq``."""
    y = xq
    for op in sg.operators[:n_ops]:
        assert sg.tensors[op.inputs[0]].dtype == "int8"
        if op.name in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            y = conv_reference(sg, op, y, requantize)
        elif op.name == "AVERAGE_POOL_2D":
            y = average_pool_reference(sg, op, y)
        elif op.name == "RESHAPE":
            y = y.reshape(sg.tensors[op.outputs[0]].shape)
        elif op.name == "SOFTMAX":
            y = softmax_reference(sg, op, y)
        else:
            raise AssertionError(f"no reference for {op.name}")
    return y


# ----------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def subgraph():
    return read_model(PATH).subgraphs[0]


@pytest.fixture(scope="module")
def converted():
    """The whole model, converted as the CLI does (NCHW input, layout metadata)."""
    return tflite2qonnx.convert(PATH)


def random_int8(shape, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(INT8_MIN, INT8_MAX + 1, shape).astype(np.int8)


def dequantized(tensor, q: np.ndarray) -> np.ndarray:
    scale, zero_point = tensor.quantization.scale[0], tensor.quantization.zero_point[0]
    return (np.float64(scale) * (q.astype(np.float64) - zero_point)).astype(np.float32)


def on_grid(tensor, y: np.ndarray) -> np.ndarray:
    """Our float output as integers on ``tensor``'s grid."""
    scale, zero_point = tensor.quantization.scale[0], tensor.quantization.zero_point[0]
    return np.round(y.astype(np.float64) / np.float64(scale)) + zero_point


def run_slice(sg, operators, xq: np.ndarray) -> np.ndarray:
    """Convert ``operators`` (NHWC I/O kept), run them on ``xq``, return the int8 grid output."""
    sliced = slice_subgraph(sg, operators)
    model = convert_subgraph(sliced, keep_io_layout=True)
    (in_t,), (out_t,) = sliced.inputs, sliced.outputs
    feed = dequantized(sg.tensors[in_t], xq)
    (y,) = execute_qonnx(model, {model.graph.input[0].name: feed}).values()
    return on_grid(sg.tensors[out_t], y)


def raw_per_axis_quantization(path) -> dict[int, tuple[int, np.ndarray]]:
    """tensor index -> (quantized_dimension, scales) as stored in the file, for per-axis tensors.

    Read with the flatbuffer bindings directly, not through our reader.
    """
    sg = tflite.Model.GetRootAsModel(path.read_bytes(), 0).Subgraphs(0)
    out = {}
    for i in range(sg.TensorsLength()):
        q = sg.Tensors(i).Quantization()
        if q is not None and q.ScaleLength() > 1:
            out[i] = (int(q.QuantizedDimension()), q.ScaleAsNumpy())
    return out


def out_of_range_axes(subgraph) -> dict[int, np.ndarray]:
    """tensor index -> file scales, for per-axis tensors whose axis is not one of theirs."""
    return {
        i: scales
        for i, (axis, scales) in raw_per_axis_quantization(PATH).items()
        if axis >= len(subgraph.tensors[i].shape)
    }


# ----------------------------------------------------------------------------- tests

FIRST_LAYERS = 6  # depthwise x8, depthwise, conv 1x1, depthwise /2, conv 1x1, depthwise


def test_first_layers_match_the_integer_reference(subgraph):
    """Six chained convs (per-channel weights and biases) on the same int8 input as TFLite's
    fixed point (MultiplyByQuantizedMultiplier, which the default form rounds twice as it
    does): >= 99.9 % of outputs equal, none more than one step off."""
    names = [op.name for op in subgraph.operators[:FIRST_LAYERS]]
    assert names[:3] == ["DEPTHWISE_CONV_2D", "DEPTHWISE_CONV_2D", "CONV_2D"]
    for seed in (0, 1):
        xq = random_int8(subgraph.tensors[subgraph.inputs[0]].shape, seed)
        ours = run_slice(subgraph, range(FIRST_LAYERS), xq)
        ref = run_reference(subgraph, FIRST_LAYERS, xq, requantize_fixed_point)
        assert ours.shape == ref.shape == (1, 24, 24, 32)
        assert len(np.unique(ref)) > 50  # not a saturated, trivially matching output
        steps = np.abs(ours - ref)
        assert steps.max() <= 1
        assert np.mean(steps == 0) >= 0.999


@pytest.mark.parametrize("k", range(FIRST_LAYERS))
def test_each_layer_departs_from_tflite_fixed_point_only_by_its_double_rounding(subgraph, k):
    """Against TFLite's own fixed point: at most one step off, and only where it rounds twice.

    MultiplyByQuantizedMultiplier rounds the high product, then the shift; a single rounding
    (ours) can differ from that by one step near a half. Each operator is fed the fixed-point
    reference's own input for it, so differences do not compound. Wherever we differ, the
    exact product lies within 2**-right_shift of a half, where the first rounding can land.
    """
    op = subgraph.operators[k]
    shape = subgraph.tensors[subgraph.inputs[0]].shape
    xq = run_reference(subgraph, k, random_int8(shape, 7), requantize_fixed_point)
    ours = run_slice(subgraph, [k], xq.astype(np.int8))
    fixed = conv_reference(subgraph, op, xq, requantize_fixed_point)
    steps = np.abs(ours - fixed)
    assert steps.max() <= 1
    assert np.mean(steps == 0) >= 0.995

    acc = conv_accumulator(subgraph, op, xq)
    m = conv_multiplier(subgraph, op)
    _, shift = quantize_multiplier(m)
    window = np.broadcast_to(2.0 ** np.minimum(shift, 0).astype(np.float64), acc.shape)
    distance_to_half = np.abs(np.abs(acc * m) % 1.0 - 0.5)
    assert np.all(distance_to_half[steps > 0] <= window[steps > 0])


def test_whole_model_outputs_a_probability_vector_close_to_the_reference(subgraph, converted):
    """All 31 operators (convs, average pool, logits, reshape, softmax) end to end."""
    model = converted
    in_t, out_t = subgraph.tensors[subgraph.inputs[0]], subgraph.tensors[subgraph.outputs[0]]
    layout = json.loads({p.key: p.value for p in model.metadata_props}.get("layout", "{}"))
    in_name = model.graph.input[0].name
    for seed in (0, 1, 2):
        xq = random_int8(in_t.shape, seed)
        feed = dequantized(in_t, xq)
        if in_name in layout:
            feed = np.ascontiguousarray(feed.transpose(layout[in_name]["perm"]))
        (y,) = execute_qonnx(model, {in_name: feed}).values()
        assert y.shape == (1, 2)
        assert np.all(y >= 0) and np.all(y <= 1)
        # two values on a 1/256 grid, each rounded: their sum is 1 within two steps
        assert abs(float(y.sum()) - 1.0) <= 2 * out_t.quantization.scale[0] + 1e-6
        ref = run_reference(subgraph, len(subgraph.operators), xq)
        assert np.abs(on_grid(out_t, y) - ref).max() <= 1


def test_out_of_range_bias_axis_is_read_as_the_single_axis(subgraph):
    """quantized_dimension 3 on a rank-1 bias can only mean axis 0: one scale per channel."""
    odd = out_of_range_axes(subgraph)
    assert odd, "the corpus file no longer has out-of-range bias axes"
    depthwise_biases = {op.inputs[2] for op in subgraph.operators if op.name == "DEPTHWISE_CONV_2D"}
    assert set(odd) == depthwise_biases
    for i, scales in odd.items():
        q = subgraph.tensors[i].quantization
        assert q.per_axis and q.quantized_dimension == 0
        assert subgraph.tensors[i].shape == (len(scales),)
        np.testing.assert_array_equal(q.scale, scales)


def test_out_of_range_bias_axis_is_reported_once_with_a_warning():
    with pytest.warns(ConversionWarning, match=r"14 rank-1 per-channel tensors .* axis 0"):
        read_model(PATH)


def test_bias_quant_nodes_carry_one_scale_per_channel(subgraph, converted):
    """Each out-of-range-axis bias gets a 32-bit Quant with the file's scale per channel."""
    model = converted
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    bias_inputs = {n.input[2] for n in model.graph.node if n.op_type == "Conv" and len(n.input) > 2}
    bias_quants = [
        n for n in model.graph.node if n.op_type == "Quant" and n.output[0] in bias_inputs
    ]
    odd = out_of_range_axes(subgraph)
    for i, file_scales in odd.items():
        # the bias Quant whose scales are this tensor's (each layer's scales are distinct)
        (quant,) = [
            q
            for q in bias_quants
            if inits[q.input[1]].shape == file_scales.shape
            and np.array_equal(inits[q.input[1]], file_scales)
        ]
        x, _, zero_point, bits = (inits[name] for name in quant.input)
        assert np.all(zero_point == 0) and bits == 32
        assert onnx.helper.get_node_attr_value(quant, "signed") == 1
        # what it quantizes: bias_q[c] * scale[c], channel by channel
        expected = subgraph.tensors[i].data.astype(np.float64) * file_scales.astype(np.float64)
        np.testing.assert_allclose(x, expected, rtol=1e-6)
