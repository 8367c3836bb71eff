"""The integer (8x8_16) UNIDIRECTIONAL_SEQUENCE_LSTM variants TF's converter does not emit
from Keras (projection, peepholes, integer layer normalization, CIFG with them), built by hand
(``lstm_int_models``) and compared integer for integer with the interpreter's builtin kernel.

Every comparison starts the interpreter from reset variables, as the converted graph starts
from the initial (zero) state.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from litert_compare import random_input, real_value, reference_interpreter
from lstm_int_models import integer_lstm

import tflite2qonnx
from qonnx_ingest.errors import ConversionError
from qonnx_ingest.verification import run_converted

OP = "UNIDIRECTIONAL_SEQUENCE_LSTM"


def assert_integers_equal(data: bytes, n_inputs: int = 3, seed: int = 0) -> onnx.ModelProto:
    """Every output integer of the converted model (in onnxruntime) equal to the
    interpreter's, on the builtin and the default (XNNPACK-delegating) op resolvers."""
    model = tflite2qonnx.convert(data)
    it = reference_interpreter(data)
    (inp,), (out,) = it.get_input_details(), it.get_output_details()
    rng = np.random.default_rng(seed)
    inputs = [random_input(inp, rng) for _ in range(n_inputs)]
    outputs, runner = run_converted(
        model, [{inp["name"]: real_value(x, inp["quantization"])} for x in inputs]
    )
    assert runner.startswith("onnxruntime")
    scale, zero_point = out["quantization"]
    for xnnpack in (False, True):
        it = reference_interpreter(data, xnnpack=xnnpack)
        for x, ours in zip(inputs, outputs, strict=True):
            it.reset_all_variables()
            it.set_tensor(inp["index"], x)
            it.invoke()
            theirs = it.get_tensor(out["index"]).astype(np.float64)
            mine = np.round(ours[out["name"]].astype(np.float64) / scale) + zero_point
            steps = np.abs(mine - theirs)
            assert steps.max() == 0, f"{np.mean(steps == 0):.4f} equal, max {steps.max()} steps"
            assert np.ptp(theirs) > 20  # the outputs move: the comparison can fail
    return model


def quant_widths(model: onnx.ModelProto, name_part: str) -> set[int]:
    """Bit widths of the Quant nodes whose output name contains ``name_part``."""
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    return {
        int(inits[n.input[3]])
        for n in model.graph.node
        if n.op_type in ("Quant", "IntQuant") and name_part in n.output[0]
    }


VARIANTS = {
    "projection": {"projection": 5, "proj_clip": 0.3, "hidden_zero_point": -3},
    "projection_wider_no_bias": {"projection": 10, "projection_bias": False},
    "peephole": {"peephole": True, "cell_clip": 0.5},
    "cifg_peephole": {"peephole": True, "cifg": True, "hidden_zero_point": 2},
    "peephole_projection_batch1": {"peephole": True, "projection": 5, "batch": 1},
    # 1100 inputs: float32 sums of the integer products could be inexact, the weights split
    "wide_input_split_weights": {"n_in": 1100, "steps": 2, "n_cell": 4, "projection": 3},
    "layer_norm": {"layer_norm": True, "hidden_zero_point": 3},
    "layer_norm_6_cells_batch3_time_major": {
        "layer_norm": True, "n_cell": 6, "batch": 3, "time_major": True,
    },
    "everything": {
        "layer_norm": True, "peephole": True, "cifg": True, "projection": 8,
        "cell_clip": 0.7, "proj_clip": 0.5, "seed": 4,
    },
}  # fmt: skip


@pytest.mark.parametrize("variant", VARIANTS)
def test_integer_lstm_variant_equals_interpreter(variant: str) -> None:
    """Projection (int8 weights, int32 bias, proj_clip on the raw integers), peepholes (int16
    weights on the cell state, their own rescale), integer layer norm, CIFG with them."""
    assert_integers_equal(integer_lstm(**VARIANTS[variant]))


def test_layer_norm_lstm_keeps_int16_quant_nodes_on_its_gates() -> None:
    """Layer norm's result, the gate sums and the peephole terms are Quant nodes of 16 bits
    (the identity on their grids); the hidden state and projection ones of 8."""
    model = tflite2qonnx.convert(
        integer_lstm(layer_norm=True, peephole=True, projection=4, batch=1, steps=2)
    )
    for part in ("lstm_layer_norm", "lstm_gate_peephole", "lstm_gate"):
        assert quant_widths(model, part) == {16}, part
    assert quant_widths(model, "lstm_hidden") == {8}
    assert quant_widths(model, "lstm_projection") == {8}


@pytest.mark.parametrize(
    "kw",
    [{"gate_grid": 300}, {"gate_grid": 3000, "n_cell": 5}],
    ids=["small_variances", "variance_guard"],
)
def test_layer_norm_on_coarse_gate_grids_equals_interpreter(kw: dict) -> None:
    """Coarse gate grids give rows of small variance: the inverse square root's left shift
    into the multiplier, the variance guard (variance < 1) and its 1 (INT32_MAX) case."""
    assert_integers_equal(integer_lstm(layer_norm=True, **kw))


def test_peephole_with_narrow_projection_over_a_batch_is_refused() -> None:
    """The kernel runs the peephole over n_output values of the flattened batch: with a
    projection narrower than the cell and batch 2 that mixes batch entries (not converted)."""
    with pytest.raises(ConversionError, match=f"integer {OP} with peepholes and a projection"):
        tflite2qonnx.convert(integer_lstm(peephole=True, projection=5, batch=2))


def test_per_channel_weights_are_refused_naming_the_tensor() -> None:
    """The 8x8_16 kernel derives its rescales from one scale per weight tensor; per-channel
    weights (which the interpreter still runs) are not converted."""
    with pytest.raises(ConversionError, match=f"w_x0'.*integer {OP} with per-channel"):
        tflite2qonnx.convert(integer_lstm(per_channel=True))
