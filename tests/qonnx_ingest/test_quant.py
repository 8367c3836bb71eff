"""The node builders compute the QONNX paper's Eq. 1-4 when qonnx executes them.

Every expected value below was worked out by hand from the equations (the comments show the
steps), never taken from the code under test.
"""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.execute import execute_qonnx
from qonnx_ingest.finish import finish_model
from qonnx_ingest.quant import make_bipolar_quant, make_quant, make_trunc


def run_single(qnode, x):
    """Execute one quantization node on x with qonnx's executor."""
    x = np.asarray(x, dtype=np.float32)
    graph = helper.make_graph(
        [],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    qnode.add_to(graph)
    model = finish_model(helper.make_model(graph), rename_tensors=False)[0]
    return execute_qonnx(model, {"x": x})["y"]


X8 = [-5, -1.25, -0.25, 0.25, 0.75, 1.3, 3.6, 10]


def test_signed_quant_rounds_half_to_even_then_clamps():
    # x/s = [-10, -2.5, -0.5, 0.5, 1.5, 2.6, 7.2, 20] -> half-even [-10,-2,0,0,2,3,7,20]
    # -> clamp [-8, 7] -> * 0.5
    y = run_single(make_quant("x", "y", 0.5, 0, 4, signed=True), X8)
    np.testing.assert_allclose(y, [-4, -1, 0, 0, 1, 1.5, 3.5, 3.5], atol=1e-7)


def test_narrow_signed_quant_drops_the_most_negative_code():
    # as above but clamp [-7, 7]
    y = run_single(make_quant("x", "y", 0.5, 0, 4, signed=True, narrow=True), X8)
    np.testing.assert_allclose(y, [-3.5, -1, 0, 0, 1, 1.5, 3.5, 3.5], atol=1e-7)


@pytest.mark.parametrize(
    "narrow, expected",
    [
        # x/s = [-4, 0.4, 1.2, 2.5, 7.6, 20] -> [-4, 0, 1, 2, 8, 20] -> clamp [0, 7] -> * 0.25
        (False, [0, 0, 0.25, 0.5, 1.75, 1.75]),
        # clamp [0, 6]
        (True, [0, 0, 0.25, 0.5, 1.5, 1.5]),
    ],
)
def test_unsigned_quant_clamps_to_zero_and_top_code(narrow, expected):
    y = run_single(
        make_quant("x", "y", 0.25, 0, 3, signed=False, narrow=narrow),
        [-1, 0.1, 0.3, 0.625, 1.9, 5],
    )
    np.testing.assert_allclose(y, expected, atol=1e-7)


HALVES = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1.2, -1.2]


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("ROUND", [-2, -2, 0, 0, 2, 2, 1, -1]),
        ("HALF_EVEN", [-2, -2, 0, 0, 2, 2, 1, -1]),
        ("HALF_UP", [-3, -2, -1, 1, 2, 3, 1, -1]),
        ("HALF_DOWN", [-2, -1, 0, 0, 1, 2, 1, -1]),
        ("CEIL", [-2, -1, 0, 1, 2, 3, 2, -1]),
        ("FLOOR", [-3, -2, -1, 0, 1, 2, 1, -2]),
        ("UP", [-3, -2, -1, 1, 2, 3, 2, -2]),
        ("DOWN", [-2, -1, 0, 0, 1, 2, 1, -1]),
        ("ROUND_TO_ZERO", [-2, -1, 0, 0, 1, 2, 1, -1]),
    ],
)
def test_each_rounding_mode(mode, expected):
    y = run_single(make_quant("x", "y", 1.0, 0, 8, rounding_mode=mode), HALVES)
    np.testing.assert_array_equal(y, np.asarray(expected, dtype=np.float32))


def test_round_to_zero_is_emitted_under_qonnx_name_down():
    q = make_quant("x", "y", 1.0, 0, 8, rounding_mode="round_to_zero")
    attrs = {a.name: helper.get_attribute_value(a) for a in q.node.attribute}
    assert attrs["rounding_mode"] == b"DOWN"


