"""--bit-exact LOG_SOFTMAX (int8) against the interpreter's reference_integer_ops::LogSoftmax
(both resolvers run it for int8): the exponential and rescaled differences as tables, the
row's fixed-point log evaluated in the graph (tflite2qonnx.ops.exact.log_softmax).

The graph is run in onnxruntime as --verify runs it (qonnx's executor, node by node, would
take minutes on these ~300 nodes), on 100 seeded inputs per model, half of them squeezed
toward one value so that rows hold near-ties and small sums as well as wide spreads.
"""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest
from litert_compare import integer_differences, reference_interpreter

from qonnx_ingest.errors import ConversionWarning
from qonnx_ingest.verification import _onnxruntime_session
from tflite2qonnx.api import convert
from tflite2qonnx.reader import read_model

pytestmark = pytest.mark.keras


def _case(name: str):
    from tf_models import CASES, OpCase, _fn

    extra = {
        "log_softmax_wide_rows": OpCase(
            "LOG_SOFTMAX", _fn(lambda tf, x: tf.nn.log_softmax(x * 8.0)), ((3, 40),)
        ),
        "log_softmax_rank4": OpCase(
            "LOG_SOFTMAX", _fn(lambda tf, x: tf.nn.log_softmax(x * 2.0)), ((1, 3, 4, 6),)
        ),
    }
    return extra.get(name) or CASES[name]


def _model(name: str) -> bytes:
    from tf_models import build_tflite

    return build_tflite(_case(name), True, seed=zlib.crc32(name.encode()) % 1000)


@pytest.mark.parametrize(
    "name", ["log_softmax", "log_softmax_twice", "log_softmax_wide_rows", "log_softmax_rank4"]
)
def test_log_softmax_equals_builtin(name: str) -> None:
    data = _model(name)
    assert "LOG_SOFTMAX" in {op.name for op in read_model(data).subgraphs[0].operators}
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConversionWarning)
        model = convert(data, bit_exact=True, keep_io_layout=True)
    session, runner = _onnxruntime_session(model)
    assert session is not None, runner
    it = reference_interpreter(data)
    (inp,) = it.get_input_details()
    rng = np.random.default_rng(5)
    differ = total = 0
    for k in range(100):
        q = rng.integers(-128, 128, inp["shape"])
        if k % 2:
            q = q // rng.integers(2, 40)
        d, n = integer_differences(it, session, q.astype(np.int8))
        differ, total = differ + d, total + n
    assert total and differ == 0, f"{name}: {differ} of {total} differ"


@pytest.mark.parametrize("name", ["log_softmax", "log_softmax_wide_rows"])
def test_uint8_log_softmax_equals_both_builtin_resolvers(name: str) -> None:
    """uint8: the int8 kernel's arithmetic with the output offset 255, on the reference and
    the optimized resolver alike (the float table TFLite's sources describe does not run)."""
    from test_bit_exact_reduce import _interpreter, as_uint8

    data = as_uint8(_model(name))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConversionWarning)
        model = convert(data, bit_exact=True, keep_io_layout=True)
    session, runner = _onnxruntime_session(model)
    assert session is not None, runner
    rng = np.random.default_rng(7)
    differ = total = 0
    for optimized in (False, True):
        it = _interpreter(data, optimized)
        (inp,) = it.get_input_details()
        assert inp["dtype"] == np.uint8
        for k in range(40):
            q = rng.integers(0, 256, inp["shape"])
            if k % 2:
                q = np.clip(q // rng.integers(2, 40) + rng.integers(0, 220), 0, 255)
            d, n = integer_differences(it, session, q)
            differ, total = differ + d, total + n
    assert total and differ == 0, f"{name}: {differ} of {total} differ"
