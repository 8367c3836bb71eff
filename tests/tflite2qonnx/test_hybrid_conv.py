"""Hybrid (dynamic-range) convolutions and the hybrid input quantizer, against the interpreter.

The int8 filters keep 8-bit Quant nodes (what hls4ml / FINN read); the converted graph runs
the reference kernels' on-the-fly input quantization and integer convolution, so its outputs
equal the builtin reference kernels' bit for bit. The quantizer's rounding is pinned on
hand-built FULLY_CONNECTED models whose identity weights show each quantized input value.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from control_flow_models import in_fresh_process
from litert_compare import reference_interpreter, run_ours
from onnx import numpy_helper
from tflite_writer import build_model

import tflite2qonnx
from qonnx_ingest.quant_lowering import lower_quants
from support import CORPUS, requires_corpus
from tflite2qonnx.api import convert_subgraph, slice_subgraph
from tflite2qonnx.reader import read_model

EMBEDDER = CORPUS / "tflite" / "tfexamples__mobilenet_v2_035_96_embedder_dynrange.tflite"


@pytest.fixture(scope="module")
def models() -> dict[str, bytes]:
    return in_fresh_process(
        {
            "conv_per_channel": ("hybrid_conv", {}),
            "conv_per_tensor": ("hybrid_conv", {"per_channel": False}),
            "depthwise": ("hybrid_depthwise", {}),
            "activations": ("hybrid_convs_with_float_activations", {}),
        },
        module="hybrid_conv_models",
    )


def _weight_quant_bits(model: onnx.ModelProto) -> list[float]:
    """Bit widths of the Quant nodes that read a constant (the weights)."""
    inits = {t.name: t for t in model.graph.initializer}
    return [
        float(numpy_helper.to_array(inits[n.input[3]]))
        for n in model.graph.node
        if n.op_type == "Quant" and n.input[0] in inits
    ]


def _compare(data: bytes, model: onnx.ModelProto, inputs: int, **kwargs) -> int:
    """How many output values differ from the interpreter's over ``inputs`` seeded inputs
    (odd ones all positive: the zero point sits at -128)."""
    it = reference_interpreter(data, **kwargs)
    (ind,), (outd,) = it.get_input_details(), it.get_output_details()
    rng = np.random.default_rng(4)
    differ = 0
    for k in range(inputs):
        x = rng.uniform(-1, 1, ind["shape"]).astype(np.float32)
        if k % 2:
            x = np.abs(x) * np.float32(0.3)
        it.set_tensor(ind["index"], x)
        it.invoke()
        theirs = it.get_tensor(outd["index"])
        ours = run_ours(model, {model.graph.input[0].name: x})[model.graph.output[0].name]
        differ += int(np.sum(ours != theirs))
    return differ


@pytest.mark.keras
@pytest.mark.parametrize("name", ["conv_per_channel", "conv_per_tensor", "depthwise"])
def test_hybrid_conv_filters_are_8_bit_quant_nodes(models, name):
    model = tflite2qonnx.convert(models[name])
    assert _weight_quant_bits(model) == [8.0]
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT


@pytest.mark.keras
@pytest.mark.parametrize("name", ["conv_per_channel", "conv_per_tensor", "depthwise"])
def test_hybrid_conv_equals_the_reference_kernel_bit_for_bit(models, name):
    """Per-channel CONV_2D (asymmetric inputs, (acc * channel scale) * factor), per-tensor
    CONV_2D (symmetric inputs) and DEPTHWISE_CONV_2D (acc * (channel scale * factor))."""
    assert _compare(models[name], tflite2qonnx.convert(models[name]), inputs=4) == 0


@pytest.mark.keras
def test_float_tanh_and_logistic_between_hybrid_convs_keep_the_model_bit_for_bit(models):
    """The activations compute the reference kernels' float arithmetic (``float_kernels``):
    the next conv's input quantizer sees the interpreter's values (with ONNX Tanh / Sigmoid
    the output was 2.3e-4 off: an ulp had moved a quantized input a step)."""
    data = models["activations"]
    assert _compare(data, tflite2qonnx.convert(data), inputs=4) == 0


@pytest.mark.keras
def test_hybrid_conv_channels_last_is_sorted_and_equals_the_reference_kernel(models):
    """The hybrid filter is computed by nodes, so the channels-last Conv reads it through an
    OHWI Transpose that must precede it (it once came last: onnx.checker and qonnx's executor
    refused the file, --verify crashed)."""
    data = models["conv_per_channel"]
    model = tflite2qonnx.convert(data, channels_last=True)
    onnx.checker.check_model(model)
    assert any(n.domain == "qonnx.custom_op.channels_last" for n in model.graph.node)
    assert _compare(data, model, inputs=2) == 0


@pytest.mark.keras
def test_hybrid_conv_is_not_the_float_conv_on_dequantized_filters(models):
    """XNNPACK computes in float on the dequantized filters: it differs from the reference
    kernel the converted graph follows (what makes the equality above a real check)."""
    data = models["conv_per_tensor"]
    assert _compare(data, tflite2qonnx.convert(data), inputs=2, xnnpack=True) > 0


@requires_corpus
def test_hybrid_mobilenet_embedder_convs_equal_the_reference_kernels():
    """27 hybrid CONV_2D and 10 hybrid DEPTHWISE_CONV_2D (per-channel int8 filters) among
    float ones: every int8 filter an 8-bit Quant; each hybrid op, fed the interpreter's own
    input, gives its output bit for bit (2 inputs). End to end in one onnxruntime session
    (Quants lowered) the embedding is within 1e-6 of the interpreter's (measured: 19 of 1,280
    values a few ulps off; equal under qonnx's node-by-node executor, which takes minutes)."""
    data = EMBEDDER.read_bytes()
    model = tflite2qonnx.convert(data)
    assert _weight_quant_bits(model) == [8.0] * 37
    (subgraph,) = read_model(data).subgraphs
    hybrid = [op for op in subgraph.operators if op.name.endswith("CONV_2D")]
    hybrid = [op for op in hybrid if subgraph.tensors[op.inputs[1]].dtype == "int8"]
    assert len(hybrid) == 37
    it = reference_interpreter(data, preserve_all=True)
    (ind,) = it.get_input_details()
    names = {d["index"]: d["name"] for d in it.get_tensor_details()}
    pieces = {}
    rng = np.random.default_rng(5)
    for _ in range(2):
        it.set_tensor(ind["index"], rng.uniform(-1, 1, ind["shape"]).astype(np.float32))
        it.invoke()
        for op in hybrid:
            if op.index not in pieces:
                piece = slice_subgraph(subgraph, [op.index])
                pieces[op.index] = lower_quants(convert_subgraph(piece, keep_io_layout=True))
            x = op.inputs[0]
            ours = run_ours(pieces[op.index], {names[x]: it.get_tensor(x)})
            theirs = it.get_tensor(op.outputs[0])
            np.testing.assert_array_equal(ours[names[op.outputs[0]]], theirs, op.where)
    x = rng.uniform(-1, 1, ind["shape"]).astype(np.float32)
    it.set_tensor(ind["index"], x)
    it.invoke()
    theirs = it.get_tensor(it.get_output_details()[0]["index"])
    ours = run_ours(lower_quants(model), {model.graph.input[0].name: x})
    assert np.abs(ours[model.graph.output[0].name] - theirs).max() <= 1e-6


