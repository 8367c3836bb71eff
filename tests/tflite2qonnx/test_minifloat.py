"""LiteRT's FLOAT8 constants (FLOAT8_E4M3FN, FLOAT8_E5M2) as qonnx's FloatQuant
(tflite2qonnx/minifloat.py).

No LiteRT 2.3 CPU kernel reads FLOAT8 (DEQUANTIZE: "is_supported_type was not true"; CAST:
"Type FLOAT8_E4M3FN is unsupported"), so no runtime can be the reference: the models here
are hand-written flatbuffers holding every byte value, and the converted graphs are compared
with the values decoded by hand from the OCP 8-bit floating point specification (2023).
"""

from __future__ import annotations

import flatbuffers
import numpy as np
import pytest
from litert_compare import run_ours
from tflite_writer import build_model

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.quant_lowering import lower_quants
from tflite2qonnx.api import convert

# format -> (exponent bits, mantissa bits, bias, largest finite value, has infinities)
OCP = {"float8_e4m3fn": (4, 3, 7, 448.0, False), "float8_e5m2": (5, 2, 15, 57344.0, True)}
TYPE_CODES = {"float8_e4m3fn": 21, "float8_e5m2": 22}


def ocp_decode(code: int, fmt: str) -> float:
    """One byte by the OCP spec: sign, biased exponent, mantissa; subnormals at exponent 0;
    E4M3FN's only non-finite codes are S.1111.111 (NaN), E5M2's top exponent is inf / NaN."""
    e_bits, m_bits, bias, _, _ = OCP[fmt]
    sign = -1.0 if code & 0x80 else 1.0
    exponent = (code >> m_bits) & ((1 << e_bits) - 1)
    mantissa = code & ((1 << m_bits) - 1)
    top = (1 << e_bits) - 1
    if fmt == "float8_e4m3fn" and exponent == top and mantissa == (1 << m_bits) - 1:
        return float("nan")
    if fmt == "float8_e5m2" and exponent == top:
        return sign * float("inf") if mantissa == 0 else float("nan")
    if exponent == 0:
        return sign * mantissa * 2.0 ** (1 - bias - m_bits)
    return sign * (1 + mantissa / 2**m_bits) * 2.0 ** (exponent - bias)


def finite_codes(fmt: str) -> np.ndarray:
    return np.array([c for c in range(256) if np.isfinite(ocp_decode(c, fmt))], np.uint8)


def _with_float8(data: bytes, tensor: int, fmt: str, codes: np.ndarray, quant=None) -> bytes:
    """``data`` with tensor ``tensor`` retyped to FLOAT8 holding ``codes`` (the writer
    predates the type); ``quant``: (scales, zero points, axis)."""
    from ai_edge_litert import schema_py_generated as fb
    from ai_edge_litert.tools import flatbuffer_utils

    model = flatbuffer_utils.convert_bytearray_to_object(bytearray(data))
    t = model.subgraphs[0].tensors[tensor]
    t.type = TYPE_CODES[fmt]
    if codes is not None:
        model.buffers[t.buffer].data = np.asarray(codes, np.uint8).tolist()
    if quant is not None:
        q = fb.QuantizationParametersT()
        q.scale, q.zeroPoint, q.quantizedDimension = list(quant[0]), list(quant[1]), quant[2]
        t.quantization = q
    builder = flatbuffers.Builder(0)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def dequantize_add(fmt: str, codes: np.ndarray, quant=None) -> bytes:
    """x + DEQUANTIZE(FLOAT8 constant holding ``codes``)."""
    n = len(codes)
    tensors = [
        {"name": "w", "shape": (n,), "dtype": "float16", "data": np.zeros(n, np.float16)},
        {"name": "wf", "shape": (n,), "dtype": "float32"},
        {"name": "x", "shape": (n,), "dtype": "float32"},
        {"name": "y", "shape": (n,), "dtype": "float32"},
    ]
    ops = [
        {"op": "DEQUANTIZE", "inputs": [0], "outputs": [1]},
        {"op": "ADD", "inputs": [2, 1], "outputs": [3], "options": ("AddOptions", {})},
    ]
    return _with_float8(build_model(tensors, ops, [2], [3]), 0, fmt, codes, quant)


def _both_runtimes(model, x: np.ndarray) -> list[np.ndarray]:
    """qonnx's executor on the QONNX graph, onnxruntime on its standard-op lowering."""
    name = model.graph.input[0].name
    return [run_ours(m, {name: x})[m.graph.output[0].name] for m in (model, lower_quants(model))]


