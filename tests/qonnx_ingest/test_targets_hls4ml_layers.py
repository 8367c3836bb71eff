"""qonnx_ingest.targets.hls4ml_layers: a Clip the next Quant saturates anyway is dropped, a
global average pool becomes a sum MatMul and a Div, and the Quant after it (its input >= 0)
rounds FLOOR(x + 1/2) or, proven tie-free, ROUND; each checked against values computed by
hand (ties included), and the uint8 pool in hls4ml 1.3.0 (marked hls4ml) compiled bit-equal."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hls4ml_support import compile_vivado
from onnx import TensorProto, helper, numpy_helper

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.execute import execute_qonnx
from qonnx_ingest.targets.hls4ml import EXACT, FORM_KEY, LAYERS, to_hls4ml

DOMAIN = "qonnx.custom_op.general"
RELU6_SCALE = np.float32(6 / 255)


def _quant(x, out, scale, zero_point, name, inits, rounding="HALF_UP", signed=1):
    names = [f"{name}_{p}" for p in ("s", "z", "b")]
    for n, v in zip(names, (scale, zero_point, 8.0), strict=True):
        inits.append(numpy_helper.from_array(np.asarray(v, np.float32), n))
    return helper.make_node(
        "Quant", [x, *names], [out], name=name, domain=DOMAIN, signed=signed, narrow=0,
        rounding_mode=rounding,
    )  # fmt: skip


def _model(nodes, inits, in_shape, out_shape, value_info=()):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
        inits,
        value_info=list(value_info),
    )
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid(DOMAIN, 1)]
    return helper.make_model(graph, opset_imports=opsets)


def _relu6(high: float):
    """n = Quant(x, 1) int32 (ROUND, fed integers), Clip(n * s, 0, high), int8 Quant on s with
    zero point -128 (HALF_UP): TFLite's fused RELU6 requantization as tflite2qonnx writes it."""
    inits = [
        numpy_helper.from_array(RELU6_SCALE, "s"),
        numpy_helper.from_array(np.float32(0), "low"),
        numpy_helper.from_array(np.float32(high), "high"),
    ]
    nodes = [
        _quant("x", "n", 1.0, 0.0, "in", inits, "ROUND"),
        helper.make_node("Mul", ["n", "s"], ["m"], name="mul"),
        helper.make_node("Clip", ["m", "low", "high"], ["c"], name="clip"),
        _quant("c", "y", RELU6_SCALE, -128.0, "out", inits),
    ]
    nodes[0].input[3] = "in_b32"
    inits.append(numpy_helper.from_array(np.float32(32), "in_b32"))
    return _model(nodes, inits, [1, 400], [1, 400])


def test_relu6_clip_folded_into_the_quant_that_saturates_at_6():
    form = to_hls4ml(_relu6(6.0))
    assert "Clip" not in [n.op_type for n in form.graph.node]
    n = np.arange(-100, 300, dtype=np.float32).reshape(1, 400)
    y = execute_qonnx(form, {"x": n})["y"]
    np.testing.assert_array_equal(y, RELU6_SCALE * np.clip(n, 0, 255))  # 6 / s rounds to 255


def test_clip_inside_the_quant_range_kept():
    form = to_hls4ml(_relu6(3.0))  # 3 / s = 127.5 steps: the Quant alone would give up to 255
    assert "Clip" in [n.op_type for n in form.graph.node]


# (height, width, zero point): uint8 from 0, 2x2 (ties at level sums 2 mod 4); int8 with
# zero point -128, 3x1 (a mean of 3 integers is never a tie)
POOLS = {"uint8_2x2": (2, 2, 0.0), "int8_3x1": (3, 1, -128.0)}