# ---- the input quantizer, seen through FULLY_CONNECTED with identity weights

DEPTH = 20  # 16 values in the quantizer's vector blocks of 8, a scalar tail of 4
_F32 = np.float32
_NEAR_HALF = np.nextafter(_F32(0.5), _F32(0), dtype=_F32)  # 0.49999997


def _identity_fc(asymmetric: bool) -> bytes:
    tensors = [
        {"name": "x", "shape": (1, DEPTH), "dtype": "float32"},
        {"name": "w", "shape": (DEPTH, DEPTH), "dtype": "int8",
         "data": np.eye(DEPTH, dtype=np.int8), "quant": ([1.0], [0])},
        {"name": "y", "shape": (1, DEPTH), "dtype": "float32"},
    ]  # fmt: skip
    options = ("FullyConnectedOptions", {"AsymmetricQuantizeInputs": asymmetric})
    spec = {"op": "FULLY_CONNECTED", "inputs": [0, 1, -1], "outputs": [2], "options": options}
    return build_model(tensors, [spec], [0], [2])


def _run_both(data: bytes, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    it = reference_interpreter(data)
    (ind,), (outd,) = it.get_input_details(), it.get_output_details()
    it.set_tensor(ind["index"], x[None])
    it.invoke()
    model = tflite2qonnx.convert(data)
    ours = run_ours(model, {model.graph.input[0].name: x[None]})[model.graph.output[0].name]
    return ours[0], it.get_tensor(outd["index"])[0]


def test_asymmetric_input_quantizer_rounds_before_adding_the_zero_point():
    """Scale 2^-7 (range [-0.9921875, 1]), zero point -1: v = x * 128 = -0.49999997 becomes
    trunc(v - 0.5) = -1 in the vector blocks and std::round(v) = 0 in the tail, then -1 is
    added; the portable kernel's round(zp + v) = round(-1.5) would give -2 in the tail."""
    x = np.full(DEPTH, -_NEAR_HALF / _F32(128), _F32)
    x[0], x[1] = _F32(-0.9921875), _F32(1.0)
    ours, theirs = _run_both(_identity_fc(asymmetric=True), x)
    q = np.round(theirs.astype(np.float64) * 128)  # q - zp: the factor is 2^-7
    assert list(q[2:16]) == [-1.0] * 14 and list(q[16:]) == [0.0] * 4
    np.testing.assert_array_equal(ours, theirs)


def test_asymmetric_input_quantizer_matches_on_near_half_products():
    """Values whose products x * (1 / factor) fall a few ulps around k + 0.5, with zero points
    that make zp + v lose v's last bit: rounding v first, as the kernel does (the portable
    kernel's round(zp + v) differs from the interpreter on these inputs)."""
    rng = np.random.default_rng(0)
    data = _identity_fc(asymmetric=True)
    factor = _F32(3.0 / 255.0)
    portable_differs = 0
    for _ in range(6):
        x = rng.uniform(-1, 2, DEPTH).astype(_F32)
        x[0], x[1] = _F32(-1.0), _F32(2.0)  # factor float32(3 / 255), zero point -43
        inv = _F32(1) / _F32(3.0 / 255.0)
        halves = rng.integers(-80, 160, DEPTH - 2) + 0.5
        x[2:] = (halves / inv).astype(_F32)
        x[2:] = np.nextafter(x[2:], rng.choice([-1.0, 1.0], DEPTH - 2).astype(_F32))
        ours, theirs = _run_both(data, x)
        np.testing.assert_array_equal(ours, theirs)
        v = (_F32(-43) + x * inv).astype(_F32).astype(np.float64)
        portable = np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5), -128, 127) + 43
        portable_differs += int(np.sum(portable != np.round(theirs / factor)))
    assert portable_differs > 0


def test_symmetric_input_quantizer_rounds_blocks_and_tail_differently():
    """r = 127/128 makes v = x * 128: +-0.49999997 rounds to +-1 in the vector blocks (the sum
    v + 0.5 rounds to 1 in float32) and to 0 in the scalar tail (std::round)."""
    x = np.full(DEPTH, _NEAR_HALF / _F32(128), _F32)
    x[2::2] *= -1
    x[0] = _F32(127 / 128)
    ours, theirs = _run_both(_identity_fc(asymmetric=False), x)
    q = np.round(theirs.astype(np.float64) * 128)
    assert list(np.abs(q[1:16])) == [1.0] * 15 and list(q[16:]) == [0.0] * 4
    np.testing.assert_array_equal(ours, theirs)
