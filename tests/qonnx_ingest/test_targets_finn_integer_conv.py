"""``--format finn`` on a quantized Conv with per-channel weights and a per-channel
twice-rounding requantization (TFLite's int8 convolution as ``kernel_rounding`` writes it):
the Conv computes on integer levels and weights, the thresholds behind it on the integer
accumulator, compared with the requantization derived by hand in integer arithmetic, in qonnx's
executor and through FINN's steps."""

from __future__ import annotations

import numpy as np
import pytest
from finn_support import run_finn
from onnx import TensorProto, helper, numpy_helper

from qonnx_ingest.execute import execute_qonnx
from qonnx_ingest.targets.finn import to_finn

QONNX = "qonnx.custom_op.general"
F32 = np.float32
# input: int8 levels with zero point 3; weights int8 per channel; output int8, zero point -5
S_IN, Z_IN, S_OUT, Z_OUT = F32(0.0173), 3, F32(0.0419), -5
S_W = np.float32([0.0031, 0.0057, 0.0113, 0.0021])
RIGHT = np.array([1, 2, 3, 5])  # each channel's right shift: two roundings
CHANNELS, SHAPE = 4, (1, 2, 6, 6)
# every attribute spelled out: qonnx's conv lowering reads them all
_CONV = {
    "kernel_shape": [3, 3],
    "pads": [1, 1, 1, 1],
    "strides": [1, 1],
    "dilations": [1, 1],
    "group": 1,
}


def _weights_and_bias():
    rng = np.random.default_rng(5)
    return rng.integers(-127, 128, (CHANNELS, 2, 3, 3)), rng.integers(-3000, 3000, CHANNELS)


def _quant(x, s, z, bits, y, signed=1):
    return helper.make_node(
        "Quant", [x, s, z, bits], [y], domain=QONNX, signed=signed, narrow=0,
        rounding_mode="HALF_UP",
    )  # fmt: skip


def _conv_model():
    """Quant -> Conv (padded) -> Div -> Quant(1) -> Div(2^right) -> Quant(1) -> Mul -> Relu
    -> Quant: the default form of an int8 CONV_2D with a fused RELU."""
    w, b = _weights_and_bias()
    fine = (S_OUT / (2.0**RIGHT)).astype(F32)
    consts = {
        "s_in": S_IN, "z_in": F32(Z_IN), "b8": F32(8), "b32": F32(32), "one": F32(1),
        "zero": F32(0), "s_out": S_OUT, "z_out": F32(Z_OUT),
        "w": (w * S_W[:, None, None, None]).astype(F32), "s_w": S_W.reshape(CHANNELS, 1, 1, 1),
        "bias": (b * (S_IN * S_W)).astype(F32), "s_b": (S_IN * S_W).astype(F32),
        "fine": fine.reshape(1, CHANNELS, 1, 1),
        "pot": (2.0**RIGHT).astype(F32).reshape(1, CHANNELS, 1, 1),
    }  # fmt: skip
    nodes = [
        _quant("x", "s_in", "z_in", "b8", "xq"),
        _quant("w", "s_w", "zero", "b8", "wq"),
        _quant("bias", "s_b", "zero", "b32", "bq"),
        helper.make_node("Conv", ["xq", "wq", "bq"], ["acc"], **_CONV),
        helper.make_node("Div", ["acc", "fine"], ["f"]),
        _quant("f", "one", "zero", "b32", "high_mul"),
        helper.make_node("Div", ["high_mul", "pot"], ["d"]),
        _quant("d", "one", "zero", "b32", "shifted"),
        helper.make_node("Mul", ["shifted", "s_out"], ["real"]),
        helper.make_node("Relu", ["real"], ["relu"]),
        _quant("relu", "s_out", "z_out", "b8", "y"),
    ]
    graph = helper.make_graph(
        nodes,
        "int8_conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, CHANNELS, *SHAPE[2:]])],
        [numpy_helper.from_array(np.asarray(v, F32), k) for k, v in consts.items()],
    )
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid(QONNX, 1)]
    return helper.make_model(graph, opset_imports=opsets)


def _away(v: np.ndarray) -> np.ndarray:
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def _by_hand(levels: np.ndarray) -> np.ndarray:
    """The int8 convolution in integers: the accumulator of ``q_in - z_in`` and the integer
    weights plus the bias, rounded at ``s_out / 2^right`` and then at ``s_out`` (half away
    from zero both times), the output zero point, the RELU and the int8 range; dequantized."""
    w, b = _weights_and_bias()
    padded = np.pad(levels.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    height, width = SHAPE[2:]
    acc = np.zeros((1, CHANNELS, height, width), np.int64)
    for i in range(3):
        for j in range(3):
            window = padded[:, :, i : i + height, j : j + width]
            acc += np.einsum("nchw,kc->nkhw", window, w[:, :, i, j])
    acc += b[None, :, None, None]
    unit = np.float64(S_IN) * S_W.astype(np.float64) * 2.0**RIGHT / np.float64(S_OUT)
    fine = _away(acc * unit[None, :, None, None])
    q = _away(fine / (2.0**RIGHT)[None, :, None, None]) + Z_OUT
    q = np.clip(q, max(Z_OUT, -128), 127)
    return ((q - Z_OUT) * S_OUT).astype(F32)


@pytest.fixture(scope="module")
def int8_conv():
    """The FINN form of the Conv, an input on the input's grid (every level, ties of the
    input Quant included), and the hand-derived output."""
    rng = np.random.default_rng(9)
    levels = rng.integers(-128, 128, SHAPE) - Z_IN
    x = (levels * S_IN).astype(F32)
    return to_finn(_conv_model()), x, _by_hand(levels)


def test_the_conv_reads_integer_levels_and_weights_and_has_no_bias(int8_conv) -> None:
    model, _, _ = int8_conv
    (conv,) = [n for n in model.graph.node if n.op_type == "Conv"]
    assert len(conv.input) == 2, "the bias belongs in the thresholds"
    weight_quant = next(n for n in model.graph.node if n.output[0] == conv.input[1])
    constants = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    weights, scale = constants[weight_quant.input[0]], constants[weight_quant.input[1]]
    np.testing.assert_array_equal(weights, _weights_and_bias()[0])
    assert np.all(scale == 1)
    behind = [n for n in model.graph.node if conv.output[0] in n.input]
    assert [n.op_type for n in behind] == ["MultiThreshold"]
    thresholds = constants[behind[0].input[1]]
    # on the integer accumulator: integers, or half-way between two (finn_grid_thresholds
    # moves a threshold half a step off the values the layer can give)
    assert thresholds.shape[0] == CHANNELS and np.all(2 * thresholds == np.round(2 * thresholds))


def test_the_integer_conv_computes_the_requantization_derived_by_hand(int8_conv) -> None:
    model, x, want = int8_conv
    np.testing.assert_array_equal(execute_qonnx(model, {"x": x})["y"], want)


def test_finn_executor_equals_the_hand_derived_conv_after_every_step(int8_conv) -> None:
    model, x, want = int8_conv
    run = run_finn(model, {"x": x})
    assert run.reached == "specialize_layers", run.stopped
    assert {"qonnx_to_finn", "tidy_up", "streamline", "convert_to_hw"} <= set(run.outputs)
    for step, (output,) in run.outputs.items():
        np.testing.assert_array_equal(output, want, err_msg=step)
