"""The 16x8 kernels on TF-generated single-op models (int16 activations and I/O, int8
weights, int64 biases): 100% equal to the interpreter's builtin reference kernels on 16 seeded
inputs (run by onnxruntime with the Quant nodes as standard ops, as --verify runs them):
CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, AVERAGE_POOL_2D, SOFTMAX, MEAN, TANH, EXP, LOG,
GELU (both forms) and QUANTIZE (requantizing ahead of a CONCATENATION) by default and under
--bit-exact, ADD, SUB and MUL under --bit-exact (an int16 kernel not emulated is refused by
--bit-exact, naming the operator: test_int16_hand_built.py)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from litert_compare import compare, reference_interpreter

from qonnx_ingest.quant_lowering import lower_quants
from tflite2qonnx.api import convert
from tflite2qonnx.reader import read_model

pytestmark = pytest.mark.keras

NAMES = [
    "conv_same_stride2_relu6",
    "depthwise_multiplier2",
    "fully_connected",
    "fully_connected_keep_num_dims",
    "average_pool_same",
    "softmax_rows_of_300",
    "mean_channels",  # 74% equal rounding once
    "concat_channels",  # QUANTIZE int16 -> int16 aligns one input's scale, then CONCATENATION
    "tanh",  # the kernel's interpolated sigmoid table (ops.exact.sigmoid16)
    # EXP, LOG, GELU: the kernels' interpolated 513-entry tables (ops.exact.int16_interpolated)
    "exp",
    "log",
    "gelu",
    "gelu_tanh",
]
# int16 kernels emulated under --bit-exact only (rounding once is within a step of them)
BIT_EXACT_ONLY = ["add", "sub", "mul"]


def _case(name: str):
    from tf_models import CASES, OpCase, _fn

    if name == "softmax_rows_of_300":  # wide rows: the reciprocal's mantissa varies
        return OpCase("SOFTMAX", _fn(lambda tf, x: tf.nn.softmax(x)), ((2, 300),), -8.0, 8.0)
    return CASES[name]


@pytest.fixture(scope="module")
def models() -> dict[str, bytes]:
    from tf_models import build_tflite

    return {
        name: build_tflite(_case(name), True, seed=zlib.crc32(name.encode()) % 1000, int16=True)
        for name in [*NAMES, *BIT_EXACT_ONLY]
    }


def _steps(data: bytes, name: str, bit_exact: bool) -> np.ndarray:
    case = _case(name)
    ops = read_model(data).subgraphs[0].operators
    assert ops[-1].name == case.op and len(ops) <= 2
    it = reference_interpreter(data)
    assert it.get_input_details()[0]["dtype"] == np.int16
    model = lower_quants(convert(data, bit_exact=bit_exact))
    pairs = compare(model, it, n_inputs=16, low=case.low, high=case.high)
    return np.concatenate([p.steps() for p in pairs])


@pytest.mark.parametrize("bit_exact", [False, True], ids=["default", "bit_exact"])
@pytest.mark.parametrize("name", NAMES)
def test_int16_kernel_equals_builtin(models, name: str, bit_exact: bool) -> None:
    steps = _steps(models[name], name, bit_exact)
    assert steps.max() == 0, f"{100 * np.mean(steps == 0):.2f}% equal, {steps.max()} steps"


@pytest.mark.parametrize("name", BIT_EXACT_ONLY)
def test_int16_arithmetic_equals_builtin_under_bit_exact(models, name: str) -> None:
    steps = _steps(models[name], name, True)
    assert steps.max() == 0, f"{100 * np.mean(steps == 0):.2f}% equal, {steps.max()} steps"
    # by default one rounding: within a step (the general-scale ADD rescales its inputs first)
    assert _steps(models[name], name, False).max() <= 1