def test_ml_dtypes_decodes_every_byte_as_the_ocp_spec():
    import ml_dtypes

    for fmt in OCP:
        codes = np.arange(256, dtype=np.uint8)
        ours = codes.view(getattr(ml_dtypes, fmt)).astype(np.float64)
        spec = np.array([ocp_decode(int(c), fmt) for c in codes])
        np.testing.assert_array_equal(ours, spec)
        assert np.nanmax(spec[np.isfinite(spec)]) == OCP[fmt][3]


@pytest.mark.parametrize("fmt", sorted(OCP))
def test_every_finite_float8_value_converts_exactly_behind_a_float_quant(fmt):
    codes = finite_codes(fmt)
    model = convert(dequantize_add(fmt, codes))
    (fq,) = [n for n in model.graph.node if n.op_type == "FloatQuant"]
    inits = {t.name: t for t in model.graph.initializer}
    from onnx import helper, numpy_helper

    params = [float(numpy_helper.to_array(inits[i])) for i in fq.input[1:]]
    e_bits, m_bits, bias, top, has_inf = OCP[fmt]
    assert params == [1.0, e_bits, m_bits, bias, top]
    attrs = {a.name: helper.get_attribute_value(a) for a in fq.attribute}
    assert (attrs["has_inf"], attrs["has_nan"], attrs["has_subnormal"]) == (int(has_inf), 1, 1)
    x = np.linspace(-1, 1, len(codes)).astype(np.float32)
    expected = x + np.array([ocp_decode(int(c), fmt) for c in codes], np.float32)
    for y in _both_runtimes(model, x):
        np.testing.assert_array_equal(y, expected)


def test_a_per_tensor_scale_multiplies_the_float8_values():
    codes = finite_codes("float8_e4m3fn")
    model = convert(dequantize_add("float8_e4m3fn", codes, ([0.375], [0], 0)))
    x = np.zeros(len(codes), np.float32)
    spec = np.array([ocp_decode(int(c), "float8_e4m3fn") for c in codes], np.float32)
    for y in _both_runtimes(model, x):
        np.testing.assert_array_equal(y, np.float32(0.375) * spec)


def test_float8_fully_connected_weights_with_per_channel_scales():
    """A FLOAT8 weight used directly (no DEQUANTIZE): per-output-channel scales."""
    rng = np.random.default_rng(0)
    codes = rng.choice(finite_codes("float8_e5m2"), size=(3, 8)).astype(np.uint8)
    codes[np.abs([[ocp_decode(int(c), "float8_e5m2") for c in r] for r in codes]) > 64] = 0x3C
    tensors = [
        {"name": "x", "shape": (2, 8), "dtype": "float32"},
        {"name": "w", "shape": (3, 8), "dtype": "float16", "data": np.zeros((3, 8), np.float16)},
        {"name": "y", "shape": (2, 3), "dtype": "float32"},
    ]
    ops = [
        {"op": "FULLY_CONNECTED", "inputs": [0, 1, -1], "outputs": [2],
         "options": ("FullyConnectedOptions", {})},
    ]  # fmt: skip
    scales = [0.5, 0.25, 2.0]
    data = _with_float8(build_model(tensors, ops, [0], [2]), 1, "float8_e5m2", codes.ravel(),
                        (scales, [0, 0, 0], 0))  # fmt: skip
    model = convert(data)
    w = np.array([[ocp_decode(int(c), "float8_e5m2") for c in r] for r in codes])
    x = rng.uniform(-1, 1, (2, 8)).astype(np.float32)
    expected = x.astype(np.float64) @ (w * np.array(scales)[:, None]).T
    assert [n.op_type for n in model.graph.node].count("FloatQuant") == 1
    for y in _both_runtimes(model, x):
        np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("codes", "quant", "message"),
    [
        ([0x38, 0x7F], None, "FLOAT8_E4M3FN constant holds NaN or infinity"),
        ([0x38, 0x40], ([0.5], [3], 0), "FLOAT8_E4M3FN constant with a zero point"),
        (None, None, "FLOAT8_E4M3FN activations are not supported"),
    ],
)
def test_what_has_no_float_quant_form_is_refused_in_one_line(codes, quant, message):
    if codes is None:  # the graph input retyped: an activation
        tensors = [
            {"name": "x", "shape": (2,), "dtype": "float32"},
            {"name": "y", "shape": (2,), "dtype": "float32"},
        ]
        ops = [{"op": "DEQUANTIZE", "inputs": [0], "outputs": [1]}]
        data = _with_float8(build_model(tensors, ops, [0], [1]), 0, "float8_e4m3fn", None)
    else:
        data = dequantize_add("float8_e4m3fn", np.array(codes, np.uint8), quant)
    with pytest.raises(ConversionError, match=message) as exc:
        convert(data)
    assert "\n" not in str(exc.value)
