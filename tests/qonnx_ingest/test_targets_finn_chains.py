"""``--format finn`` on TFLite's twice-rounding requantization (``kernel_rounding``: a 32-bit
scale-1 Quant, a 32-bit ``2^right`` Quant, then the output's): the chain is one MultiThreshold
whose thresholds are exact, compared with TFLite's builtin kernels on every int8 input, and
through FINN's steps."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from finn_support import run_finn

import support
import tflite2qonnx
from qonnx_ingest.errors import ConversionError
from qonnx_ingest.execute import execute_qonnx

# the hand-built kernel-rounding models live with the TFLite tests
sys.path.insert(0, str(support.ROOT / "tests" / "tflite2qonnx"))
from kernel_rounding_models import mul, prelu, requantize  # noqa: E402
from litert_compare import real_value, reference_interpreter  # noqa: E402


def _interpreter_and_feeds(source: bytes, model, feeds_q: list[np.ndarray]):
    """The builtin kernels' dequantized output and the converted graph's feeds."""
    it = reference_interpreter(source)
    feeds = {}
    for detail, graph_input, q in zip(
        it.get_input_details(), model.graph.input, feeds_q, strict=True
    ):
        it.set_tensor(detail["index"], q)
        feeds[graph_input.name] = real_value(q, detail["quantization"]).astype(np.float32)
    it.invoke()
    (out,) = it.get_output_details()
    scale, zero_point = out["quantization"]
    stored = it.get_tensor(out["index"]).astype(np.float32)
    return (stored - zero_point) * np.float32(scale), feeds


def _every_int8(shape) -> np.ndarray:
    values = np.arange(-128, 128, dtype=np.int8)
    return np.repeat(values, int(np.prod(shape)) // 256).reshape(shape)


@pytest.fixture(scope="module")
def requantized():
    """QUANTIZE int8 -> int8 (multiplier 0.4975, two roundings) in the FINN form."""
    source = requantize()
    model = tflite2qonnx.convert(source, batch_size=1, keep_io_layout=True, format="finn")
    reference, feeds = _interpreter_and_feeds(source, model, [_every_int8((1, 16, 16, 4))])
    return model, reference, feeds


def test_a_twice_rounding_requantization_is_one_multithreshold(requantized) -> None:
    model, _, _ = requantized
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("MultiThreshold") == 1 and "Quant" not in ops, ops


def test_its_thresholds_equal_the_builtin_kernels_on_every_int8(requantized) -> None:
    model, reference, feeds = requantized
    (got,) = execute_qonnx(model, feeds).values()
    np.testing.assert_array_equal(got, reference)


def test_it_reaches_specialize_layers_equal_to_the_kernels_after_every_step(requantized):
    model, reference, feeds = requantized
    run = run_finn(model, feeds)
    assert run.reached == "specialize_layers", run.stopped
    assert {"qonnx_to_finn", "tidy_up", "streamline", "convert_to_hw"} <= set(run.outputs)
    for step, (output,) in run.outputs.items():
        np.testing.assert_array_equal(output, reference, err_msg=step)


def test_mul_with_its_rounding_chain_and_relu_equals_the_builtin_kernels() -> None:
    """Two int8 tensors multiplied; the product's two roundings and the fused RELU before
    the output grid are one set of thresholds."""
    source = mul()
    model = tflite2qonnx.convert(source, batch_size=1, keep_io_layout=True, format="finn")
    assert "Quant" not in {n.op_type for n in model.graph.node}
    rng = np.random.default_rng(36)
    a, b = (zp + rng.integers(-15, 16, (1, 8, 8, 4)) for zp in (-3, 7))
    reference, feeds = _interpreter_and_feeds(source, model, [a.astype(np.int8), b.astype(np.int8)])
    (got,) = execute_qonnx(model, feeds).values()
    np.testing.assert_array_equal(got, reference)


def test_a_rounding_chain_that_forks_into_a_select_is_refused_naming_its_quant() -> None:
    """PRELU's positive side meets its negative side in a Where: no single chain."""
    with pytest.raises(ConversionError, match=r"Quant positive_\w+.*32-bit activation.*FINN"):
        tflite2qonnx.convert(prelu(), batch_size=1, format="finn")


def test_a_fused_activation_range_clip_is_folded_into_exact_thresholds() -> None:
    """x -> Clip(-0.5, 0.75) -> Quant(0.1, int8, HALF_UP), as TFLite's fused RELU6-style
    ranges come out: one MultiThreshold, equal to the quantizer by hand on every tie of its
    grid, their float32 neighbours and values beyond the range (FINN maps no Clip)."""
    from onnx import TensorProto, helper, numpy_helper

    from qonnx_ingest.targets.finn import to_finn

    scale = np.float32(0.1)
    graph = helper.make_graph(
        [
            helper.make_node("Clip", ["x", "lo", "hi"], ["c"]),
            helper.make_node(
                "Quant",
                ["c", "s", "z", "b"],
                ["y"],
                domain="qonnx.custom_op.general",
                signed=1,
                narrow=0,
                rounding_mode="HALF_UP",
            ),
        ],
        "clip",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])],
        [
            numpy_helper.from_array(np.float32(-0.5), "lo"),
            numpy_helper.from_array(np.float32(0.75), "hi"),
            numpy_helper.from_array(scale, "s"),
            numpy_helper.from_array(np.float32(0), "z"),
            numpy_helper.from_array(np.float32(8), "b"),
        ],
    )
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid("qonnx.custom_op.general", 1)]
    model = to_finn(helper.make_model(graph, opset_imports=opsets))
    assert [n.op_type for n in model.graph.node] == ["MultiThreshold", "Mul"]
    ties = ((np.arange(-8, 10) + 0.5) * scale).astype(np.float32)
    up, down = np.nextafter(ties, np.float32(9)), np.nextafter(ties, np.float32(-9))
    x = np.concatenate([ties, up, down, np.float32([-3e38, -1, 0, 1, 3e38])])
    got = np.array([execute_qonnx(model, {"x": v.reshape(1, 1)})["y"].item() for v in x])
    v = np.clip(x, np.float32(-0.5), np.float32(0.75)) / scale
    want = (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.float32) * scale
    np.testing.assert_array_equal(got.astype(np.float32), want)