def test_per_channel_scale_on_axis_broadcasts_over_that_axis():
    x = [[[1.3, -2.2], [1.3, -2.2], [1.3, -2.2]]]
    # ch0 s=1: [1, -2]; ch1 s=0.5: x/s=[2.6,-4.4] -> [3,-4] -> [1.5,-2];
    # ch2 s=0.25: [5.2,-8.8] -> [5,-9] -> [1.25,-2.25]
    q = make_quant("x", "y", [1, 0.5, 0.25], 0, 8, x_shape=(1, 3, 2), axis=1)
    assert onnx.numpy_helper.to_array(q.initializers[0]).shape == (1, 3, 1)
    y = run_single(q, x)
    np.testing.assert_allclose(y, [[[1, -2], [1.5, -2], [1.25, -2.25]]], atol=1e-7)


def test_negative_axis_counts_from_the_end():
    q = make_quant("x", "y", [1, 0.5], 0, 8, x_shape=(3, 2), axis=-1)
    assert onnx.numpy_helper.to_array(q.initializers[0]).shape == (1, 2)


def test_nonzero_zero_point_shifts_the_grid():
    # uint8, s=0.1, z=10: x/s+z = [0, -2, 10.4, 12.6, 256, 310] -> round [0,-2,10,13,256,310]
    # -> clamp [0, 255] -> [0,0,10,13,255,255] -> -z -> [-10,-10,0,3,245,245] -> * 0.1
    y = run_single(
        make_quant("x", "y", 0.1, 10, 8, signed=False), [-1.0, -1.2, 0.04, 0.26, 24.6, 30]
    )
    np.testing.assert_allclose(y, [-1, -1, 0, 0.3, 24.5, 24.5], rtol=1e-6)


def test_per_channel_zero_point_follows_its_scale():
    # ch0 s=1 z=0: [0.4, 200] -> [0, 127]; ch1 s=2 z=-3: x/s+z = [-2.8, 97] -> [-3, 97] -> +3
    # -> [0, 100] -> *2 -> [0, 200]
    q = make_quant("x", "y", [1, 2], [0, -3], 8, x_shape=(2, 2), axis=0)
    y = run_single(q, [[0.4, 200], [0.4, 200]])
    np.testing.assert_allclose(y, [[0, 127], [0, 200]], atol=1e-6)


def test_int_quant_op_type_computes_the_same():
    q = make_quant("x", "y", 0.5, 0, 4, op_type="IntQuant")
    assert q.node.op_type == "IntQuant"
    np.testing.assert_allclose(run_single(q, X8), [-4, -1, 0, 0, 1, 1.5, 3.5, 3.5], atol=1e-7)


def test_bipolar_quant_maps_sign_to_plus_minus_scale():
    # x >= 0 -> +s, x < 0 -> -s (zero counts as positive)
    y = run_single(make_bipolar_quant("x", "y", 0.5), [-0.3, 0.0, 0.2, -7])
    np.testing.assert_allclose(y, [-0.5, 0.5, 0.5, -0.5])


def test_bipolar_quant_per_channel_scale():
    q = make_bipolar_quant("x", "y", [0.5, 2.0], x_shape=(2, 2), axis=0)
    y = run_single(q, [[-1, 1], [1, -1]])
    np.testing.assert_allclose(y, [[-0.5, 0.5], [2, -2]])


@pytest.mark.parametrize(
    "mode, expected",
    [
        # 8 -> 4 bits drops 4 LSBs: q / 16 = [6.25, -6.25, 0.9375, 1, -0.0625]
        ("FLOOR", [6, -7, 0, 1, -1]),
        ("CEIL", [7, -6, 1, 1, 0]),
        ("ROUND", [6, -6, 1, 1, 0]),
    ],
)
def test_trunc_drops_least_significant_bits(mode, expected):
    q = make_trunc("x", "y", 1.0, 0, 8, 4, rounding_mode=mode)
    y = run_single(q, [100, -100, 15, 16, -1])
    np.testing.assert_array_equal(y, np.asarray(expected, dtype=np.float32))


