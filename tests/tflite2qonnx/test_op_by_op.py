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

from collections import defaultdict

import numpy as np
import pytest
from litert_compare import (
    random_input,
    real_value,
    reference_interpreter,
    run_ours,
    valid_window_sums,
)

from support import CORPUS, requires_corpus
from tflite2qonnx.api import convert_subgraph, slice_subgraph
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


def _quantization(detail: dict) -> tuple[float, int] | None:
    params = detail["quantization_parameters"]
    if len(params["scales"]) != 1:
        return None  # per-axis tensors are constants here, never op-by-op feeds
    return float(params["scales"][0]), int(params["zero_points"][0])


def _exact_average_ties(q: np.ndarray, op) -> np.ndarray:
    """Where TFLite's integer AVERAGE_POOL_2D (VALID) averages land exactly on a half.

    Its output is the raw inputs' window mean rounded half away from zero; float evaluation
    of that mean is off by an ulp or so, enough to round an exact tie either way.
    """
    sums = valid_window_sums(q, op.options)
    count = op.options["filter_height"] * op.options["filter_width"]
    return ((2 * sums) % (2 * count) == count).ravel()


def _steps_per_op(path, subgraph, xnnpack: bool, n_inputs: int = 2, bit_exact: bool = False):
    """``bit_exact``: convert with it, and count exact average-pool ties as differences too."""
    it = reference_interpreter(path, preserve_all=True, xnnpack=xnnpack)
    details = it.get_tensor_details()
    steps: dict[tuple[int, str], list[np.ndarray]] = defaultdict(list)
    rng = np.random.default_rng(20261121)
    models = {}
    for _ in range(n_inputs):
        for detail in it.get_input_details():
            it.set_tensor(detail["index"], random_input(detail, rng))
        it.invoke()
        for op in subgraph.operators:
            (out,) = op.outputs
            grid = _quantization(details[out])
            if grid is None or not np.issubdtype(details[out]["dtype"], np.integer):
                continue  # DEQUANTIZE to float: nothing quantized to compare on
            piece = slice_subgraph(subgraph, [op.index])
            if op.index not in models:
                models[op.index] = convert_subgraph(piece, keep_io_layout=True, bit_exact=bit_exact)
            feeds = {
                details[i]["name"]: real_value(it.get_tensor(i), _quantization(details[i]))
                for i in piece.inputs
            }
            ours = run_ours(models[op.index], feeds)[details[out]["name"]]
            scale, zero_point = grid
            ours_q = np.round(ours.astype(np.float64) / scale) + zero_point
            theirs = it.get_tensor(out).astype(np.float64)
            diff = np.abs(ours_q - theirs).ravel()
            # exact ties may round either way in float: count as equal (bit_exact: no leeway)
            if op.name == "AVERAGE_POOL_2D" and not bit_exact:
                diff[_exact_average_ties(it.get_tensor(op.inputs[0]), op) & (diff == 1)] = 0
            steps[(op.index, op.name)].append(diff)
    return {key: np.concatenate(v) for key, v in steps.items()}


@pytest.fixture(scope="module", params=MODELS)
def op_by_op(request):
    """{path: {(op index, op name): steps over every element of 2 seeded inputs}}."""
    path = CORPUS / "tflite" / request.param
    subgraph = read_model(path).subgraphs[0]
    return {p: _steps_per_op(path, subgraph, xnnpack=p == "xnnpack") for p in PATHS}


def test_no_operator_is_more_than_one_step_from_either_tflite_path(op_by_op):
    for kernels, per_op in op_by_op.items():
        for (index, name), steps in per_op.items():
            assert steps.max() <= 1, f"{kernels}: operator {index} {name}: {steps.max()} steps"


def test_every_operator_agrees_on_999_per_mille_with_a_tflite_path(op_by_op):
    for key in op_by_op["builtin"]:
        best = max(np.mean(op_by_op[p][key] == 0) for p in PATHS)
        assert best >= 0.999, f"operator {key[0]} {key[1]}: {best:.5f} equal at best"
