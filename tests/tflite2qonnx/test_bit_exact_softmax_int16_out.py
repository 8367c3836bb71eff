"""--bit-exact SOFTMAX from int8 / uint8 to int16 (TFLite Micro's keyword models end with it)
against the interpreter's builtin reference kernels: gemmlowp's fixed-point
reference_ops::Softmax, not the float table of the int8 -> int8 kernel
(``ops/exact/softmax_int16_out.py``).

Single-op models written with tflite_writer (TF's converter does not emit this pair of types),
run in onnxruntime as --verify runs them, on seeded rows over the whole input range and rows
squeezed toward one value (near-ties, sums over many similar terms).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from litert_compare import integer_differences, reference_interpreter
from tflite_writer import build_model

from qonnx_ingest.errors import ConversionError, ConversionWarning
from qonnx_ingest.verification import _onnxruntime_session
from tflite2qonnx.api import convert

# (input dtype, shape, input scale, input zero point, beta)
CASES = {
    "int8_keyword_like": ("int8", (1, 4), 0.1, -10, 1.0),
    "int8_wide_rows": ("int8", (3, 40), 0.0625, 3, 1.0),
    "int8_beta_and_fine_scale": ("int8", (2, 12), 0.011, -128, 2.5),
    "int8_coarse_scale_rank3": ("int8", (2, 3, 10), 0.4, 0, 1.0),
    "uint8": ("uint8", (2, 16), 0.05, 128, 1.0),
}


def _model(dtype: str, shape, s_in: float, zp_in: int, beta: float) -> bytes:
    tensors = [
        {"name": "logits", "shape": shape, "dtype": dtype, "quant": ([s_in], [zp_in])},
        {"name": "probabilities", "shape": shape, "dtype": "int16",
         "quant": ([1.5259022e-05], [-32768])},
    ]  # fmt: skip
    ops = [{"op": "SOFTMAX", "inputs": [0], "outputs": [1],
            "options": ("SoftmaxOptions", {"Beta": beta})}]  # fmt: skip
    return build_model(tensors, ops, [0], [1])


@pytest.mark.parametrize("name", sorted(CASES))
def test_softmax_to_int16_equals_builtin(name: str) -> None:
    dtype, shape, s_in, zp_in, beta = CASES[name]
    data = _model(dtype, shape, s_in, zp_in, beta)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConversionWarning)
        model = convert(data, bit_exact=True, keep_io_layout=True)
    session, runner = _onnxruntime_session(model)
    assert session is not None, runner
    it = reference_interpreter(data)
    info = np.iinfo(dtype)
    rng = np.random.default_rng(11)
    differ = total = 0
    for k in range(60):
        q = rng.integers(info.min, info.max + 1, shape)
        if k % 2:  # squeezed: near-ties and many similar terms
            q = np.clip(q // rng.integers(2, 60) + rng.integers(-40, 40), info.min, info.max)
        d, n = integer_differences(it, session, q.astype(dtype))
        differ, total = differ + d, total + n
    assert total and differ == 0, f"{name}: {differ} of {total} differ"


def test_default_conversion_of_softmax_to_int16_stays_one_node() -> None:
    """Without --bit-exact the op is one Softmax (rounded once by the output's Quant)."""
    model = convert(_model(*CASES["int8_keyword_like"]))
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("Softmax") == 1 and "Gather" not in ops


def test_softmax_to_int16_with_a_multiplier_the_kernel_rejects_is_refused() -> None:
    """beta 0 makes PreprocessSoftmaxScaling's multiplier 0, which the kernel's
    QuantizeMultiplierGreaterThanOne rejects: a ConversionError naming the op and tensor."""
    with pytest.raises(ConversionError, match=r"\(SOFTMAX\): .*'logits'.*needs > 1"):
        convert(_model("int8", (1, 4), 0.1, 0, 0.0), bit_exact=True)