def test_trunc_keeps_input_scale():
    # q = x/s = [100, 40]; /2^2 floor -> [25, 10]; * s = 0.5
    y = run_single(make_trunc("x", "y", 0.5, 0, 8, 6), [50, 20])
    np.testing.assert_allclose(y, [12.5, 5])


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"bit_width": 1}, "bit_width"),
        ({"bit_width": 0}, "bit_width"),
        ({"bit_width": float("nan")}, "bit_width"),
        ({"scale": 0.0}, "scale"),
        ({"scale": -0.5}, "scale"),
        ({"scale": float("inf")}, "scale"),
        ({"scale": float("nan")}, "scale"),
        ({"scale": [0.1, 0.0]}, "scale"),
        ({"scale": 1e-50}, "float32"),
        ({"zero_point": 128}, "zero_point"),
        ({"zero_point": -129}, "zero_point"),
        ({"zero_point": 0.5}, "zero_point"),
        ({"zero_point": -1, "signed": False}, "zero_point"),
        ({"zero_point": 256, "signed": False}, "zero_point"),
        ({"zero_point": -128, "narrow": True}, "zero_point"),
        ({"rounding_mode": "STOCHASTIC"}, "rounding_mode"),
        ({"op_type": "FloatQuant"}, "op type"),
        ({"scale": [0.1, 0.2, 0.3], "x_shape": (1, 2)}, "broadcast"),
        ({"scale": np.ones((2, 1, 2)), "x_shape": (1, 2)}, "rank"),
        ({"scale": [0.1, 0.2], "x_shape": ("N", 2, 3), "axis": 3}, "axis 3"),
        ({"scale": [0.1, 0.2], "x_shape": (1, 3), "axis": 1}, "has 3"),
        ({"scale": [0.1, 0.2], "axis": 0}, "shape"),
        ({"scale": [0.1, 0.2], "x_shape": ("N", 3), "axis": 0}, "broadcast"),
    ],
)
def test_invalid_quant_parameters_raise_conversion_error_naming_the_node(kwargs, fragment):
    args = {"scale": 0.1, "zero_point": 0, "bit_width": 8, **kwargs}
    with pytest.raises(ConversionError, match=fragment) as info:
        make_quant("x", "y", name="dense_1/kernel_quantizer", **args)
    assert info.value.where == "dense_1/kernel_quantizer"
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"scale": 0}, "scale"),
        ({"scale": [1.0, 2.0], "x_shape": (2, 3), "axis": 1}, "has 3"),
        ({"scale": [1.0, 2.0, 3.0], "x_shape": (2, 2)}, "broadcast"),
    ],
)
def test_invalid_bipolar_parameters_raise(kwargs, fragment):
    with pytest.raises(ConversionError, match=fragment):
        make_bipolar_quant("x", "y", **kwargs)


@pytest.mark.parametrize(
    "args, kwargs, fragment",
    [
        ((1.0, 0, 4, 8), {}, "exceeds"),
        ((1.0, 0, 1, 1), {}, "in_bit_width"),
        ((0.0, 0, 8, 4), {}, "scale"),
        ((1.0, 0.5, 8, 4), {}, "zero_point"),
        ((1.0, 0, 8, 4), {"rounding_mode": "HALF_UP"}, "rounding_mode"),
    ],
)
def test_invalid_trunc_parameters_raise(args, kwargs, fragment):
    with pytest.raises(ConversionError, match=fragment):
        make_trunc("x", "y", *args, **kwargs)


def test_dynamic_dims_accept_size_one_parameters():
    q = make_quant("x", "y", np.full((1, 3), 0.5), 0, 8, x_shape=("batch", 3))
    assert onnx.numpy_helper.to_array(q.initializers[0]).shape == (1, 3)