def _global_average(h: int, w: int, zero_point: float):
    """NHWC (1, h, w, 3) on scale 0.5; qonnx's channels-last global average pool (Transpose,
    AveragePool h x w, Transpose); Quant HALF_UP of the mean, same scale and zero point."""
    inits: list = []
    signed = int(zero_point < 0)
    nodes = [
        _quant("x", "q", 0.5, zero_point, "in", inits, "ROUND", signed),
        helper.make_node("Transpose", ["q"], ["t"], name="to_nchw", perm=[0, 3, 1, 2]),
        helper.make_node("AveragePool", ["t"], ["p"], name="pool", kernel_shape=[h, w]),
        helper.make_node("Transpose", ["p"], ["a"], name="to_nhwc", perm=[0, 2, 3, 1]),
        _quant("a", "y", 0.5, zero_point, "out", inits, "HALF_UP", signed),
    ]
    info = [helper.make_tensor_value_info("q", TensorProto.FLOAT, [1, h, w, 3])]
    return _model(nodes, inits, [1, h, w, 3], [1, 1, 1, 3], info)


def _expected_mean(x: np.ndarray, zero_point: float) -> np.ndarray:
    """TFLite's average pool: the stored integers' mean, rounded half away from zero."""
    low = -128 if zero_point < 0 else 0
    q = np.clip(np.round(x / 0.5) + zero_point, low, low + 255).reshape(-1, 3)
    mean = q.mean(axis=0)
    return (0.5 * (np.sign(mean) * np.floor(np.abs(mean) + 0.5) - zero_point)).reshape(1, 1, 1, 3)


def _samples(h: int, w: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    x = 0.5 * rng.integers(0, 256, (16, 1, h, w, 3)).astype(np.float32)
    x[0, 0, :, :, 0] = 0.0
    x[0, 0, 0, 0, 0] = 1.0  # uint8 2x2: stored 2, 0, 0, 0, mean 0.5, a tie (up)
    return x


@pytest.mark.parametrize("pool", sorted(POOLS))
def test_global_average_pool_as_sum_matmul_rounds_as_tflite(pool):
    h, w, zero_point = POOLS[pool]
    model = _global_average(h, w, zero_point)
    form = to_hls4ml(model)
    record = json.loads({p.key: p.value for p in form.metadata_props}[FORM_KEY])
    assert record[LAYERS]["global average as MatMul"], record
    rule = "nonnegative" if zero_point == 0 else "accumulator"
    assert record[EXACT]["out"].startswith(rule), record
    assert {"Transpose", "AveragePool"}.isdisjoint(n.op_type for n in form.graph.node)
    x = _samples(h, w)
    for sample in x:
        expected = _expected_mean(sample, zero_point)
        for model_ in (model, form):
            np.testing.assert_array_equal(execute_qonnx(model_, {"x": sample})["y"], expected)
    if pool == "uint8_2x2":
        assert _expected_mean(x[0], zero_point)[0, 0, 0, 0] == 0.5  # the tie goes up a step


def test_global_average_pool_with_negative_ties_refused():
    """int8 2x2 with zero point -128: the stored mean -100.5 rounds to -101, FLOOR(. + 1/2)
    and ROUND would give -100: no rule, refused by name."""
    with pytest.raises(ConversionError, match="Quant out: rounds HALF_UP"):
        to_hls4ml(_global_average(2, 2, -128.0))


@pytest.mark.hls4ml
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("pool", sorted(POOLS))
def test_hls4ml_compiles_the_pool_form_and_rounds_its_ties_up(pool, tmp_path):
    """uint8 2x2 (zero point 0), and int8 3x1, whose zero point -128 hls4ml would drop on
    the 0.5 scale: the form writes it as the unsigned Quant it equals (hls4ml_zero_points)."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.util.cleanup import cleanup_model

    h, w, zero_point = POOLS[pool]
    prepared = cleanup_model(ModelWrapper(to_hls4ml(_global_average(h, w, zero_point))))
    hls_model = compile_vivado(prepared, tmp_path, "fixed<64,24>", {"global_in": "fixed<24,16>"})
    x = _samples(h, w)
    y = np.asarray(hls_model.predict(np.ascontiguousarray(x.reshape(len(x), -1))))
    expected = np.concatenate([_expected_mean(s, zero_point) for s in x])
    assert expected[0, 0, 0, 0] == 0.5  # the tie, up a step
    np.testing.assert_array_equal(y.reshape(expected.shape), expected)
