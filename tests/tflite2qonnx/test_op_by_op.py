"""Every operator of the quantized corpus models, fed the interpreter's own input tensors.

The interpreter keeps all intermediate tensors (``experimental_preserve_all_tensors``); each
operator is converted on its own (``slice_subgraph``) and run on its inputs, dequantized, so
its output can be compared with the interpreter's on the output's grid. This isolates each
converter's error from its propagation through a deep network.

TFLite has two CPU paths that disagree with each other by a step here and there: the builtin
reference kernels requantize in fixed point and round twice (gemmlowp's
MultiplyByQuantizedMultiplier), XNNPACK requantizes in fp32 and rounds once, as QONNX's Quant
does. Each op is run against both, on each path's own tensors. Exact ties of an integer
average pool are rounded either way once evaluated in float; they count as agreement (max one
step still holds).
"""

from __future__ import annotations

import numpy as np
import pytest
from litert_compare import steps_per_op

from support import CORPUS, requires_corpus
from tflite2qonnx.reader import read_model

pytestmark = requires_corpus

MODELS = [
    "coral__tf2_mobilenet_v2_1.0_224_ptq.tflite",
    "t2o__mobilenet_v1_0.25_128_quant.tflite",
    "t2o__conv.uint8.tflite",
    "t2o__depthwise-conv.uint8.tflite",
    "tflm__hello_world_int8.tflite",
]
PATHS = ("builtin", "xnnpack")


@pytest.fixture(scope="module", params=MODELS)
def op_by_op(request):
    """{path: {(op index, op name): steps over every element of 2 seeded inputs}}."""
    path = CORPUS / "tflite" / request.param
    subgraph = read_model(path).subgraphs[0]
    return {p: steps_per_op(path, subgraph, xnnpack=p == "xnnpack") for p in PATHS}


def test_no_operator_is_more_than_one_step_from_either_tflite_path(op_by_op):
    for kernels, per_op in op_by_op.items():
        for (index, name), steps in per_op.items():
            assert steps.max() <= 1, f"{kernels}: operator {index} {name}: {steps.max()} steps"


def test_every_operator_agrees_on_999_per_mille_with_a_tflite_path(op_by_op):
    for key in op_by_op["builtin"]:
        best = max(np.mean(op_by_op[p][key] == 0) for p in PATHS)
        assert best >= 0.999, f"operator {key[0]} {key[1]}: {best:.5f} equal at best"
